"""HostManager: one worker's view of every compute node, kept honest.

It keeps the newest report of each (host, nodename) and what the
inventory says of the node's usage: the node's ``node_usage`` row and
the claims still pending on it, made by this worker or any other
worker or daemon sharing the inventory.  The view a filter sees is the
report with that usage laid over it.

The inventory is the authority (``scheduler.db.usage``): ``claim()``
writes the placement, with its capacity check, before any caller hears
of it.  Memory is a cache, made current before each request by
``refresh_usage()``: one query for the usage rows changed since the
last look (the usage sequence), one more for the pending claims of
those nodes.  A claim that loses a race raises ``ClaimConflict``; the
node is refreshed so the next choice sees it full.

Shared state is guarded by one lock and views are replaced, never
changed in place: a request that already holds a view keeps a
consistent one, under eventlet and under native threads alike.
"""

import dataclasses
import datetime
import time
import typing
import uuid as uuid_lib

from oslo_config import cfg
from oslo_log import log as logging
from oslo_utils import timeutils

from scheduler import concurrency
from scheduler.db import usage
from scheduler import exception
from scheduler import host_view
from scheduler import metrics
from scheduler import notifications
from scheduler import objects
from scheduler.resources import compute
from scheduler.resources import liveness
from scheduler.resources import numa
from scheduler.resources import pci

LOG = logging.getLogger(__name__)
CONF = cfg.CONF

#: How far behind the highest sequence number seen each refresh looks
#: again, where the inventory's sequence is native.  Its numbers are
#: handed out when a transaction writes and become visible when it
#: commits, which may be out of order; rows committed late are caught by
#: this window (and, if missed, by the claim's own check, which
#: refreshes the node).  SQLite's counter row makes commits visible in
#: order: no window there (``usage.commits_in_seq_order``).
_SEQ_LOOKBACK = 16

#: Nodes ``flush`` writes per transaction.
FLUSH_BATCH = 1000


@dataclasses.dataclass
class Claim(usage.Placement):
    """Resources of one placed instance that no report includes yet."""

    claimed_at: float = dataclasses.field(default_factory=time.time)
    status: str = 'claimed'

    @classmethod
    def from_row(cls, row: dict) -> 'Claim':
        return cls(
            row['instance_uuid'], row['host'], row['nodename'],
            row['memory_mb'], row['vcpus'], row['disk_gb'],
            project_id=row.get('project_id'), user_id=row.get('user_id'),
            numa=[tuple(x) for x in row.get('numa') or []],
            pci=[(_pool_key(key), count)
                 for key, count in row.get('pci') or []],
            claimed_at=(_timestamp(row['updated_at'])
                        if row.get('updated_at') else time.time()),
            status=row.get('status', 'claimed'))


@dataclasses.dataclass
class PlannedClaim:
    """One instance's claim as its request plans it (``plan_claim``),
    before the inventory has it (``claim_many``)."""

    request: usage.ClaimRequest
    #: The node's view with this claim (and the request's earlier ones
    #: on the node) laid over it.
    view: typing.Any
    #: The view it was planned on (``view`` without this claim).
    base: typing.Any = None


def _inventory():
    from scheduler.db import api as db_api
    return db_api


def _usage_store():
    return usage


