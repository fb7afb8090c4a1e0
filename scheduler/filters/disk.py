"""DiskFilter: enough local disk, counting the disk allocation ratio."""

from scheduler.filters import base


def requested_disk_mb(spec_obj) -> int:
    """Root (unless booted from volume) + ephemeral + swap, in MiB."""
    flavor = spec_obj.flavor
    disk_gb = flavor.ephemeral_gb
    if not spec_obj.obj_get('is_bfv', False):
        disk_gb += flavor.root_gb
    return disk_gb * 1024 + flavor.swap


class DiskFilter(base.BaseHostFilter):
    """Passes hosts whose usable disk (total x ratio - used) fits the flavor."""

    def _usable_mb(self, host_state):
        ratio = host_state.allocation_ratio('disk')
        limit_gb = host_state.total_usable_disk_gb * ratio
        return limit_gb, (limit_gb - host_state.local_gb_used) * 1024

    def host_passes(self, host_state, spec_obj) -> bool:
        limit_gb, usable_mb = self._usable_mb(host_state)
        if usable_mb < requested_disk_mb(spec_obj):
            return False
        host_state.limits['disk_gb'] = limit_gb
        return True

    def rejection_reason(self, host_state, spec_obj) -> str:
        _limit, usable_mb = self._usable_mb(host_state)
        return ('usable disk %d MB < requested %d MB (total %d GB x ratio '
                '%s, used %d GB)' % (usable_mb, requested_disk_mb(spec_obj),
                                     host_state.total_usable_disk_gb,
                                     host_state.allocation_ratio('disk'),
                                     host_state.local_gb_used))
