"""RamFilter: enough RAM, counting the host's RAM allocation ratio."""

from scheduler.filters import base


class RamFilter(base.BaseHostFilter):
    """Passes hosts whose usable RAM (total x ratio - used) fits the flavor."""

    def _usable(self, host_state):
        ratio = host_state.allocation_ratio('ram')
        limit = host_state.total_usable_ram_mb * ratio
        return limit, limit - host_state.memory_mb_used

    def host_passes(self, host_state, spec_obj) -> bool:
        requested = spec_obj.flavor.memory_mb
        limit, usable = self._usable(host_state)
        if usable < requested:
            return False
        # Tell the compute how far it may oversubscribe.
        host_state.limits['memory_mb'] = limit
        return True

    def rejection_reason(self, host_state, spec_obj) -> str:
        limit, usable = self._usable(host_state)
        return ('usable RAM %d MB < requested %d MB (total %d MB x ratio '
                '%s, used %d MB)' % (usable, spec_obj.flavor.memory_mb,
                                     host_state.total_usable_ram_mb,
                                     host_state.allocation_ratio('ram'),
                                     host_state.memory_mb_used))