class HostManager:
    """Host states, claims and aggregates for one scheduler worker."""

    def __init__(self, inventory=None, usage_store=None):
        self._db = inventory
        self._usage_db = usage_store
        self._lock = concurrency.native_lock()
        #: key -> the compute's last report, as a HostView without claims,
        #: with the host's aggregates attached.
        self._reports: dict = {}
        #: key -> the view filters see (report + usage + pending claims):
        #: the report view itself when there is nothing to lay over it.
        self._states: dict = {}
        #: key -> the node's usage row as last read (or as we changed it).
        self._usage: dict = {}
        #: key -> {instance uuid: Claim} pending on the node.
        self._pending: dict = {}
        self._high_water = 0
        #: ``_SEQ_LOOKBACK``, or 0 where commits are seen in order.
        self._lookback: int | None = None
        self._aggregates: list = []
        self._host_aggregates: dict = {}
        #: Nodes whose last report is not in the inventory yet.
        self._dirty_reports: set = set()
        #: Nodes whose saved report only needs a new time.
        self._touched: set = set()
        #: host -> its nodes' keys (the keys of ``_reports``).
        self._nodes_of: dict = {}
        self._usage_reports: dict = {}
        self._down: set = set()
        self._aggregates_stamp: tuple | None = None
        #: Changes made to ``_aggregates`` (a read that began before the
        #: last one is stale).
        self._aggregates_version = 0
        #: Writes of aggregates in flight (``_writing_aggregates``).
        self._aggregate_writes = 0
        #: Told of every view composed or dropped (``watch_views``).
        self._watchers: list = []

    @property
    def db(self):
        if self._db is None:
            self._db = _inventory()
        return self._db

    @property
    def usage_db(self):
        if self._usage_db is None:
            self._usage_db = _usage_store()
        return self._usage_db

    # -- loading and saving ---------------------------------------------

    def load_from_inventory(self) -> None:
        """Load reports, aggregates, usage and pending claims saved before.

        A restarted worker schedules around every claim in the inventory
        before any compute has reported again.
        """
        self.refresh_aggregates()
        reports = {}
        for row in self.db.host_reports_get_all():
            try:
                state = objects.HostState.obj_from_primitive(row['report'])
            except Exception as e:
                LOG.warning('Ignoring unreadable saved report of %s/%s: %s',
                            row['host'], row['nodename'], e)
                continue
            updated = row.get('updated_at')
            view = host_view.HostView(
                state, _timestamp(updated) if updated else None)
            view.disabled = bool(row.get('disabled', view.disabled))
            reports[view.key()] = view
        usage_rows = self.usage_db.usage_get_all()
        pending = self.usage_db.pending_claims()
        with self._lock:
            for key, view in reports.items():
                self._attach_aggregates(view, like=self._reports.get(key))
                self._reports[key] = view
                self._nodes_of.setdefault(key[0], set()).add(key)
            self._set_usage_rows(usage_rows)
            self._set_pending(pending, [row_key(r) for r in usage_rows])
            for key in list(self._reports):
                self._compose(key)
        LOG.info('Loaded %(hosts)d host state(s), %(agg)d aggregate(s) and '
                 '%(claims)d pending claim(s) from the inventory',
                 {'hosts': len(reports), 'agg': len(self._aggregates),
                  'claims': len(pending)})

    def flush(self) -> None:
        """Write new reports to the inventory (periodic task, shutdown).

        Claims are not written here: they are in the inventory before
        the caller hears of them.  Reports are: the full report for a
        restarted worker, and the usage it carries, which moves the
        claims it confirms out of pending.

        Rows are made from the nodes' views when written, and written
        ``FLUSH_BATCH`` nodes a transaction: a fleet's first reports (or
        the backlog of a worker that could not write for a while) were
        once held as rows until one flush wrote them all: at 50,000
        new nodes that left the process 125 MB larger (577 against 452
        MB resident).
        """
        with self._lock:
            dirty, self._dirty_reports = self._dirty_reports, set()
            usage_reports, self._usage_reports = self._usage_reports, {}
            touched, self._touched = self._touched - dirty, set()
        dirty_keys = sorted(dirty)
        usage_keys = sorted(usage_reports)
        written = applied = 0
        try:
            now = timeutils.utcnow()
            for chunk in _batches(dirty_keys):
                rows = self._report_rows(chunk, now)
                if rows:
                    self.db.host_reports_save(rows)
                written += len(chunk)
            if touched:
                self.db.host_reports_touch(sorted(touched), now)
                touched = set()
            for chunk in _batches(usage_keys):
                confirmed = self.usage_db.apply_reports(
                    [usage_reports[key] for key in chunk])
                if confirmed:
                    LOG.debug('Reports confirmed %d claim(s)',
                              len(confirmed))
                self.refresh_nodes(list(chunk))
                applied += len(chunk)
        except Exception:
            # Keep what was not written for the next flush.
            LOG.exception('Could not write to the inventory; will retry')
            with self._lock:
                self._touched.update(touched)
                self._dirty_reports.update(
                    key for key in dirty_keys[written:]
                    if key in self._reports)
                for key in usage_keys[applied:]:
                    self._usage_reports.setdefault(key, usage_reports[key])

    def _report_rows(self, keys: list, now: datetime.datetime) -> list:
        """What ``host_reports_save`` writes of nodes ``keys``: each
        node's last report, rebuilt from its view (a node forgotten
        since has none)."""
        with self._lock:
            views = [self._reports.get(key) for key in keys]
        return [dict(_report_row(view.report), updated_at=now)
                for view in views if view is not None]

    # -- reports from computes ------------------------------------------

    def update_from_report(self, report) -> None:
        """Take a compute's report as the new state of its node.

        A report that says what the last one said (a quiet node's
        periodic report) only tells that the node is alive: its views
        get the new time, and the inventory only the time, at the next
        flush.  Anything else builds the node's views anew.
        """
        key = (report.host, report.nodename)
        with self._lock:
            old = self._reports.get(key)
        if old is not None and old.says_the_same(report):
            with self._lock:
                if (self._reports.get(key) is old and key not in self._down
                        and key not in self._usage_reports
                        and not self._usage_changed(key, old)):
                    self._alive(key, old)
                    return
        view = host_view.HostView(report)
        key = view.key()
        with self._lock:
            back = key in self._down
            new = not back and key not in self._reports
            self._down.discard(key)
            self._attach_aggregates(view, like=self._reports.get(key))
            self._reports[key] = view
            self._nodes_of.setdefault(key[0], set()).add(key)
            self._dirty_reports.add(key)
            if self._usage_changed(key, view):
                self._usage_reports[key] = _node_report(view)
            self._compose(key)
        if back:
            LOG.info('Host %s/%s is reporting again; scheduling to it', *key)
        elif new:
            LOG.info('New host %s/%s reported', *key)

    def _alive(self, key, report_view) -> None:
        """Node ``key`` reported again, with nothing new: new views with
        the time of this report (views are replaced, never changed)."""
        now = liveness.now()
        fresh = report_view.successor(received_at=now)
        self._reports[key] = fresh
        self._touched.add(key)
        self._renew_state(key, report_view, fresh)

    def _renew_state(self, key, old_report, report) -> None:
        """Publish the successor of node ``key``'s view, now that its
        report view ``old_report`` was succeeded by ``report`` (a new
        time, aggregates attached again): the report itself when it was
        the view, else the view's successor over it."""
        state = self._states.get(key)
        if state is None:
            return
        if state is old_report:
            view = report
        else:
            view = state.successor(received_at=report.received_at)
            view._reported = report
            view.set_aggregates(report.aggregates, like=report)
        self._publish(key, view)

    def _usage_changed(self, key, view) -> bool:
        """Whether the report says more than the node's usage row has."""
        row = self._usage.get(key)
        if row is None:
            return True
        listed = set(view.instance_uuids)
        if any(uuid in listed for uuid in self._pending.get(key, {})):
            return True
        return (row['reported_memory_mb'], row['reported_vcpus'],
                row['reported_disk_gb'], row['reported_instances']) != (
            view.memory_mb_used, view.vcpus_used, view.local_gb_used,
            view.num_instances)

    def forget_deleted_nodes(self) -> list:
        """Drop down nodes an operator deleted from the inventory.

        Only nodes that stopped reporting are looked up (``scheduler-manage
        hosts delete`` refuses the others), so this costs nothing while
        every node reports.
        """
        with self._lock:
            down = sorted(self._down)
        if not down:
            return []
        kept = {row_key(r) for r in self.usage_db.usage_get_nodes(down)}
        gone = [key for key in down if key not in kept]
        with self._lock:
            for key in gone:
                self._touched.discard(key)
                self._dirty_reports.discard(key)
                for table in (self._reports, self._states, self._usage,
                              self._pending, self._usage_reports):
                    table.pop(key, None)
                nodes = self._nodes_of.get(key[0], set())
                nodes.discard(key)
                if not nodes:
                    self._nodes_of.pop(key[0], None)
                self._view_removed(key)
                self._down.discard(key)
        for key in gone:
            LOG.info('Host %s/%s was deleted from the inventory; forgot it',
                     *key)
        return gone

    def check_down_hosts(self) -> list:
        """Log, once, each host that stopped reporting; return their keys."""
        newly_down = []
        now = liveness.now()
        cutoff = liveness.cutoff(now)
        with self._lock:
            for key, state in self._states.items():
                if state.received_at >= cutoff or key in self._down:
                    continue
                self._down.add(key)
                newly_down.append((key, state.seconds_since_report(now)))
        for key, age in newly_down:
            LOG.warning('Host %(host)s/%(node)s has not reported for '
                        '%(age)d s (service_down_time %(limit)d s): no '
                        'longer scheduling to it',
                        {'host': key[0], 'node': key[1], 'age': age,
                         'limit': CONF.scheduler.service_down_time})
        return [key for key, _age in newly_down]

    # -- keeping the cache current ----------------------------------------

    def refresh_usage(self) -> int:
        """Pull usage changed by any worker since the last look.

        Cheap when nothing changed (one indexed query).  Returns how
        many nodes were refreshed.
        """
        rows = self.usage_db.changed_since(
            max(0, self._high_water - self._seq_lookback()))
        with self._lock:
            changed = [row_key(row) for row in rows
                       if self._row_is_new(row)]
            if rows:
                # Rows this worker already holds (its own claims) move
                # the mark too, or every request would read them again.
                self._high_water = max(self._high_water, rows[-1]['seq'])
        if changed:
            self._reload_nodes(changed, rows)
        return len(changed)

    def _seq_lookback(self) -> int:
        if self._lookback is None:
            in_order = getattr(self.usage_db, 'commits_in_seq_order', None)
            self._lookback = 0 if in_order is not None and in_order() \
                else _SEQ_LOOKBACK
        return self._lookback

    def refresh_nodes(self, keys: list) -> None:
        """Re-read the usage and pending claims of ``keys`` now."""
        if not keys:
            return
        wanted = set(keys)
        # Every row when most nodes are wanted (a fleet's first flush);
        # else only theirs: a flush writes a batch at a time, and reading
        # every row per batch made loading 100,000 nodes quadratic.
        rows = [row for row in self.usage_db.usage_get_all()
                if row_key(row) in wanted] \
            if len(wanted) > 50 and 2 * len(wanted) > len(self._usage) \
            else self._usage_rows_of(wanted)
        self._reload_nodes(list(wanted), rows)

    def _usage_rows_of(self, keys: set) -> list:
        # Some nodes (a lost claim race, reports): read them by host.
        store = self.usage_db
        getter = getattr(store, 'usage_get_nodes', None)
        if getter is not None:
            return getter(sorted(keys))
        return [row for row in store.usage_get_all() if row_key(row) in keys]

    def _row_is_new(self, row: dict) -> bool:
        known = self._usage.get(row_key(row))
        return known is None or (known['generation'], known['seq']) != (
            row['generation'], row['seq'])

    def _reload_nodes(self, keys: list, rows: list) -> None:
        pending = self.usage_db.pending_claims(keys)
        wanted = set(keys)
        with self._lock:
            self._set_usage_rows([r for r in rows if row_key(r) in wanted])
            self._set_pending(pending, keys)
            for key in keys:
                self._compose(key)

    def _set_usage_rows(self, rows: list) -> None:
        for row in rows:
            self._usage[row_key(row)] = row
            self._high_water = max(self._high_water, row['seq'])

    def _set_pending(self, rows: list, keys) -> None:
        """Replace the pending claims of ``keys`` with ``rows``'."""
        fresh: dict = {key: {} for key in keys}
        for row in rows:
            fresh.setdefault(row_key(row), {})[row['instance_uuid']] = \
                Claim.from_row(row)
        self._pending.update(fresh)

    def _compose(self, key) -> None:
        """Build the view filters see for ``key`` from what is known."""
        view = self._composed(key)
        if view is not None:
            self._publish(key, view)
        elif self._states.pop(key, None) is not None:
            self._view_removed(key)

    def _composed(self, key):
        """The view of ``key`` from its report, usage row and pending
        claims; None when it has no report."""
        report = self._reports.get(key)
        if report is None:
            return None
        pending = self._pending.get(key)
        if pending:
            listed = set(report.instance_uuids)
            unlisted = [c for c in pending.values()
                        if c.instance_uuid not in listed]
        else:
            unlisted = []
        row = self._usage.get(key)
        if not unlisted and (row is None or _row_says(row, report)):
            # Nothing to lay over the report: it is the view (one view
            # a node, not two, for every node without claims in flight).
            return report
        view = report.copy()
        if row is not None:
            # The row's reported and claimed usage are one consistent
            # pair, the one every claim is checked against.
            view.memory_mb_used = (row['reported_memory_mb']
                                   + row['claimed_memory_mb'])
            view.vcpus_used = row['reported_vcpus'] + row['claimed_vcpus']
            view.local_gb_used = (row['reported_disk_gb']
                                  + row['claimed_disk_gb'])
            view.num_instances = (row['reported_instances']
                                  + row['claimed_instances'])
        else:
            for claim in unlisted:
                view.memory_mb_used += claim.memory_mb
                view.vcpus_used += claim.vcpus
                view.local_gb_used += claim.disk_gb
                view.num_instances += 1
        if unlisted:
            view.num_io_ops += len(unlisted)
            view.instance_uuids = list(view.instance_uuids) + [
                c.instance_uuid for c in unlisted]
            for claim in unlisted:
                numa.apply_numa_usage(view, claim.numa)
                pci.apply_pci_usage(view, claim.pci)
        return view

    def watch_views(self, watcher) -> None:
        """Tell ``watcher`` of every view, now and whenever one changes.

        ``watcher.view_changed(key, view)`` is called for each current
        view, then for each view composed (or re-attached to changed
        aggregates); ``watcher.view_removed(key)`` when a node is
        dropped.  Calls are made under the manager's lock, in the order
        of the changes: they must be quick and must not yield
        (``scheduler.columns.ColumnStore`` keeps one row per call).
        """
        with self._lock:
            self._watchers.append(watcher)
            for key, view in self._states.items():
                watcher.view_changed(key, view)

    def _view_removed(self, key) -> None:
        for watcher in self._watchers:
            watcher.view_removed(key)

    # -- what the drivers read ------------------------------------------

    def get_all_host_states(self) -> list:
        """Every known node, up or down (ComputeFilter drops the down)."""
        with self._lock:
            return list(self._states.values())

    def get_up_host_states(self) -> list:
        cutoff = liveness.cutoff()
        return [s for s in self.get_all_host_states()
                if s.received_at >= cutoff and not s.disabled
                and not s.forced_down]

    def get_host_state(self, host: str, nodename: str | None = None):
        for state in self.get_all_host_states():
            if state.host == host and (nodename is None
                                       or state.nodename == nodename):
                return state
        raise exception.HostNotFound(host=host)

    def current(self, host_state):
        """The newest view of ``host_state``'s node (after a claim)."""
        with self._lock:
            return self._states.get(host_state.key(), host_state)

    def pending_claims(self, key) -> list:
        with self._lock:
            return list(self._pending.get(key, {}).values())

    # -- claims ---------------------------------------------------------

    def placements(self, instance_uuids: list) -> dict:
        """The inventory's placements of ``instance_uuids``, by uuid."""
        if not instance_uuids:
            return {}
        return self.usage_db.placements_get(instance_uuids)

    def claim(self, host_state, spec_obj, instance_uuid: str | None,
              limits: dict | None = None, replace: bool = False) -> Claim:
        """Claim one instance of ``spec_obj`` on ``host_state``'s node.

        Written to the inventory before returning.  Raises
        ``ClaimConflict`` when the node no longer has room under
        ``limits`` (the node is refreshed first) and
        ``InstanceAlreadyPlaced`` when the instance is pending elsewhere
        and ``replace`` is not set.  An instance without a uuid (an old
        caller) is claimed under a made-up one, which holds the capacity
        until the claim expires.
        """
        planned = self.plan_claim(self.current(host_state), spec_obj,
                                  instance_uuid, limits, replace)
        return self.claim_many([planned])[0]

    def plan_claim(self, host_state, spec_obj, instance_uuid: str | None,
                   limits: dict | None = None,
                   replace: bool = False) -> PlannedClaim:
        """One instance's claim on ``host_state``, not made yet.

        ``host_state`` is the view to claim on: the current one, or for
        a later instance of the same request the ``view`` of an earlier
        ``PlannedClaim`` on that node.  The plan's ``view`` has this
        instance's usage, NUMA cells and PCI devices laid over a copy,
        as the node will look once ``claim_many`` made the claim: the
        next instance of the request is chosen against it.
        """
        key = host_state.key()
        memory_mb, vcpus, disk_gb = compute.resources_of(spec_obj)
        uuid = instance_uuid or str(uuid_lib.uuid4())
        # NUMA cells and PCI devices are picked on a scratch copy: the
        # shared view changes only once the inventory said yes.
        scratch = host_state.copy()
        numa_used = numa.claim_numa(scratch, spec_obj)
        pci_used = pci.claim_pci(scratch, spec_obj)
        scratch.memory_mb_used += memory_mb
        scratch.vcpus_used += vcpus
        scratch.local_gb_used += disk_gb
        scratch.num_instances += 1
        scratch.num_io_ops += 1
        scratch.instance_uuids = list(scratch.instance_uuids) + [uuid]
        with self._lock:
            row = self._usage.get(key)
        generation = None
        if numa_used or pci_used:
            if row is None or row['generation'] < 0:
                self.refresh_nodes([key])
                with self._lock:
                    row = self._usage.get(key)
            generation = row['generation'] if row is not None else 0
        request = self.usage_db.ClaimRequest(
            instance_uuid=uuid,
            host=host_state.host, nodename=host_state.nodename,
            memory_mb=memory_mb, vcpus=vcpus, disk_gb=disk_gb,
            project_id=spec_obj.obj_get('project_id'),
            user_id=spec_obj.obj_get('user_id'),
            limits=dict(limits or {}), generation=generation,
            numa=[list(x) for x in numa_used],
            pci=[list(x) for x in pci_used],
            reported=_reported_values(self._reports.get(key, host_state)),
            replace=replace)
        return PlannedClaim(request, scratch, host_state)

    def claim_many(self, planned: list) -> list:
        """Make the ``PlannedClaim`` s of one request, all or none.

        One inventory transaction (``scheduler.db.usage.claim_many``).
        Raises ``ClaimConflict`` naming a node that no longer had room
        (refreshed first: the request's next try sees it as it is) and
        ``InstanceAlreadyPlaced`` when an instance is pending elsewhere
        and its plan does not replace it.  Returns the ``Claim`` s.
        """
        store = self.usage_db
        try:
            placed = store.claim_many([p.request for p in planned])
        except store.ClaimConflict as e:
            metrics.record_claim_conflict()
            key = e.key
            LOG.debug('Lost the claim race on %s/%s; refreshing it', *key)
            self.refresh_nodes([key])
            raise exception.ClaimConflict(host=key[0], nodename=key[1])
        except store.AlreadyPlaced as e:
            raise exception.InstanceAlreadyPlaced(
                instance_uuid=e.placement['instance_uuid'],
                host=e.placement['host'], nodename=e.placement['nodename'])
        claims = [Claim.from_row(row) for row in placed]
        by_node: dict = {}
        for claim, row, plan in zip(claims, placed, planned):
            by_node.setdefault((claim.host, claim.nodename), []).append(
                (claim, row['usage'], plan))
        moved_from: set = set()
        with self._lock:
            for key, made in by_node.items():
                pending = self._pending.setdefault(key, {})
                for claim, _after, plan in made:
                    pending[claim.instance_uuid] = claim
                    if plan.request.replace:
                        # A replaced claim gave its old node's usage back.
                        moved_from.update(
                            other for other, claims in self._pending.items()
                            if other != key and claim.instance_uuid in claims)
                plans = [plan for _c, _a, plan in made]
                known = self._usage_after_claim(
                    self._usage.get(key), made[-1][1],
                    [plan.request for plan in plans])
                if known is not None:
                    self._usage[key] = known
                if known is made[-1][1] and self._plans_hold(key, plans):
                    self._publish(key, plans[-1].view)
                else:
                    self._compose(key)
        self.refresh_nodes(sorted(moved_from))
        return claims

    def _plans_hold(self, key, plans: list) -> bool:
        """Whether the last of ``plans`` (a request's claims on node
        ``key``, just made) is the view ``_compose`` would now build.

        The caller checked that the inventory's row moved by these
        claims alone (``_usage_after_claim`` took it as is: every write
        of a usage row, a report's too, moves its generation).  The
        plans hold when nothing reached the node since the first was
        made on its current view (views are replaced on every change,
        so identity tells) and the claims are plain: no NUMA cell, PCI
        device or replaced placement, no instance the compute already
        lists.  Composing again cost more than the rest of a later
        instance's claim.
        """
        base = self._states.get(key)
        report = self._reports.get(key)
        if report is None:
            return False
        listed = report.instance_uuids
        for plan in plans:
            request = plan.request
            if (plan.base is not base or request.numa or request.pci
                    or request.replace or request.instance_uuid in listed):
                return False
            base = plan.view
        return True

    def _publish(self, key, view) -> None:
        """Make ``view`` node ``key``'s view, and tell the watchers."""
        self._states[key] = view
        for watcher in self._watchers:
            watcher.view_changed(key, view)

    @staticmethod
    def _usage_after_claim(known: dict | None, after: dict | None,
                           requests: list) -> dict | None:
        """The cached usage row of a node this worker just claimed on.

        The row the claim's transaction read back is taken as is when
        this claim was its only change since the cached one (the
        generation moved by one): the next request then has nothing to
        reload.  Otherwise (another worker claimed there meanwhile) the
        claims are added to the cached row, marked stale, so that the
        next ``refresh_usage`` reads the node's claims again.
        """
        if (known is not None and after is not None
                and known['generation'] >= 0
                and after['generation'] == known['generation'] + 1):
            return after
        if known is None:
            return None
        return dict(known, generation=-1,
                    claimed_memory_mb=known['claimed_memory_mb']
                    + sum(r.memory_mb for r in requests),
                    claimed_vcpus=known['claimed_vcpus']
                    + sum(r.vcpus for r in requests),
                    claimed_disk_gb=known['claimed_disk_gb']
                    + sum(r.disk_gb for r in requests),
                    claimed_instances=known['claimed_instances']
                    + len(requests))

    def release(self, claim: Claim) -> None:
        """Give back a claim (e.g. a later instance of the request failed)."""
        self.usage_db.release([claim.instance_uuid])
        self.refresh_nodes([(claim.host, claim.nodename)])

    def expire_claims(self) -> list:
        """Drop claims the compute kept reporting without for too long.

        Every worker looks; the inventory hands each expired claim to
        exactly one of them, which logs it and says so in a notification
        and a metric.  Returns the placements this worker expired.
        """
        expiry = CONF.scheduler.service_down_time
        candidates, keys = [], set()
        with self._lock:
            for key, claims in self._pending.items():
                report = self._reports.get(key)
                if report is None:
                    continue
                for claim in claims.values():
                    if (claim.status == 'claimed'
                            and report.received_at - claim.claimed_at
                            > expiry):
                        candidates.append(claim.instance_uuid)
                        keys.add(key)
        if not candidates:
            return []
        cutoff = timeutils.utcnow() - datetime.timedelta(seconds=expiry)
        expired = self.usage_db.expire(candidates, cutoff)
        for placement in expired:
            notifications.claim_expired(Claim.from_row(placement))
        self.refresh_nodes(sorted(keys))
        return expired

    # -- aggregates -----------------------------------------------------

    def refresh_aggregates(self) -> None:
        """Re-read aggregates from the inventory (other workers change them).

        Host views are re-attached only when something changed: with ten
        thousand hosts that is the expensive part, and aggregates rarely
        change.  Nothing is read while this worker writes aggregates it
        was sent: memory is ahead of the inventory then, and what a read
        found mid-write (a zone of 50,000 hosts took seconds to write)
        would put the old aggregates back until the next read.
        """
        with self._lock:
            if self._aggregate_writes:
                return
            version = self._aggregates_version
        stamp = self.db.aggregates_stamp()
        if stamp == self._aggregates_stamp:
            return
        # Off the event loop: every aggregate's hosts, 100,000 strings at
        # 100,000 hosts.
        rows = concurrency.run_blocking(self.db.aggregate_get_all)
        with self._lock:
            known = self._known_aggregates()
            if self._set_aggregates([_known_or_new(known, row)
                                     for row in rows], version=version):
                self._aggregates_stamp = stamp

    def update_aggregates(self, aggregates: list) -> None:
        """Aggregates another service changed: apply, then save.

        Applied in memory first, so this worker schedules with them even
        if saving fails (every worker gets the same cast and saves the
        same rows; the inventory ends up right either way).
        """
        changed = {agg.name: agg for agg in aggregates}
        uuids = {agg.obj_get('uuid') for agg in aggregates} - {None}
        with self._lock:
            kept = [a for a in self._aggregates
                    if a.name not in changed and a.uuid not in uuids]
            self._set_aggregates(kept + list(aggregates))
        # Off the event loop: a zone of 50,000 hosts took from 20 s to
        # over a minute to write, and a loop held that long stops
        # answering the broker's heartbeats (the connection, and the
        # queues with it, went).
        self._writing_aggregates(self._save_aggregates, aggregates)

    def _writing_aggregates(self, write, *args) -> None:
        """Run ``write`` (of aggregates already changed in memory) off the
        event loop, with ``refresh_aggregates`` held off meanwhile."""
        with self._lock:
            self._aggregate_writes += 1
        try:
            concurrency.run_blocking(write, *args)
        finally:
            with self._lock:
                self._aggregate_writes -= 1
                # Read them back once written: another worker may have
                # written others meanwhile.
                self._aggregates_stamp = None

    def _save_aggregates(self, aggregates: list) -> None:
        for agg in aggregates:
            self.db.aggregate_upsert({
                'uuid': agg.obj_get('uuid'), 'name': agg.name,
                'hosts': list(agg.obj_get('hosts') or []),
                'metadata': dict(agg.obj_get('metadata') or {})})

    def delete_aggregate(self, aggregate) -> None:
        with self._lock:
            self._set_aggregates([a for a in self._aggregates
                                  if a.name != aggregate.name])
        try:
            self._writing_aggregates(self.db.aggregate_delete,
                                     aggregate.obj_get('uuid')
                                     or aggregate.name)
        except exception.AggregateNotFound:
            pass

    def aggregates(self) -> list:
        return list(self._aggregates)

    def _known_aggregates(self) -> dict:
        """('uuid', uuid) and ('name', name) -> the aggregate known by it."""
        known = {}
        for agg in self._aggregates:
            known[('uuid', agg.obj_get('uuid'))] = agg
            known[('name', agg.name)] = agg
        return known

    def _set_aggregates(self, aggregates: list,
                        version: int | None = None) -> bool:
        """Make ``aggregates`` the aggregates; re-attach the hosts whose
        aggregates changed, and only those.  Called with the lock held.

        An aggregate equal to one already known (same uuid or name,
        hosts and metadata) keeps the known object, so re-reading every
        aggregate from the inventory changes no view; a change costs in
        proportion to the hosts of the aggregates that changed.
        ``version``: the aggregates' version they were read at; they are
        stale, and nothing is changed (False), when another change came
        since.
        """
        if version is not None and version != self._aggregates_version:
            return False
        self._aggregates_version += 1
        known = self._known_aggregates()
        aggregates = [_same_or_new(known, agg) for agg in aggregates]
        new_ids = {id(agg) for agg in aggregates}
        old_ids = {id(agg) for agg in self._aggregates}
        removed = [a for a in self._aggregates if id(a) not in new_ids]
        added = [a for a in aggregates if id(a) not in old_ids]
        position = {id(agg): i for i, agg in enumerate(aggregates)}
        added_to: dict = {}
        for agg in added:
            for host in agg.hosts:
                added_to.setdefault(host, []).append(agg)
        affected = set(added_to)
        for agg in removed:
            affected.update(agg.hosts)
        by_host = self._host_aggregates
        self._aggregates_stamp = None
        self._aggregates = aggregates
        for host in affected:
            now = sorted([a for a in by_host.get(host, ())
                          if id(a) in new_ids] + added_to.get(host, []),
                         key=lambda a: position[id(a)])
            if now:
                by_host[host] = now
            else:
                by_host.pop(host, None)
            for key in self._nodes_of.get(host, ()):
                report = self._reports.get(key)
                if report is None:
                    continue
                # Views are replaced, never changed in place.
                fresh = report.successor()
                self._attach_aggregates(fresh)
                self._reports[key] = fresh
                self._renew_state(key, report, fresh)
        return True

    def _attach_aggregates(self, view, like=None) -> None:
        """Attach the aggregates of ``view``'s host to ``view`` (a
        report view no request can see yet)."""
        view.set_aggregates(self._host_aggregates.get(view.host, []),
                            like=like)

    # -- instance info from computes ------------------------------------

    def update_instance_info(self, host: str, instance_uuids: list) -> None:
        """A compute reports new instances on ``host``: they are built.

        Their usage stays counted as pending until a report of the node
        includes it.
        """
        if self.usage_db.confirm(host, instance_uuids):
            self.refresh_nodes(self._keys_of(host))

    def sync_instance_info(self, host: str, instance_uuids: list) -> None:
        """A compute's complete list of its instances, sent now and then.

        Confirms the claims it lists; placements on that host the compute
        no longer has are dropped (claims still building stay).
        """
        self.usage_db.sync_host(host, instance_uuids)
        self.refresh_nodes(self._keys_of(host))

    def delete_instance_info(self, host: str, instance_uuid: str) -> None:
        """An instance was deleted on ``host``: its resources are free.

        A placement on another host stays (a stale or forged message).
        """
        self.usage_db.release([instance_uuid], host=host)
        self.refresh_nodes(self._keys_of(host))

    def _keys_of(self, host: str) -> list:
        with self._lock:
            return sorted(self._nodes_of.get(host, ()))

    def host_names(self, states: list | None = None) -> list:
        states = self.get_up_host_states() if states is None else states
        return sorted({s.host for s in states})


