"""DiskFilter: enough local disk, counting the disk allocation ratio."""

from scheduler.filters import base
from scheduler.resources import compute


class DiskFilter(base.RequestScopedFilter):
    """Passes hosts whose usable disk fits the flavor, as nova computes
    it: total x ratio - used, where used is total - free and free is
    the smaller of the totals' and the compute's
    ``disk_available_least``.  An instance larger than the host's whole
    disk is refused whatever the allocation ratio (no overcommit
    against itself).
    """

    def prepare(self, spec_obj) -> int:
        return compute.requested_disk_mb(spec_obj)

    def passes(self, host_state, requested_mb: int) -> base.Verdict:
        if compute.larger_than_host(requested_mb,
                                    host_state.local_gb * 1024):
            return base.Rejected(
                'requested %d MB disk > %d GB physical disk (no overcommit '
                'against itself)', requested_mb, host_state.local_gb)
        usable = compute.usable_disk_mb(host_state)
        if usable >= requested_mb:
            return True
        least = host_state.disk_available_least
        return base.Rejected(
            'usable disk %d MB < requested %d MB (total %d GB x ratio %s, '
            'free %d GB%s)', usable, requested_mb, host_state.local_gb,
            host_state.allocation_ratio('disk'),
            compute.free_disk_gb(host_state),
            '' if least is None else ', disk_available_least %d GB' % least)

    def filter_columns(self, columns, requested_mb: int):
        """``passes`` over columns (``scheduler.columns``)."""
        return (requested_mb <= columns.local_gb * 1024) & (
            columns.usable_disk_mb >= requested_mb)

    def host_limits(self, host_state, spec_obj) -> dict:
        """How far the compute (and the claim) may oversubscribe disk."""
        ratio = host_state.allocation_ratio('disk')
        return {'disk_gb': host_state.local_gb * ratio}
