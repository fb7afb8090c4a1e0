"""NumInstancesWeigher: pack instances onto busy hosts or spread them
over idle ones, by the number of instances each runs."""

from scheduler.weights import base


class NumInstancesWeigher(base.BaseHostWeigher):
    """Weighs hosts by ``num_instances``.  The default
    ``num_instances_weight_multiplier`` of 0.0 does nothing; positive
    values pack, negative values spread.
    """

    multiplier_option = 'num_instances_weight_multiplier'

    def weigh_columns(self, columns, spec_obj):
        return columns.num_instances

    def _weigh_object(self, host_state, spec_obj) -> float:
        return host_state.num_instances
