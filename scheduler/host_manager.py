"""HostManager: one worker's view of every compute node, kept honest.

The facade the drivers, the manager and the CLI call.  The view a
filter sees of a node is its newest report with what the inventory
says of its usage laid over it: the ``node_usage`` row and the claims
still pending there, made by any worker sharing the inventory.

The inventory is the authority (``scheduler.db.usage``): a claim is
written, with its capacity check, before any caller hears of it, and
one that loses a race raises ``ClaimConflict`` after its node is
refreshed.  Memory is a cache, made current before each request by
``refresh_usage()`` (the rows changed since the last look, by the
usage sequence, then those nodes' pending claims).

The state lives in owners that share this manager's lock, listed in
doc/architecture.md ("Owners of state"); the manager only sequences
them.  Queries run without the lock, and views are replaced, never
changed in place: a request that holds a view keeps a consistent one,
under eventlet and under native threads alike.
"""

import dataclasses
import datetime
import threading
import typing
import uuid as uuid_lib

from oslo_config import cfg
from oslo_log import log as logging
from oslo_utils import timeutils

from scheduler import concurrency
from scheduler.db import api as db_api
from scheduler.db import availability
from scheduler.db import usage
from scheduler import exception
from scheduler import group_commit
from scheduler import hearing
from scheduler import host_aggregates
from scheduler import host_view
from scheduler import metrics
from scheduler import node_reports
from scheduler import node_views
from scheduler import notifications
from scheduler import report_backlog
from scheduler import report_isolation
from scheduler import report_writer
from scheduler import usage_cache
from scheduler.resources import compute
from scheduler.resources import liveness
from scheduler.resources import numa
from scheduler.resources import pci

LOG = logging.getLogger(__name__)
CONF = cfg.CONF


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


