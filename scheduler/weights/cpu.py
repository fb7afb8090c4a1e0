"""CPUWeigher: prefer hosts with more free vCPUs (or fewer, if negative)."""

from scheduler.resources import compute
from scheduler.weights import base


class CPUWeigher(base.BaseHostWeigher):
    """Weighs hosts by free vCPUs (total x ratio - used)."""

    #: As nova: negative raw values (overcommitted hosts) count as 0,
    #: and hosts are normalised over [0, max].
    minval = 0
    multiplier_option = 'cpu_weight_multiplier'

    def weigh_columns(self, columns, spec_obj):
        return columns.usable_vcpus

    def _weigh_object(self, host_state, spec_obj) -> float:
        return compute.usable_vcpus(host_state)
