"""RAMWeigher: prefer hosts with more free RAM (or less, if negative)."""

from oslo_config import cfg

from scheduler.weights import base

CONF = cfg.CONF


class RAMWeigher(base.BaseHostWeigher):
    """Weighs hosts by free RAM; ``ram_weight_multiplier`` < 0 stacks."""

    def weight_multiplier(self, host_state) -> float:
        return CONF.filter_scheduler.ram_weight_multiplier

    def _weigh_object(self, host_state, spec_obj) -> float:
        return host_state.free_ram_mb