class HostManager:
    """Host states, claims and aggregates for one scheduler worker."""

    def __init__(self, inventory=None, usage_store=None):
        self.db = db_api if inventory is None else inventory
        self.usage_db = usage if usage_store is None else usage_store
        self._lock = concurrency.native_lock()
        self._reports = node_reports.NodeReports()
        self._usage_cache = usage_cache.UsageCache(self.usage_db)
        self._views = node_views.NodeViews(self._reports, self._usage_cache)
        self._marks = node_reports.ReportMarks()
        self._backlog = report_backlog.ReportBacklog(
            self._lock, self._reports, self._marks)
        self._aggregates = host_aggregates.HostAggregates(
            self._lock, lambda: self.db, self._hosts_changed)
        self._writer = report_writer.ReportWriter(self._write_taken,
                                                  node_reports.newer_report)
        #: The freshness read under way (``refresh_usage``).
        self._fresh = concurrency.SharedRead()
        #: Whether the saved state was loaded (``ensure_loaded``).
        self._loaded = False
        #: One load at a time; the others wait for it.  The runtime's
        #: lock (green under eventlet): it is held across queries.
        self._load_lock = threading.Lock()
        #: Builds' confirmations, written together (``group_commit``):
        #: one statement where the store can, not a pooled connection
        #: each.
        self._confirms = group_commit.GroupCommit(
            lambda builds: self.usage_db.confirm_many(builds))

    # -- loading and saving ---------------------------------------------

    def load_from_inventory(self) -> None:
        """Load reports, aggregates, usage and pending claims saved before.

        A restarted worker schedules around every claim in the inventory
        before any compute has reported again.  A node that reported to
        this worker already keeps its report (newer than the saved one:
        a load put off by a database outage, see ``ensure_loaded``).
        """
        self.refresh_aggregates()
        rows = self.db.host_reports_get_all()
        views = [node_reports.stored_view(row) for row in rows]
        usage_rows = self.usage_db.usage_get_all()
        pending = self.usage_db.pending_claims()
        with self._lock:
            self._marks.all_read(max([row.get('seq', 0) for row in rows],
                                     default=0))
            for row, view in zip(rows, views):
                if view is None:
                    continue
                self._marks.holds(view.key(), row.get('changed_seq', 0))
                if self._reports.get(view.key()) is None:
                    self._aggregates.attach(view)
                    self._reports.put(view.key(), view)
            self._usage_cache.take(usage_rows, pending,
                                   [usage_cache.row_key(r)
                                    for r in usage_rows])
            self._usage_cache.loaded(usage_rows)
            for key, _view in self._reports.items():
                self._views.compose(key)
            self._loaded = True
        hearing.silent_before_start(max(
            (view.received_at for view in views if view is not None),
            default=None))
        LOG.info('Loaded %(hosts)d host state(s), %(agg)d aggregate(s) and '
                 '%(claims)d pending claim(s) from the inventory',
                 {'hosts': sum(v is not None for v in views),
                  'agg': len(self._aggregates), 'claims': len(pending)})

    def ensure_loaded(self) -> None:
        """Load the saved state now if start-up could not (a worker
        forked while the database was away serves
        ``InventoryUnavailable`` until then).  Raises the outage's error
        while it lasts; cheap once loaded."""
        if self._loaded:
            return
        with self._load_lock:
            if not self._loaded:
                self.load_from_inventory()

    def flush(self) -> None:
        """Write new reports to the inventory (periodic task, shutdown).

        The intake's reports a stop or an outage left waiting
        (``report_writer``), then the backlog (``report_backlog``):
        full reports, quiet ones' times and the usage they carry.
        Claims are in the inventory already.  Under eventlet the
        database drivers yield, so requests are served meanwhile; never
        on a native thread (``concurrency.run_native``).
        """
        left = self._writer.take_all()
        if left:
            self._write_taken(left)
        refused = self._backlog.write(self.db, self._took_usage)
        if refused:
            self._take_back(refused)

    def _take_back(self, keys: list) -> None:
        """The flush's write of nodes ``keys``' reports was refused (a
        fanout report, installed when it came): this worker goes back
        to the reports the inventory holds of them, or forgets the
        nodes it has none of (and when it cannot read them now), as
        the intake never installs a report it could not store.  Else
        it would place on capacity no other worker sees, and the
        claims' checks, whose limits come from the view, would let it.
        The next report of each is taken as any."""
        try:
            rows = self.db.host_reports_get(keys)
        except Exception as e:
            if not availability.is_outage(e):
                raise
            rows = []
        stored = {(row['host'], row['nodename']): row for row in rows}
        with self._lock:
            for key in keys:
                if not self._backlog.was_refused(key):
                    continue  # a newer report came meanwhile
                row = stored.get(key)
                view = None if row is None else node_reports.stored_view(
                    row)
                if view is None:
                    self._reports.forget(key)
                else:
                    self._marks.holds(key, row['changed_seq'])
                    self._aggregates.attach(view)
                    self._reports.put(key, view)
                self._views.compose(key)

    # -- reports from computes ------------------------------------------

    def update_from_report(self, report, shared: bool = False) -> None:
        """Take a compute's report as the new state of its node.

        A report that says what the last one said only renews the
        node's views (a new time; only the time is written, at the next
        flush).  Anything else builds them anew.  ``shared``: from the
        intake queue (API 1.5), which no other worker hears: a new
        report is written first (``report_writer``) and becomes this
        worker's view once written, when every worker can read it
        (``refresh_changed_reports``).  Otherwise it is written at the
        next flush.  A report older than the one held (by the compute's
        clock: one redelivered, or served beside a newer one) is
        dropped, as the inventory drops it: its totals may be larger.
        """
        key = (report.host, report.nodename)
        with self._lock:
            old = self._reports.get(key)
        if old is not None and old.says_the_same(report):
            with self._lock:
                if (self._reports.get(key) is old
                        and self._renewable(key, old)):
                    self._alive(key, old)
                    return
        view = host_view.HostView(report)
        key = view.key()
        with self._lock:
            carried = self._usage_to_write(key, view)
            if not shared:
                told = self._install(view, unwritten=True, usage=carried,
                                     unless_older=True)
        if shared:
            self._writer.submit(report_writer.Taken(key, view, carried))
        else:
            _log_taken(key, told)

    def take_alive(self, nodes: list) -> list:
        """Quiet computes' liveness messages (API 1.6): ``nodes`` is
        ``[((host, nodename), digest)]``, each saying that the node is
        alive and still in the state of its full report of that
        ``content_digest``.

        A node whose report here has that digest is renewed as a quiet
        full report renews it (``update_from_report``).  The others (a
        report another worker took, an unknown or down node, usage the
        inventory lacks) are looked up again after reading what changed
        (``refresh_usage``: the changed reports and every usage row
        changed since the last look, so that a worker serving no
        requests learns a new fleet in one read, not one node a
        message), then, if still missed, these nodes' usage; returns
        the keys still not renewed: their computes must send a full
        report.
        """
        missed = self._renew(nodes)
        if not missed:
            return []
        try:
            self.refresh_usage()
            missed = self._renew(missed)
            if missed:
                self.refresh_nodes(sorted({key for key, _d in missed}))
        except Exception as e:
            if not availability.is_outage(e):
                raise
            availability.count('reading changed host reports')
            return [key for key, _digest in missed]
        if not missed:
            return []
        return [key for key, _digest in self._renew(missed)]

    def _renew(self, nodes: list) -> list:
        """Renew the nodes of ``nodes`` whose report has their digest;
        return the others (as given)."""
        missed = []
        with self._lock:
            for key, digest in nodes:
                old = self._reports.get(key)
                version = digest.partition(':')[0]
                try:
                    same = (old is not None
                            and old.content_digest(version) == digest)
                except ValueError:  # a HostState version newer than ours
                    same = False
                if same and self._renewable(key, old):
                    self._alive(key, old)
                else:
                    missed.append((key, digest))
        return missed

    def _usage_to_write(self, key, view):
        """The usage report ``view`` of node ``key`` carries to the
        inventory (``usage.NodeReport``), or None when the inventory has
        it already.  Called with the lock held.

        Judged against this worker's usage row only while none of the
        node's usage waits to be written: a write not read back (the
        database cut just after it committed) or not made leaves that
        row older than the inventory's, and an older report's usage
        waiting; the newest report's is the one to write, even when it
        equals that row.
        """
        if (self._backlog.usage_unwritten(key)
                or self._usage_cache.usage_changed(key, view)):
            return _node_report(view)
        return None

    def _renewable(self, key, old) -> bool:
        """Whether node ``key``'s report ``old`` may just be renewed: the
        node is up, the inventory did not refuse that report and has
        the usage it reports.  Called with the lock held."""
        return (not self._reports.is_down(key)
                and not self._backlog.usage_unwritten(key)
                and not self._backlog.was_refused(key)
                and not self._usage_cache.usage_changed(key, old))

    def _install(self, view, unwritten: bool, usage=None,
                 unless_older: bool = False) -> str | None:
        """Make ``view`` its node's report and compose the node's view
        (called with the lock held).

        ``unwritten``: the inventory does not have the report yet (the
        next flush writes it).  ``usage``: the usage it carries that the
        inventory does not have yet (``usage.NodeReport``, written by
        the next flush), or None.  ``unless_older``: not when the report
        held is newer (one read from the inventory meanwhile).  Returns
        'new', 'back' (it was down) or '' for the log, None when not
        installed.
        """
        key = view.key()
        old = self._reports.get(key)
        if (unless_older and old is not None
                and node_reports.newer_report(old, view)):
            return None
        back = self._reports.back(key)
        self._aggregates.attach(view, like=old)
        self._reports.put(key, view)
        if unwritten:
            self._backlog.report_changed(key, usage)
        elif usage is not None:
            self._backlog.usage_changed(key, usage)
        self._views.compose(key)
        if back:
            return 'back'
        return 'new' if old is None else ''

    def _write_taken(self, taken: list) -> None:
        """Write reports taken from the intake (``report_writer``), then
        make them this worker's views.

        One transaction for the reports and the usage they carry (which
        confirms claims), which reads the nodes' usage rows and pending
        claims back (``host_reports_save_with_usage``): every worker
        sees the reports and their usage from its commit on.  They
        become this worker's views as soon as it commits, in the same
        step that marks them as held (``ReportMarks.written``), with
        the usage read back laid over them: a request this worker
        serves meanwhile would otherwise find them neither in its views
        nor new to read back (``refresh_changed_reports``), and
        schedule without them.  What cannot be written for an outage
        is installed all the same and kept for the periodic flush: this
        worker goes on scheduling with it, and the others learn it once
        the inventory is back.  A report the inventory refuses is
        dropped alone (``report_isolation``): the others are written,
        and it is neither installed nor kept.
        """
        now = report_backlog.stored_time()
        outcome = report_isolation.write(
            self.db.host_reports_save_with_usage,
            [report_isolation.Part(item.key, report_backlog.report_row(
                item.view, now), item.usage, item) for item in taken],
            self._taken_written)
        if outcome.error is not None:
            report_backlog.write_failed(outcome.error, 'host reports')
            with self._lock:
                told = [(part.key, self._keep_unwritten(part.item))
                        for part in outcome.unwritten]
            for key, what in told:
                _log_taken(key, what)

    def _taken_written(self, parts: list, written) -> None:
        """Intake reports ``parts`` (``report_isolation.Part``) were
        written (``written``: ``host_reports_save_with_usage``'s
        answer): make them this worker's views (``_write_taken``)."""
        taken = [part.item for part in parts]
        carrying = [item for item in taken if item.usage is not None]
        applied = written.applied
        with self._lock:
            self._marks.written([item.key for item in taken], written.seq,
                                True)
            read = set()
            if applied is not None:
                read = set(self._usage_cache.take(
                    applied.rows, applied.pending,
                    sorted({item.key for item in carrying})))
            told = [(item.key, self._install(item.view, unwritten=False,
                                             unless_older=True))
                    for item in taken]
            for key, what in told:
                if what is None and key in read:
                    # Its usage is new all the same.
                    self._views.compose(key)
        for key, what in told:
            _log_taken(key, what)
        if applied is not None and applied.confirmed:
            LOG.debug('Reports confirmed %d claim(s)',
                      len(applied.confirmed))

    def _took_usage(self, applied, keys: list) -> None:
        """Lay the usage rows and pending claims a report write read back
        (``usage.Applied``) over the views of nodes ``keys``.  Called
        with the lock held."""
        for key in self._usage_cache.take(applied.rows, applied.pending,
                                          keys):
            self._views.compose(key)

    def _keep_unwritten(self, item) -> str | None:
        """Install intake report ``item`` (a ``report_writer.Taken``) its
        write failed for, for the periodic flush to write, unless the
        node's report here is newer (``_install``'s answer).  Called
        with the lock held.

        A newer report come meanwhile (a fanout one, or one another
        worker stored) stays; when ``item`` carried usage, the newer
        one's is written instead: it may carry none, judged against the
        row this write was to replace, and that write may have
        committed (the database cut before its answer).
        """
        what = self._install(item.view, unwritten=True, usage=item.usage,
                             unless_older=True)
        if what is None and item.usage is not None:
            self._backlog.usage_changed(
                item.key, _node_report(self._reports.get(item.key)))
        return what

    def _alive(self, key, report_view, received_at: float | None = None
               ) -> None:
        """Node ``key`` reported again, with nothing new: new views with
        the time of this report.  ``received_at`` given: another worker
        took the report and stored it (``refresh_reports``)."""
        fresh = report_view.successor(
            received_at=liveness.now() if received_at is None
            else received_at)
        self._reports.put(key, fresh)
        if received_at is None:
            self._backlog.report_alive(key)
        self._views.renew(key, report_view, fresh)

    def forget_deleted_nodes(self) -> list:
        """Drop down nodes an operator deleted from the inventory (only
        down nodes are looked up: ``scheduler-manage hosts delete``
        refuses the others)."""
        with self._lock:
            down = self._reports.down()
        if not down:
            return []
        kept = {usage_cache.row_key(r)
                for r in self.usage_db.usage_get_nodes(down)}
        gone = [key for key in down if key not in kept]
        with self._lock:
            for key in gone:
                self._backlog.forget(key)
                self._usage_cache.forget(key)
                self._reports.forget(key)
                self._views.compose(key)
        for key in gone:
            LOG.info('Host %s/%s was deleted from the inventory; forgot it',
                     *key)
        return gone

    def check_down_hosts(self) -> list:
        """Log, once, each host that stopped reporting; return their keys."""
        with self._lock:
            newly_down = self._reports.mark_down(liveness.now())
        for key, age in newly_down:
            LOG.warning('Host %(host)s/%(node)s has not reported for '
                        '%(age)d s (service_down_time %(limit)d s): no '
                        'longer scheduling to it',
                        {'host': key[0], 'node': key[1], 'age': age,
                         'limit': CONF.scheduler.service_down_time})
        return [key for key, _age in newly_down]

    # -- keeping the cache current ----------------------------------------

    def refresh_changed_reports(self) -> int:
        """Take the new and changed reports other workers wrote since
        the last look; before every request.

        One indexed query for the rows whose report changed since the
        highest ``changed_seq`` read (an intake report is written by
        the worker that took it before it uses it); rows with only a
        new time are left to ``refresh_reports``.  Returns how many
        nodes were brought up to date.
        """
        rows = self.db.host_reports_changed_since(self._marks.changed)
        if not rows:
            return 0
        with self._lock:
            reload = self._marks.changed_read(rows)
        if not reload:
            return 0
        return self._take_stored(self.db.host_reports_get(reload))

    def refresh_reports(self) -> int:
        """Take what other workers stored that this worker must know
        before it judges hosts down (periodic): the changed reports
        (``refresh_changed_reports``), and the stored times of the
        nodes whose time here is getting old (``time_to_refresh``).

        A quiet node's time is written once, by the worker that took
        its report; the others read it only when the one they hold
        nears the down cut-off, by the node's key, rather than every
        time renewed: so the cost of a quiet report does not grow with
        the workers.  A node down here, or near it, is always read
        first: none is judged down while the inventory has a time newer
        than the cut-off.  Returns how many nodes were brought up to
        date.
        """
        fresh = self.refresh_changed_reports()
        aging_before = liveness.now() - time_to_refresh()
        with self._lock:
            aging = self._reports.older_than(aging_before)
        if not aging:
            return fresh
        rows = self.db.host_report_times(aging)
        back = []
        with self._lock:
            for row in rows:
                key = (row['host'], row['nodename'])
                old = self._reports.get(key)
                updated = row.get('updated_at')
                if old is None or updated is None:
                    continue
                when = usage_cache.timestamp(updated)
                if when > old.received_at:
                    if self._reports.back(key):
                        back.append(key)
                    self._alive(key, old, received_at=when)
                    fresh += 1
        for key in back:
            _log_taken(key, 'back', _ANOTHER)
        return fresh

    def _take_stored(self, rows: list) -> int:
        """Make stored reports ``rows`` (written by another worker) the
        nodes' reports, unless this worker holds a newer one."""
        taken = 0
        for row in rows:
            view = node_reports.stored_view(row)
            if view is None:
                continue
            key = view.key()
            with self._lock:
                self._marks.holds(key, row['changed_seq'])
                what = self._install(view, unwritten=False,
                                     unless_older=True)
                if what is None:
                    # Two reports of the node reached two workers at
                    # once, and the older was written last: write ours
                    # again (the next flush), or the others keep the
                    # older until a report reaches a worker that holds
                    # it.
                    self._backlog.report_changed(key)
            if what is None:
                continue
            taken += 1
            _log_taken(key, what, _ANOTHER)
        return taken

    def refresh_usage(self) -> int:
        """Pull usage changed by any worker since the last look, and the
        reports other workers took that changed (before every request).

        Cheap when nothing changed (one indexed query each).  Requests
        that come during a read share the next one, begun after they
        came (``concurrency.SharedRead``).  Returns how many nodes'
        usage was refreshed.
        """
        return self._fresh.run(self._refresh_usage) or 0

    def _refresh_usage(self) -> int:
        self.refresh_changed_reports()
        rows = self._usage_cache.read_changed()
        with self._lock:
            changed = self._usage_cache.changed(rows)
        if changed:
            self._reload_nodes(changed, rows)
            if LOG.isEnabledFor(logging.DEBUG):
                _log_usage_read(changed, rows)
        return len(changed)

    def refresh_nodes(self, keys: list) -> None:
        """Re-read the usage and pending claims of ``keys`` now."""
        if not keys:
            return
        wanted = set(keys)
        self._reload_nodes(list(wanted),
                           self._usage_cache.read_nodes(wanted))

    def _reload_nodes(self, keys: list, rows: list) -> None:
        """Take ``rows`` and the pending claims of nodes ``keys`` (both
        read without the lock: ``UsageCache.take`` keeps a newer row
        cached meanwhile) and compose their views."""
        pending = self.usage_db.pending_claims(keys)
        with self._lock:
            for key in self._usage_cache.take(rows, pending, keys):
                self._views.compose(key)

    def watch_views(self, watcher) -> None:
        """Tell ``watcher`` of every view, now and whenever one changes:
        ``view_changed(key, view)`` for each view published,
        ``view_removed(key)`` for each node dropped.  Calls are made
        under the manager's lock, in the order of the changes: they
        must be quick and must not yield (``columns.ColumnStore``)."""
        with self._lock:
            self._views.watch(watcher)

    # -- what the drivers read ------------------------------------------

    def get_all_host_states(self) -> list:
        """Every known node, up or down (ComputeFilter drops the down)."""
        with self._lock:
            return self._views.all()

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
            return self._views.get(host_state.key(), host_state)

    def pending_claims(self, key) -> list:
        with self._lock:
            return list(self._usage_cache.pending.get(key, {}).values())

    # -- claims ---------------------------------------------------------

    def placements(self, instance_uuids: list) -> dict:
        """The inventory's placements of ``instance_uuids``, by uuid."""
        if not instance_uuids:
            return {}
        return self.usage_db.placements_get(instance_uuids)

    def claim(self, host_state, spec_obj, instance_uuid: str | None,
              limits: dict | None = None, replace: bool = False
              ) -> usage_cache.Claim:
        """Claim one instance of ``spec_obj`` on ``host_state``'s node.

        Written to the inventory before returning; raises as
        ``claim_many``.  An instance without a uuid (an old caller) is
        claimed under a made-up one, which holds the capacity until the
        claim expires.
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
        # The one place the arithmetic of a claim lives: it lowers the
        # real free disk (disk_available_least) with the totals' usage.
        scratch.apply_claim(memory_mb, vcpus, disk_gb, uuid)
        with self._lock:
            row = self._usage_cache.rows.get(key)
        generation = None
        if numa_used or pci_used:
            if row is None or row['generation'] < 0:
                self.refresh_nodes([key])
                with self._lock:
                    row = self._usage_cache.rows.get(key)
            generation = row['generation'] if row is not None else 0
        request = self.usage_db.ClaimRequest(
            instance_uuid=uuid,
            host=host_state.host, nodename=host_state.nodename,
            memory_mb=memory_mb, vcpus=vcpus, disk_gb=disk_gb,
            project_id=spec_obj.obj_get('project_id'),
            user_id=spec_obj.obj_get('user_id'),
            limits=dict(limits or {}), generation=generation,
            disk_overcommit_gb=_disk_overcommit_gb(host_state, limits),
            numa=[list(x) for x in numa_used],
            pci=[list(x) for x in pci_used],
            reported=_reported_values(self._reports.get(key) or host_state),
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
            raise exception.ClaimConflict(host=key[0], nodename=key[1],
                                          group_hosts=e.group_hosts)
        except store.AlreadyPlaced as e:
            raise exception.InstanceAlreadyPlaced(
                instance_uuid=e.placement['instance_uuid'],
                host=e.placement['host'], nodename=e.placement['nodename'])
        claims = [usage_cache.Claim.from_row(row) for row in placed]
        by_node: dict = {}
        for claim, row, plan in zip(claims, placed, planned):
            by_node.setdefault((claim.host, claim.nodename), []).append(
                (claim, row['usage'], plan))
        moved_from: set = set()
        with self._lock:
            for key, made in by_node.items():
                plans = [plan for _c, _a, plan in made]
                as_read, moved = self._usage_cache.claimed(
                    key, [claim for claim, _a, _p in made], made[-1][1],
                    [plan.request for plan in plans])
                moved_from.update(moved)
                if as_read and self._views.plans_hold(key, plans):
                    self._views.publish(key, plans[-1].view)
                else:
                    self._views.compose(key)
        self.refresh_nodes(sorted(moved_from))
        return claims

    def release(self, claim: usage_cache.Claim) -> None:
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
        with self._lock:
            candidates, keys = self._usage_cache.overdue(self._reports,
                                                         expiry)
        if not candidates:
            return []
        cutoff = timeutils.utcnow() - datetime.timedelta(seconds=expiry)
        expired = self.usage_db.expire(candidates, cutoff)
        for placement in expired:
            notifications.claim_expired(
                usage_cache.Claim.from_row(placement))
        self.refresh_nodes(sorted(keys))
        return expired

    # -- aggregates (``scheduler.host_aggregates``) ----------------------

    def refresh_aggregates(self) -> None:
        """Re-read aggregates from the inventory (other workers change
        them); views are re-attached only when something changed."""
        self._aggregates.refresh()

    def update_aggregates(self, aggregates: list) -> None:
        """Aggregates another service changed: apply, then save."""
        self._aggregates.update(aggregates)

    def delete_aggregate(self, aggregate) -> None:
        self._aggregates.delete(aggregate)

    def aggregates(self) -> list:
        return self._aggregates.all()

    def _hosts_changed(self, hosts: set) -> None:
        """The aggregates of ``hosts`` changed: re-attach their nodes'
        views.  Called with the lock held."""
        for host in hosts:
            for key in self._reports.nodes_of(host):
                report = self._reports.get(key)
                # Views are replaced, never changed in place.
                fresh = report.successor()
                self._aggregates.attach(fresh)
                self._reports.put(key, fresh)
                self._views.renew(key, report, fresh)

    # -- instance info from computes ------------------------------------

    def update_instance_info(self, host: str, instance_uuids: list) -> None:
        """A compute reports new instances on ``host``: they are built.

        Their usage stays counted as pending until a report of the node
        includes it.  Nothing is read back: the confirmation changes
        only the claims' status, which this worker's cache takes as the
        inventory now has it (one build a placement: the re-read cost
        two more round trips per placement).  The confirmations that
        arrive while one is written are written together after it
        (``group_commit``); each returns once its own is.
        """
        if self._confirms.run((host, instance_uuids)):
            with self._lock:
                self._usage_cache.confirmed(self._reports.nodes_of(host),
                                            instance_uuids)

    def update_instances_info(self, news: list) -> None:
        """Several ``update_instance_info`` at once, in one write:
        ``[(host, instance_uuids)]``, each host once."""
        confirmed = self.usage_db.confirm_many(news)
        with self._lock:
            for (host, uuids), count in zip(news, confirmed):
                if count:
                    self._usage_cache.confirmed(self._reports.nodes_of(host),
                                                uuids)

    def sync_instance_info(self, host: str, instance_uuids: list) -> list:
        """A compute's complete list of its instances, sent now and then.

        Confirms the claims it lists; placements on that host the compute
        no longer has are dropped (claims building, and built ones no
        report counts yet, stay: ``usage.sync_host``).  Returns
        the dropped placements.
        """
        dropped = self.usage_db.sync_host(host, instance_uuids)
        self.refresh_nodes(self._keys_of(host))
        return dropped

    def delete_instance_info(self, host: str, instance_uuid: str) -> None:
        """An instance was deleted on ``host``: its resources are free.

        A placement on another host stays (a stale or forged message).
        """
        self.usage_db.release([instance_uuid], host=host)
        self.refresh_nodes(self._keys_of(host))

    def delete_instances_info(self, deletions: list) -> None:
        """Several ``delete_instance_info`` at once, in one transaction:
        ``[(host, instance_uuid)]``, each instance once."""
        by_host: dict = {}
        for host, uuid in deletions:
            by_host.setdefault(host, []).append(uuid)
        self.usage_db.release_on_hosts(by_host)
        self.refresh_nodes([key for host in sorted(by_host)
                            for key in self._keys_of(host)])

    def _keys_of(self, host: str) -> list:
        with self._lock:
            return self._reports.nodes_of(host)

    def host_names(self, states: list | None = None) -> list:
        states = self.get_up_host_states() if states is None else states
        return sorted({s.host for s in states})


def time_to_refresh() -> float:
    """Age (seconds) past which a worker reads a node's stored time
    again (``HostManager.refresh_reports``).

    Half of ``[scheduler] service_down_time``, and at least two
    ``periodic_task_interval`` short of it: a time is read at the first
    periodic run after it passed this age, so a node that reports to
    other workers never reaches the down cut-off here.
    """
    down = CONF.scheduler.service_down_time
    every = CONF.scheduler.periodic_task_interval
    return max(0.0, min(down / 2.0, down - 2.0 * every))


#: How ``_log_taken`` says that a report reached another worker.
_ANOTHER = ' (to another worker)'


def _log_taken(key, what: str | None, source: str = '') -> None:
    """Say that node ``key`` came back or is new (``_install``)."""
    if what == 'back':
        LOG.info('Host %s/%s is reporting again%s; scheduling to it',
                 key[0], key[1], source)
    elif what == 'new':
        LOG.info('New host %s/%s reported%s', key[0], key[1], source)


#: Nodes whose usage a freshness read names in its DEBUG line, at most.
_USAGE_LOGGED = 5


def _log_usage_read(changed: list, rows: list) -> None:
    """Say which nodes' usage a freshness read took, and what the
    inventory counted on them (MB used: reported + claimed): the usage a
    request was then placed against, for the log of a refusal."""
    wanted = set(changed[:_USAGE_LOGGED])
    nodes = ['%s/%s seq %s: %s+%s MB' % (
        row['host'], row['nodename'], row['seq'],
        row['reported_memory_mb'], row['claimed_memory_mb'])
        for row in rows if usage_cache.row_key(row) in wanted]
    more = len(changed) - len(wanted)
    LOG.debug('Usage read of %(count)d node(s): %(nodes)s%(more)s',
              {'count': len(changed), 'nodes': '; '.join(nodes),
               'more': ' and %d more' % more if more else ''})


def _reported_values(view) -> dict:
    reported = getattr(view, 'reported_view', None)
    if reported is None:
        return {}
    view = reported()
    return {'memory_mb_used': view.memory_mb_used,
            'vcpus_used': view.vcpus_used,
            'local_gb_used': view.local_gb_used,
            'num_instances': view.num_instances,
            'disk_available_least': view.disk_available_least,
            'updated_at': view.updated_at}


def _disk_overcommit_gb(host_state, limits: dict | None) -> float:
    """How far a claim's ``disk_gb`` limit lets the node's real free
    disk be overcommitted (``usage.ClaimRequest.disk_overcommit_gb``)."""
    limit = (limits or {}).get('disk_gb')
    return 0.0 if limit is None else limit - host_state.local_gb


def _node_report(view):
    return usage.NodeReport(
        host=view.host, nodename=view.nodename,
        memory_mb_used=view.memory_mb_used, vcpus_used=view.vcpus_used,
        local_gb_used=view.local_gb_used, num_instances=view.num_instances,
        updated_at=view.updated_at or timeutils.utcnow(),
        instance_uuids=frozenset(view.instance_uuids),
        disk_available_least=view.disk_available_least)
