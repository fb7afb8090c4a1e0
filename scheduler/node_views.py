"""The view filters see of each node, and who is told of it.

``NodeViews`` shares the host manager's lock and is called with it
held.  Views are replaced, never changed in place: a request that holds
one keeps a consistent one.
"""

from scheduler.resources import numa
from scheduler.resources import pci


class NodeViews:
    """Each node's published view (its report with the usage row and
    pending claims of ``UsageCache`` laid over it) and the watchers
    told of every view published or dropped."""

    def __init__(self, reports, usage):
        #: ``NodeReports`` and ``UsageCache``: what a view is made of.
        self._reports = reports
        self._usage = usage
        #: key -> the view filters see: the report view itself when
        #: there is nothing to lay over it.
        self._by_key: dict = {}
        #: Told of every view published or dropped (``watch``).
        self._watchers: list = []

    def get(self, key, default=None):
        return self._by_key.get(key, default)

    def all(self) -> list:
        return list(self._by_key.values())

    def watch(self, watcher) -> None:
        """``HostManager.watch_views``."""
        self._watchers.append(watcher)
        for key, view in self._by_key.items():
            watcher.view_changed(key, view)

    def publish(self, key, view) -> None:
        """Make ``view`` node ``key``'s view, and tell the watchers."""
        self._by_key[key] = view
        for watcher in self._watchers:
            watcher.view_changed(key, view)

    def compose(self, key) -> None:
        """Build node ``key``'s view anew from what is known of it."""
        view = self.composed(key)
        if view is not None:
            self.publish(key, view)
        elif self._by_key.pop(key, None) is not None:
            for watcher in self._watchers:
                watcher.view_removed(key)

    def renew(self, key, old_report, report) -> None:
        """Publish the successor of node ``key``'s view, now that its
        report view ``old_report`` was succeeded by ``report`` (a new
        time, aggregates attached again): the report itself when it was
        the view, else the view's successor over it."""
        state = self._by_key.get(key)
        if state is None:
            return
        if state is old_report:
            view = report
        else:
            view = state.successor(received_at=report.received_at)
            view._reported = report
            view.set_aggregates(report.aggregates, like=report)
        self.publish(key, view)

    def plans_hold(self, key, plans: list) -> bool:
        """Whether the last of ``plans`` (a request's claims on node
        ``key``, just made) is the view ``compose`` would now build.

        The caller checked that the inventory's row moved by these
        claims alone (``UsageCache.claimed``).  The plans hold when
        nothing reached the node since the first was made on its
        current view (views are replaced on every change, so identity
        tells) and the claims are plain: no NUMA cell, PCI device or
        replaced placement, no instance the compute already lists.
        """
        base = self._by_key.get(key)
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

    def composed(self, key):
        """The view of ``key`` from its report, usage row and pending
        claims; None when it has no report."""
        report = self._reports.get(key)
        if report is None:
            return None
        pending = self._usage.pending.get(key)
        if pending:
            listed = set(report.instance_uuids)
            unlisted = [c for c in pending.values()
                        if c.instance_uuid not in listed]
        else:
            unlisted = []
        row = self._usage.rows.get(key)
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
