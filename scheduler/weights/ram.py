"""RAMWeigher: prefer hosts with more free RAM (or less, if negative)."""

from scheduler.weights import base


class RAMWeigher(base.BaseHostWeigher):
    """Weighs hosts by free RAM; ``ram_weight_multiplier`` < 0 stacks."""

    multiplier_option = 'ram_weight_multiplier'

    def _weigh_object(self, host_state, spec_obj) -> float:
        return host_state.free_ram_mb
