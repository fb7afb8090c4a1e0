"""HypervisorVersionWeigher: prefer hosts with newer hypervisors (or
older, if the multiplier is negative)."""

from scheduler.weights import base


class HypervisorVersionWeigher(base.BaseHostWeigher):
    """Weighs hosts by the ``hypervisor_version`` their driver reports
    (0 when unknown).  Versions of different hypervisor types are not
    comparable: group such hosts in aggregates and override
    ``hypervisor_version_weight_multiplier`` per aggregate if needed.
    """

    multiplier_option = 'hypervisor_version_weight_multiplier'

    def weigh_columns(self, columns, spec_obj):
        return columns.hypervisor_version

    def _weigh_object(self, host_state, spec_obj) -> float:
        return host_state.hypervisor_version or 0
