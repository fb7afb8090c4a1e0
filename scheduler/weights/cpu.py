"""CPUWeigher: prefer hosts with more free vCPUs (or fewer, if negative)."""

from oslo_config import cfg

from scheduler.weights import base

CONF = cfg.CONF


class CPUWeigher(base.BaseHostWeigher):
    """Weighs hosts by free vCPUs (total x ratio - used)."""

    def weight_multiplier(self, host_state) -> float:
        return CONF.filter_scheduler.cpu_weight_multiplier

    def _weigh_object(self, host_state, spec_obj) -> float:
        total = host_state.vcpus * host_state.allocation_ratio('cpu')
        return total - host_state.vcpus_used