def _same_or_new(known: dict, agg):
    """The known aggregate ``agg`` equals, or ``agg`` itself."""
    if known.get(('name', agg.name)) is agg:
        return agg
    old = _known_equal(known, agg.name, agg.obj_get('uuid'), agg.hosts,
                       agg.metadata)
    return agg if old is None else old


def _known_or_new(known: dict, row: dict):
    """The known aggregate inventory ``row`` describes, else a new one
    (no versioned object is made for an aggregate that did not change:
    at 100,000 hosts, one per host name)."""
    old = _known_equal(known, row['name'], row.get('uuid'), row['hosts'],
                       row['metadata'])
    return _aggregate_obj(row) if old is None else old


def _known_equal(known: dict, name: str, uuid: str | None, hosts,
                 metadata):
    """The known aggregate with this uuid (else name) if it has this
    name, uuid, hosts (in any order) and metadata."""
    old = known.get(('uuid', uuid)) if uuid else None
    if old is None:
        old = known.get(('name', name))
    if (old is not None and old.name == name
            and old.obj_get('uuid') == uuid
            and len(old.hosts) == len(hosts)
            and set(old.hosts) == set(hosts)
            and dict(old.metadata) == dict(metadata)):
        return old
    return None


def _batches(keys: list) -> typing.Iterator[list]:
    for start in range(0, len(keys), FLUSH_BATCH):
        yield keys[start:start + FLUSH_BATCH]


