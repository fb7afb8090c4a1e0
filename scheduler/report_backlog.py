"""What of the computes' reports this worker has yet to write.

``ReportBacklog`` owns the nodes whose last report the inventory does
not have yet (whole, or only its time) and the usage those reports
carry, and writes them (``write``).  It shares the host manager's
lock; the reports themselves stay ``NodeReports``', read when
written, and what was written is told to ``ReportMarks``.

``write`` is the database part of ``HostManager.flush``.  It runs in
the caller's (green) thread and yields between batches
(``concurrency.cooperative_yield``), so that requests are served while
a fleet's reports are written.
"""

import datetime
import typing

from oslo_log import log as logging

from scheduler import concurrency
from scheduler import report_isolation
from scheduler.db import availability
from scheduler.resources import liveness

LOG = logging.getLogger(__name__)

#: Nodes ``write`` writes per transaction.
FLUSH_BATCH = 1000


class ReportBacklog:
    """Reports (and their usage) not in the inventory yet."""

    def __init__(self, lock, reports, marks):
        #: The host manager's lock (reports and backlog change together).
        self._lock = lock
        #: ``NodeReports`` (what is written) and ``ReportMarks`` (told
        #: what was).
        self._reports = reports
        self._marks = marks
        #: Nodes whose last report is not in the inventory yet.
        self.dirty: set = set()
        #: Nodes whose saved report only needs a new time.
        self.touched: set = set()
        #: key -> the usage of its last report (``usage.NodeReport``),
        #: when it says more than the node's usage row.
        self.usage: dict = {}
        #: Nodes whose last report the inventory refused (dropped, see
        #: ``report_isolation``): their next report is no renewal.
        self.refused: set = set()

    # Called with the lock held.

    def report_changed(self, key, node_report=None) -> None:
        """Node ``key`` has a new report to write (and ``node_report``,
        its usage, when that says more than the usage row)."""
        self.dirty.add(key)
        self.refused.discard(key)
        if node_report is not None:
            self.usage[key] = node_report

    def usage_changed(self, key, node_report) -> None:
        """Node ``key``'s report is written, not the usage it carries
        (``node_report``)."""
        self.usage[key] = node_report

    def report_alive(self, key) -> None:
        """Node ``key``'s saved report only needs the new time."""
        self.touched.add(key)

    def usage_unwritten(self, key) -> bool:
        return key in self.usage

    def was_refused(self, key) -> bool:
        """Whether the inventory refused node ``key``'s last report: the
        next one is written whole, even if it says the same."""
        return key in self.refused

    def forget(self, key) -> None:
        self.refused.discard(key)
        self.touched.discard(key)
        self.dirty.discard(key)
        self.usage.pop(key, None)

    def write(self, db, took_usage: typing.Callable) -> list:
        """Write the backlog: ``FLUSH_BATCH`` nodes a transaction, each
        node's report and the usage it carries (which confirms claims)
        together, read back in the same transaction
        (``host_reports_save_with_usage``, as the intake's reports);
        then the times of the quiet ones.  ``took_usage(applied,
        keys)``, called with the lock held, lays what was read back
        (``usage.Applied``) over the views of nodes ``keys``.

        Rows are made from the nodes' reports when written, not held: a
        fleet's first reports or a long backlog would otherwise keep a
        row per node in memory until the last batch.  A node the
        inventory refuses is dropped alone (``report_isolation``) and
        marked ``refused``; on any other error what was not written is
        kept for the next time (forgotten nodes are dropped).  Returns
        the keys of the nodes refused whose report held is the refused
        one (no newer one came meanwhile).
        """
        with self._lock:
            dirty, self.dirty = self.dirty, set()
            usage_reports, self.usage = self.usage, {}
            touched, self.touched = self.touched - dirty, set()
        left = sorted(dirty | set(usage_reports))
        confirmed = 0
        refused: list = []

        def written(parts: list, result) -> None:
            nonlocal confirmed
            with self._lock:
                changed = [p.key for p in parts if p.row is not None]
                if changed:
                    self._marks.written(changed, result.seq, True)
                if result.applied is not None:
                    took_usage(result.applied, [p.key for p in parts
                                                if p.usage is not None])
                    confirmed += len(result.applied.confirmed)

        try:
            now = stored_time()
            while left:
                chunk, rest = left[:FLUSH_BATCH], left[FLUSH_BATCH:]
                with self._lock:
                    views = {key: self._reports.get(key) for key in chunk
                             if key in dirty}
                parts = [report_isolation.Part(
                    key, row=(report_row(views[key], now)
                              if views.get(key) is not None else None),
                    usage=usage_reports.get(key)) for key in chunk]
                outcome = report_isolation.write(
                    db.host_reports_save_with_usage,
                    [p for p in parts
                     if p.row is not None or p.usage is not None],
                    written)
                refused += self._refused([p.key for p in outcome.refused])
                if outcome.error is not None:
                    left = [p.key for p in outcome.unwritten] + rest
                    raise outcome.error
                left = rest
                concurrency.cooperative_yield()
            if touched:
                quiet = sorted(touched)
                self._written(quiet, db.host_reports_touch(quiet, now),
                              False)
                touched = set()
        except Exception as e:
            with self._lock:
                self.touched.update(touched)
                for key in left:
                    if key in dirty and self._reports.get(key) is not None:
                        self.dirty.add(key)
                    if key in usage_reports:
                        self.usage.setdefault(key, usage_reports[key])
            write_failed(e, 'host reports')
        if confirmed:
            LOG.debug('Reports confirmed %d claim(s)', confirmed)
        return refused

    def _refused(self, keys: list) -> list:
        """The inventory refused the reports of nodes ``keys``: nothing
        of them is kept, and the next report of each is written whole
        (unless a newer one is waiting already); returns those."""
        if not keys:
            return []
        with self._lock:
            keys = [key for key in keys if key not in self.dirty]
            self.refused.update(keys)
        return keys

    def _written(self, keys: list, seq, changed: bool) -> None:
        with self._lock:
            self._marks.written(keys, seq, changed)


def write_failed(error: BaseException, what: str) -> None:
    """Log a write that failed (what was not written is kept): an
    outage, or an error ``report_isolation`` does not isolate."""
    if availability.is_outage(error):
        # Told once per outage, with a count of these.
        availability.count('saving %s (kept, retried)' % what)
    else:
        LOG.error('Could not write to the inventory (%s); will retry: '
                  '%s', what, error, exc_info=error)


def stored_time() -> datetime.datetime:
    """The time a report is stored with: the scheduler's clock
    (``liveness``), which other workers take as the node's last report
    (``HostManager.refresh_reports``); naive UTC."""
    return datetime.datetime.fromtimestamp(
        liveness.now(), datetime.timezone.utc).replace(tzinfo=None)


def report_row(view, now: datetime.datetime) -> dict:
    """What ``host_reports_save_with_usage`` writes of the report of
    ``view`` (a ``HostView``)."""
    source = view.reported_view()
    return {'host': source.host, 'nodename': source.nodename,
            'uuid': source.uuid, 'disabled': source.disabled,
            'report': view.report_primitive(), 'updated_at': now}
