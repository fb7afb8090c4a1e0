"""RAMWeigher: prefer hosts with more free RAM (or less, if negative)."""

from scheduler.weights import base


class RAMWeigher(base.BaseHostWeigher):
    """Weighs hosts by free RAM; ``ram_weight_multiplier`` < 0 stacks."""

    #: As nova: negative raw values (overcommitted hosts) count as 0,
    #: and hosts are normalised over [0, max].
    minval = 0
    multiplier_option = 'ram_weight_multiplier'

    def weigh_columns(self, columns, spec_obj):
        return columns.free_ram_mb

    def _weigh_object(self, host_state, spec_obj) -> float:
        return host_state.free_ram_mb