def _pool_key(key) -> tuple:
    """A PCI pool key read back from JSON (lists) as the filter makes it."""
    vendor, product, numa_node, tags = key
    return (vendor, product, numa_node, tuple(tuple(t) for t in tags))


def row_key(row: dict) -> tuple:
    return (row['host'], row['nodename'])


def _reported_values(view) -> dict:
    reported = getattr(view, 'reported_view', None)
    if reported is None:
        return {}
    view = reported()
    return {'memory_mb_used': view.memory_mb_used,
            'vcpus_used': view.vcpus_used,
            'local_gb_used': view.local_gb_used,
            'num_instances': view.num_instances,
            'updated_at': view.updated_at}


def _row_says(row: dict, report) -> bool:
    """Whether usage ``row`` gives node ``report`` the usage its compute
    reported (nothing claimed on it since, or all of it confirmed)."""
    return (row['reported_memory_mb'] + row['claimed_memory_mb'],
            row['reported_vcpus'] + row['claimed_vcpus'],
            row['reported_disk_gb'] + row['claimed_disk_gb'],
            row['reported_instances'] + row['claimed_instances']) == (
        report.memory_mb_used, report.vcpus_used, report.local_gb_used,
        report.num_instances)


def _report_row(report) -> dict:
    """What ``host_reports_save`` writes of a report (less the time)."""
    return {'host': report.host, 'nodename': report.nodename,
            'uuid': report.obj_get('uuid'), 'disabled': report.disabled,
            'report': report.obj_to_primitive()}


def _node_report(view):
    return usage.NodeReport(
        host=view.host, nodename=view.nodename,
        memory_mb_used=view.memory_mb_used, vcpus_used=view.vcpus_used,
        local_gb_used=view.local_gb_used, num_instances=view.num_instances,
        updated_at=view.updated_at or timeutils.utcnow(),
        instance_uuids=frozenset(view.instance_uuids))


def _aggregate_obj(row: dict):
    return objects.Aggregate(id=row.get('id'), uuid=row.get('uuid'),
                             name=row['name'], hosts=list(row['hosts']),
                             metadata=dict(row['metadata']))


def _timestamp(value: datetime.datetime) -> float:
    """Seconds since the epoch of a (naive UTC or aware) datetime."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=datetime.timezone.utc)
    return value.timestamp()
