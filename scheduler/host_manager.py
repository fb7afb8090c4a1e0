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

The manager owns the reports, the views composed from them and the
down nodes; it is the facade drivers, the manager and the CLI call.
Under the same lock, ``usage_cache.UsageCache`` owns the usage rows
and pending claims, ``report_backlog.ReportBacklog`` the reports not
written yet, and ``host_aggregates.HostAggregates`` the aggregates.
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
from scheduler.db import availability
from scheduler.db import usage
from scheduler import exception
from scheduler import host_aggregates
from scheduler import host_view
from scheduler import metrics
from scheduler import notifications
from scheduler import objects
from scheduler import report_backlog
from scheduler import report_writer
from scheduler import usage_cache
from scheduler.resources import compute
from scheduler.resources import liveness
from scheduler.resources import numa
from scheduler.resources import pci

LOG = logging.getLogger(__name__)
CONF = cfg.CONF

#: Kept here for callers and tests that name them.
Claim = usage_cache.Claim
_SEQ_LOOKBACK = usage_cache.SEQ_LOOKBACK
row_key = usage_cache.row_key
_timestamp = usage_cache.timestamp


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
        #: Each node's usage row and pending claims, as last read.
        self._usage_cache = usage_cache.UsageCache(lambda: self.usage_db)
        #: Reports (and the usage they carry) not written yet.
        self._backlog = report_backlog.ReportBacklog(self._lock)
        #: host -> its nodes' keys (the keys of ``_reports``).
        self._nodes_of: dict = {}
        self._down: set = set()
        #: The aggregates and each host's share of them.
        self._aggregates = host_aggregates.HostAggregates(
            self._lock, lambda: self.db, self._hosts_changed)
        #: Told of every view composed or dropped (``watch_views``).
        self._watchers: list = []
        #: Whether the saved state was loaded (``ensure_loaded``).
        self._loaded = False
        #: One load at a time; the others wait for it.  The runtime's
        #: lock (green under eventlet): it is held across queries.
        self._load_lock = threading.Lock()
        #: The highest report sequence number read (``refresh_reports``).
        self._report_mark = 0
        #: key -> the ``changed_seq`` of the stored report this worker's
        #: report of the node is (or is newer than).
        self._report_seqs: dict = {}
        #: The highest ``changed_seq`` up to which every changed report
        #: was read (``refresh_changed_reports``).
        self._changed_mark = 0
        #: Reports taken from the intake, written before they are used.
        self._writer = report_writer.ReportWriter(self._write_taken,
                                                  _newer_report)
        #: Report sequence numbers of this worker's own writes, not
        #: read back yet.
        self._own_seqs: set = set()
        #: The freshness read under way (``refresh_usage``): set when it
        #: ends; the runtime's event (green under eventlet).  None when
        #: none is.  Under ``_refresh_state``, never held across I/O.
        self._refreshing: threading.Event | None = None
        self._refresh_state = concurrency.native_lock()
        #: Freshness reads begun and the last one ended, by number (one
        #: at a time, so they end in the order they begin).
        self._refreshes_begun = 0
        self._refreshes_done = 0

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
        before any compute has reported again.  A node that reported to
        this worker already keeps its report (newer than the saved one:
        a load put off by a database outage, see ``ensure_loaded``).
        """
        self.refresh_aggregates()
        reports = {}
        seqs = {}
        mark = 0
        rows = self.db.host_reports_get_all()
        for row in rows:
            mark = max(mark, row.get('seq', 0))
            view = _stored_view(row)
            if view is None:
                continue
            reports[view.key()] = view
            seqs[view.key()] = row.get('changed_seq', 0)
        usage_rows = self.usage_db.usage_get_all()
        pending = self._usage_cache.read_pending()
        with self._lock:
            self._report_mark = max(self._report_mark, mark)
            self._changed_mark = max(self._changed_mark, mark)
            self._report_seqs.update(seqs)
            for key, view in reports.items():
                if key in self._reports:
                    continue
                self._aggregates.attach(view)
                self._reports[key] = view
                self._nodes_of.setdefault(key[0], set()).add(key)
            self._usage_cache.take(usage_rows, pending,
                                   [row_key(r) for r in usage_rows])
            for key in list(self._reports):
                self._compose(key)
            self._loaded = True
        LOG.info('Loaded %(hosts)d host state(s), %(agg)d aggregate(s) and '
                 '%(claims)d pending claim(s) from the inventory',
                 {'hosts': len(reports), 'agg': len(self._aggregates),
                  'claims': len(pending)})

    def ensure_loaded(self) -> None:
        """Load the saved state now if start-up could not.

        A worker forked while the database is away (the launcher
        replacing one that died) starts all the same and serves
        ``InventoryUnavailable``; its first request or periodic run
        after the outage loads what it missed.  Raises the outage's
        error while it lasts.  Cheap once loaded (one attribute read).
        """
        if self._loaded:
            return
        with self._load_lock:
            if not self._loaded:
                self.load_from_inventory()

    def flush(self) -> None:
        """Write new reports to the inventory (periodic task, shutdown).

        Claims are not written here: they are in the inventory before
        the caller hears of them.  Reports are: the full report for a
        restarted worker, and the usage it carries, which moves the
        claims it confirms out of pending; the new times of quiet
        reports; and the reports taken from the intake that are still
        waiting for their write (``report_writer``: a stop, or an
        outage, left them).  Under eventlet the database drivers yield
        while they wait, so requests keep being served meanwhile; never
        on a native thread (``concurrency.run_native``).
        """
        left = self._writer.take_all()
        if left:
            self._write_taken(left)
        done = self._backlog.write(self.db, self.usage_db,
                                   self._report_rows, self.refresh_nodes,
                                   self._reported, self._written)
        if done.confirmed:
            LOG.debug('Reports confirmed %d claim(s)', done.confirmed)
        if done.error is not None:
            # What was not written is kept for the next flush.
            self._write_failed(done.error, 'host reports')

    @staticmethod
    def _write_failed(error: BaseException, what: str) -> None:
        if availability.is_outage(error):
            # Told once per outage, with a count of these.
            availability.count('saving %s (kept, retried)' % what)
        else:
            LOG.error('Could not write to the inventory (%s); will retry: '
                      '%s', what, error, exc_info=error)

    def _written(self, keys: list, seq: int | None, changed: bool) -> None:
        """Reports of nodes ``keys`` (``changed``), or only their
        times, were stored at report sequence ``seq``: this worker holds
        them, ``refresh_reports`` need not read them back."""
        if not isinstance(seq, int):
            return
        with self._lock:
            self._own_seqs.add(seq)
            if not changed:
                return
            for key in keys:
                if self._report_seqs.get(key, -1) < seq:
                    self._report_seqs[key] = seq

    def _reported(self, key) -> bool:
        with self._lock:
            return key in self._reports

    def _report_rows(self, keys: list, now: datetime.datetime) -> list:
        """What ``host_reports_save`` writes of nodes ``keys``: each
        node's last report, rebuilt from its view (a node forgotten
        since has none)."""
        with self._lock:
            views = [self._reports.get(key) for key in keys]
        return [report_backlog.report_row(view.report, now)
                for view in views if view is not None]

    # -- reports from computes ------------------------------------------

    def update_from_report(self, report, shared: bool = False) -> None:
        """Take a compute's report as the new state of its node.

        A report that says what the last one said (a quiet node's
        periodic report) only tells that the node is alive: its views
        get the new time, and the inventory only the time, at the next
        flush.  Anything else builds the node's views anew.

        ``shared``: the report came from the intake queue (API 1.5), so
        no other worker hears it.  A new one is then written to the
        inventory first, in a batch of a fraction of a second
        (``report_writer``), and becomes this worker's view once
        written: from then on every worker sees it at its next request
        (``refresh_changed_reports``).  Otherwise (every worker hears
        it) it is written at the next flush.
        """
        key = (report.host, report.nodename)
        with self._lock:
            old = self._reports.get(key)
        if old is not None and old.says_the_same(report):
            with self._lock:
                if (self._reports.get(key) is old and key not in self._down
                        and not self._backlog.usage_unwritten(key)
                        and not self._usage_cache.usage_changed(key, old)):
                    self._alive(key, old)
                    return
        view = host_view.HostView(report)
        key = view.key()
        if shared:
            with self._lock:
                carried = (_node_report(view)
                           if self._usage_cache.usage_changed(key, view)
                           else None)
            self._writer.submit(report_writer.Taken(key, view, carried))
            return
        with self._lock:
            told = self._install(view, unwritten=True,
                                 usage=_node_report(view)
                                 if self._usage_cache.usage_changed(key, view)
                                 else None)
        _log_taken(key, told)

    def take_alive(self, nodes: list) -> list:
        """Quiet computes' liveness messages (API 1.6): ``nodes`` is
        ``[((host, nodename), digest)]``, each saying that the node is
        alive and that its state is still that of the full report whose
        ``content_digest`` is ``digest``.

        A node whose report here has that digest is renewed as a quiet
        full report renews it (``update_from_report``): new views with
        the new time, the time written at the next flush; nothing is
        decoded or rebuilt, no row rewritten.  The others (a report
        another worker took and this one has not read yet, an unknown
        node, a down node, usage the inventory does not have yet) are
        looked up once more after reading the reports other workers
        changed and these nodes' usage (``refresh_changed_reports``,
        ``refresh_nodes``: a worker that serves no request reads
        neither otherwise); returns the keys still not renewed: their
        computes must send a full report.
        """
        missed = self._renew(nodes)
        if not missed:
            return []
        try:
            self.refresh_changed_reports()
            self.refresh_nodes(sorted({key for key, _digest in missed}))
        except Exception as e:
            if not availability.is_outage(e):
                raise
            availability.count('reading changed host reports')
            return [key for key, _digest in missed]
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
                    same = (old is not None and key not in self._down
                            and old.content_digest(version) == digest)
                except ValueError:  # a HostState version newer than ours
                    same = False
                if (same and not self._backlog.usage_unwritten(key)
                        and not self._usage_cache.usage_changed(key, old)):
                    self._alive(key, old)
                else:
                    missed.append((key, digest))
        return missed

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
        if unless_older and old is not None and _newer_report(old, view):
            return None
        back = key in self._down
        self._down.discard(key)
        self._aggregates.attach(view, like=old)
        self._reports[key] = view
        self._nodes_of.setdefault(key[0], set()).add(key)
        if unwritten:
            self._backlog.report_changed(key, usage)
        elif usage is not None:
            self._backlog.usage_changed(key, usage)
        self._compose(key)
        if back:
            return 'back'
        return 'new' if old is None else ''

    def _write_taken(self, taken: list) -> None:
        """Write reports taken from the intake (``report_writer``), then
        make them this worker's views.

        One transaction for the reports, one for the usage they carry
        (which confirms claims), then the usage rows are read back.
        What cannot be written is installed all the same and kept for
        the periodic flush: this worker goes on scheduling with it, and
        the others learn it once the inventory is back.
        """
        now = report_backlog.stored_time()
        keys = [item.key for item in taken]
        try:
            seq = self.db.host_reports_save(
                [report_backlog.report_row(item.view.report, now)
                 for item in taken])
        except Exception as e:
            self._write_failed(e, 'host reports')
            with self._lock:
                told = [(item.key, self._install(item.view, unwritten=True,
                                                 usage=item.usage))
                        for item in taken]
            for key, what in told:
                _log_taken(key, what)
            return
        self._written(keys, seq, True)
        carried = [item.usage for item in taken if item.usage is not None]
        usage_keys = [item.key for item in taken if item.usage is not None]
        rows, pending = [], []
        if carried:
            try:
                confirmed = self.usage_db.apply_reports(carried)
                rows = self._usage_cache.read_nodes(set(usage_keys))
                pending = self._usage_cache.read_pending(usage_keys)
            except Exception as e:
                self._write_failed(e, 'the usage of host reports')
                usage_keys = []
            else:
                if confirmed:
                    LOG.debug('Reports confirmed %d claim(s)',
                              len(confirmed))
        with self._lock:
            # The usage rows first: the views composed below lay them
            # over the new reports at once.
            if usage_keys:
                self._usage_cache.take(rows, pending, usage_keys)
            applied = set(usage_keys)
            told = []
            for item in taken:
                what = self._install(
                    item.view, unwritten=False, unless_older=True,
                    usage=None if item.key in applied else item.usage)
                if what is None and item.key in applied:
                    # A newer report is held: the usage row is new.
                    self._compose(item.key)
                told.append((item.key, what))
        for key, what in told:
            _log_taken(key, what)

    def _alive(self, key, report_view, received_at: float | None = None
               ) -> None:
        """Node ``key`` reported again, with nothing new: new views with
        the time of this report (views are replaced, never changed).

        ``received_at`` given: another worker took the report and the
        inventory has it (``refresh_reports``), nothing to write.
        """
        fresh = report_view.successor(
            received_at=liveness.now() if received_at is None
            else received_at)
        self._reports[key] = fresh
        if received_at is None:
            self._backlog.report_alive(key)
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
                self._backlog.forget(key)
                for table in (self._reports, self._states):
                    table.pop(key, None)
                self._usage_cache.forget(key)
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

    def refresh_changed_reports(self) -> int:
        """Take the new and changed reports other workers wrote since
        the last look; before every request.

        A report from the intake queue (API 1.5) is taken by one worker
        of the deployment, which writes it before it uses it
        (``update_from_report``): here every other worker learns it, by
        the report sequence, with one indexed query for the rows whose
        report changed since the highest ``changed_seq`` read, which
        finds nothing while nothing changed.  Rows that only got a new
        time are left to ``refresh_reports`` (periodic).  Returns how
        many nodes were brought up to date.
        """
        rows = self.db.host_reports_changed_since(self._changed_mark)
        if not rows:
            return 0
        with self._lock:
            reload = [(row['host'], row['nodename']) for row in rows
                      if row['changed_seq'] > self._report_seqs.get(
                          (row['host'], row['nodename']), -1)]
            self._changed_mark = max(self._changed_mark,
                                     rows[-1]['changed_seq'])
        if not reload:
            return 0
        return self._take_stored(self.db.host_reports_get(reload))

    def refresh_reports(self) -> int:
        """Take every report other workers wrote since the last look,
        new times included (periodic, before judging hosts down).

        As ``refresh_changed_reports``, by the report sequence of every
        write (``seq``): a row whose report changed is read whole and
        decoded; one that only got a new time makes the node's views
        newer, so that a node whose reports another worker takes is not
        judged down.  Returns how many nodes were brought up to date.
        """
        rows = self.db.host_reports_since(self._report_mark)
        if not rows:
            return 0
        reload, fresh = [], 0
        back = []
        with self._lock:
            for row in rows:
                if row['seq'] in self._own_seqs:
                    continue
                key = (row['host'], row['nodename'])
                if row['changed_seq'] > self._report_seqs.get(key, -1):
                    reload.append(key)
                    continue
                old = self._reports.get(key)
                updated = row.get('updated_at')
                if old is None or updated is None:
                    continue
                when = _timestamp(updated)
                if when > old.received_at:
                    if key in self._down:
                        self._down.discard(key)
                        back.append(key)
                    self._alive(key, old, received_at=when)
                    fresh += 1
            self._report_mark = max(self._report_mark, rows[-1]['seq'])
            # Every change up to the highest number read is known now
            # (rows become visible in sequence order).
            self._changed_mark = max(self._changed_mark, self._report_mark)
            self._own_seqs = {seq for seq in self._own_seqs
                              if seq > self._report_mark}
        for key in back:
            _log_taken(key, 'back', _ANOTHER)
        if reload:
            fresh += self._take_stored(self.db.host_reports_get(reload))
        return fresh

    def _take_stored(self, rows: list) -> int:
        """Make stored reports ``rows`` (written by another worker) the
        nodes' reports, unless this worker holds a newer one."""
        taken = 0
        for row in rows:
            view = _stored_view(row)
            if view is None:
                continue
            key = view.key()
            with self._lock:
                if self._report_seqs.get(key, -1) < row['changed_seq']:
                    self._report_seqs[key] = row['changed_seq']
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

        Cheap when nothing changed (one indexed query each).  Returns
        how many nodes' usage was refreshed.

        Requests share reads: a request that comes while a read is under
        way waits for it to end and then for the next one, led by one of
        the requests that waited, so that what it sees was read after it
        came (a host that reported just before is known to it).  A worker
        serving many requests at once thus sends two reads per burst,
        not one per request, and all the waiting requests wake together
        when a read ends: handing a lock from one to the next cost each
        of them a trip through the hub in turn.
        """
        with self._refresh_state:
            arrived = self._refreshes_begun
        while True:
            with self._refresh_state:
                if self._refreshes_done > arrived:
                    # A read that began after this request came ended.
                    return 0
                under_way = self._refreshing
                lead = under_way is None
                if lead:
                    under_way = self._refreshing = threading.Event()
                    self._refreshes_begun += 1
                    mine = self._refreshes_begun
            if lead:
                break
            under_way.wait()
        try:
            return self._refresh_usage()
        finally:
            with self._refresh_state:
                self._refreshing = None
                self._refreshes_done = mine
            under_way.set()

    def _refresh_usage(self) -> int:
        self.refresh_changed_reports()
        rows = self._usage_cache.read_changed()
        with self._lock:
            changed = self._usage_cache.changed(rows)
        if changed:
            self._reload_nodes(changed, rows)
        return len(changed)

    def refresh_nodes(self, keys: list) -> None:
        """Re-read the usage and pending claims of ``keys`` now."""
        if not keys:
            return
        wanted = set(keys)
        self._reload_nodes(list(wanted),
                           self._usage_cache.read_nodes(wanted))

    def _reload_nodes(self, keys: list, rows: list) -> None:
        """Take ``rows`` (and the nodes' pending claims, read now) as
        what the inventory says of nodes ``keys``, and compose their
        views.

        Both were read without the lock (a query must not hold it): a
        node whose newer row another refresh or a claim cached
        meanwhile keeps it (``UsageCache.take``).
        """
        pending = self._usage_cache.read_pending(keys)
        with self._lock:
            for key in self._usage_cache.take(rows, pending, keys):
                self._compose(key)

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
        pending = self._usage_cache.pending.get(key)
        if pending:
            listed = set(report.instance_uuids)
            unlisted = [c for c in pending.values()
                        if c.instance_uuid not in listed]
        else:
            unlisted = []
        row = self._usage_cache.rows.get(key)
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
            # Real free disk the same way: the compute's measure of the
            # report behind the row, less what is pending (which that
            # measure cannot count yet).
            least = row.get('reported_disk_least')
            if least is not None:
                view.disk_available_least = least - row['claimed_disk_gb']
            elif view.disk_available_least is not None:
                view.disk_available_least -= sum(c.disk_gb
                                                 for c in unlisted)
        else:
            for claim in unlisted:
                view.memory_mb_used += claim.memory_mb
                view.vcpus_used += claim.vcpus
                view.local_gb_used += claim.disk_gb
                view.num_instances += 1
                if view.disk_available_least is not None:
                    view.disk_available_least -= claim.disk_gb
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
            return list(self._usage_cache.pending.get(key, {}).values())

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
                plans = [plan for _c, _a, plan in made]
                as_read, moved = self._usage_cache.claimed(
                    key, [claim for claim, _a, _p in made], made[-1][1],
                    [plan.request for plan in plans])
                moved_from.update(moved)
                if as_read and self._plans_hold(key, plans):
                    self._publish(key, plans[-1].view)
                else:
                    self._compose(key)
        self.refresh_nodes(sorted(moved_from))
        return claims

    def _plans_hold(self, key, plans: list) -> bool:
        """Whether the last of ``plans`` (a request's claims on node
        ``key``, just made) is the view ``_compose`` would now build.

        The caller checked that the inventory's row moved by these
        claims alone (``UsageCache.claimed`` took its row as is: every write
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
        with self._lock:
            candidates, keys = self._usage_cache.overdue(self._reports,
                                                         expiry)
        if not candidates:
            return []
        cutoff = timeutils.utcnow() - datetime.timedelta(seconds=expiry)
        expired = self.usage_db.expire(candidates, cutoff)
        for placement in expired:
            notifications.claim_expired(Claim.from_row(placement))
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
            for key in self._nodes_of.get(host, ()):
                report = self._reports.get(key)
                if report is None:
                    continue
                # Views are replaced, never changed in place.
                fresh = report.successor()
                self._aggregates.attach(fresh)
                self._reports[key] = fresh
                self._renew_state(key, report, fresh)

    # -- instance info from computes ------------------------------------

    def update_instance_info(self, host: str, instance_uuids: list) -> None:
        """A compute reports new instances on ``host``: they are built.

        Their usage stays counted as pending until a report of the node
        includes it.  Nothing is read back: the confirmation changes
        only the claims' status, which this worker's cache takes as the
        inventory now has it (one build a placement: the re-read cost
        two more round trips per placement).
        """
        if self.usage_db.confirm(host, instance_uuids):
            with self._lock:
                self._usage_cache.confirmed(self._nodes_of.get(host, ()),
                                            instance_uuids)

    def sync_instance_info(self, host: str, instance_uuids: list) -> list:
        """A compute's complete list of its instances, sent now and then.

        Confirms the claims it lists; placements on that host the compute
        no longer has are dropped (claims still building stay).  Returns
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
            return sorted(self._nodes_of.get(host, ()))

    def host_names(self, states: list | None = None) -> list:
        states = self.get_up_host_states() if states is None else states
        return sorted({s.host for s in states})


#: How ``_log_taken`` says that a report reached another worker.
_ANOTHER = ' (to another worker)'


def _log_taken(key, what: str | None, source: str = '') -> None:
    """Say that node ``key`` came back or is new (``_install``)."""
    if what == 'back':
        LOG.info('Host %s/%s is reporting again%s; scheduling to it',
                 key[0], key[1], source)
    elif what == 'new':
        LOG.info('New host %s/%s reported%s', key[0], key[1], source)


def _stored_view(row: dict) -> host_view.HostView | None:
    """The view of a report row of the inventory; None (logged) when
    the saved report cannot be read."""
    try:
        # Written by a worker from a report it had checked: not checked
        # and coerced again field by field.
        state = objects.HostState.from_own_primitive(row['report'])
    except Exception as e:
        LOG.warning('Ignoring unreadable saved report of %s/%s: %s',
                    row['host'], row['nodename'], e)
        return None
    updated = row.get('updated_at')
    view = host_view.HostView(
        state, _timestamp(updated) if updated else None)
    view.disabled = bool(row.get('disabled', view.disabled))
    return view


def _newer_report(held, stored) -> bool:
    """Whether the report view ``held`` was produced after ``stored``
    (by the computes' own clock: the time each report carries)."""
    mine, theirs = held.updated_at, stored.updated_at
    if mine is None or theirs is None:
        return False
    return _timestamp(mine) > _timestamp(theirs)


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


def _row_says(row: dict, report) -> bool:
    """Whether usage ``row`` gives node ``report`` the usage its compute
    reported (nothing claimed on it since, or all of it confirmed)."""
    least = row.get('reported_disk_least')
    if least is not None:
        least -= row['claimed_disk_gb']
    return (row['reported_memory_mb'] + row['claimed_memory_mb'],
            row['reported_vcpus'] + row['claimed_vcpus'],
            row['reported_disk_gb'] + row['claimed_disk_gb'],
            row['reported_instances'] + row['claimed_instances'],
            least) == (
        report.memory_mb_used, report.vcpus_used, report.local_gb_used,
        report.num_instances, report.disk_available_least)


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
