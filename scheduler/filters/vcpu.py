"""VCPUFilter: enough vCPUs, counting the CPU allocation ratio."""

from scheduler.filters import base
from scheduler.resources import compute


class VCPUFilter(base.RequestScopedFilter):
    """Passes hosts whose free vCPUs (total x ratio - used) fit the flavor;
    one instance may not have more vCPUs than the host has CPUs."""

    def prepare(self, spec_obj) -> int:
        return spec_obj.flavor.vcpus

    def passes(self, host_state, requested: int) -> base.Verdict:
        if not host_state.vcpus:
            # The compute does not know its vCPUs: do not guess.
            return True
        if compute.larger_than_host(requested, host_state.vcpus):
            return base.Rejected('requested %d vCPUs > %d physical CPUs',
                                 requested, host_state.vcpus)
        usable = compute.usable_vcpus(host_state)
        if usable >= requested:
            return True
        return base.Rejected(
            'free vCPUs %g < requested %d (total %d x ratio %s, used %d)',
            usable, requested, host_state.vcpus,
            host_state.allocation_ratio('cpu'), host_state.vcpus_used)

    def filter_columns(self, columns, requested: int):
        """``passes`` over columns (``scheduler.columns``)."""
        total = columns.vcpus
        return (total == 0) | ((requested <= total) & (
            columns.usable_vcpus >= requested))

    def host_limits(self, host_state, spec_obj) -> dict:
        """How far the compute (and the claim) may oversubscribe vCPUs."""
        if not host_state.vcpus:
            return {}
        ratio = host_state.allocation_ratio('cpu')
        return {'vcpu': host_state.vcpus * ratio}
