"""DiskFilter: enough local disk, counting the disk allocation ratio."""

from scheduler.filters import base


def requested_disk_mb(spec_obj) -> int:
    """Root (unless booted from volume) + ephemeral + swap, in MiB."""
    flavor = spec_obj.flavor
    disk_gb = flavor.ephemeral_gb
    if not spec_obj.obj_get('is_bfv', False):
        disk_gb += flavor.root_gb
    return disk_gb * 1024 + flavor.swap


class DiskFilter(base.RequestScopedFilter):
    """Passes hosts whose usable disk (total x ratio - used) fits the flavor.
    """

    def prepare(self, spec_obj) -> int:
        return requested_disk_mb(spec_obj)

    @staticmethod
    def _limit_gb(host_state) -> float:
        return host_state.local_gb * host_state.allocation_ratio('disk')

    def passes(self, host_state, requested_mb: int) -> bool:
        limit_gb = self._limit_gb(host_state)
        return (limit_gb - host_state.local_gb_used) * 1024 >= requested_mb

    def host_limits(self, host_state, spec_obj) -> dict:
        """How far the compute (and the claim) may oversubscribe disk."""
        return {'disk_gb': self._limit_gb(host_state)}

    def rejection_reason(self, host_state, spec_obj) -> str:
        usable_mb = (self._limit_gb(host_state)
                     - host_state.local_gb_used) * 1024
        return ('usable disk %d MB < requested %d MB (total %d GB x ratio '
                '%s, used %d GB)' % (usable_mb, self.prepare(spec_obj),
                                     host_state.local_gb,
                                     host_state.allocation_ratio('disk'),
                                     host_state.local_gb_used))
