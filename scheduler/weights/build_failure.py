"""BuildFailureWeigher: sink hosts that recently failed to build
instances."""

from scheduler.weights import base


class BuildFailureWeigher(base.BaseHostWeigher):
    """Weighs hosts by their recent failed builds, as nova does: the raw
    weight is ``failed_builds`` and the multiplier is minus
    ``build_failure_weight_multiplier`` (or minus the host's aggregate
    override of it).  A host without failures normalises to 0 and so
    scores 0 whatever its multiplier; a host with failures scores below
    0, by the (huge by default) multiplier, so that it is chosen only
    when no healthy host passed the filters.
    """

    multiplier_option = 'build_failure_weight_multiplier'

    def weight_multiplier(self, host_state) -> float:
        return -super().weight_multiplier(host_state)

    def weight_multipliers(self, hosts: list) -> list:
        return [-m for m in super().weight_multipliers(hosts)]

    def column_multipliers(self, columns):
        return -super().column_multipliers(columns)

    def weigh_columns(self, columns, spec_obj):
        return columns.failed_builds

    def _weigh_object(self, host_state, spec_obj) -> float:
        return host_state.failed_builds
