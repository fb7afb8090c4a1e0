"""VCPUFilter: enough vCPUs, counting the CPU allocation ratio."""

from scheduler.filters import base


class VCPUFilter(base.BaseHostFilter):
    """Passes hosts whose free vCPUs (total x ratio - used) fit the flavor."""

    def _free(self, host_state):
        limit = host_state.vcpus * host_state.allocation_ratio('cpu')
        return limit, limit - host_state.vcpus_used

    def host_passes(self, host_state, spec_obj) -> bool:
        if not host_state.vcpus:
            # The compute does not know its vCPUs: do not guess.
            return True
        requested = spec_obj.flavor.vcpus
        limit, free = self._free(host_state)
        if requested > host_state.vcpus:
            # One instance may not have more vCPUs than the host has cores.
            return False
        if free < requested:
            return False
        host_state.limits['vcpu'] = limit
        return True

    def rejection_reason(self, host_state, spec_obj) -> str:
        requested = spec_obj.flavor.vcpus
        limit, free = self._free(host_state)
        if requested > host_state.vcpus:
            return ('requested %d vCPUs > %d physical CPUs'
                    % (requested, host_state.vcpus))
        return ('free vCPUs %g < requested %d (total %d x ratio %s, used %d)'
                % (free, requested, host_state.vcpus,
                   host_state.allocation_ratio('cpu'), host_state.vcpus_used))
