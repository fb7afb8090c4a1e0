"""BuildFailureWeigher: sink hosts that recently failed to build
instances."""

from scheduler.weights import base


class BuildFailureWeigher(base.BaseHostWeigher):
    """Weighs hosts by their recent failed builds, negatively: the raw
    weight is ``-failed_builds``, so that with the (huge) positive
    default ``build_failure_weight_multiplier`` hosts without failures
    win over hosts with failures whatever the other weighers say, yet
    a failing host stays in rotation when nothing else passes.
    """

    multiplier_option = 'build_failure_weight_multiplier'

    def _weigh_object(self, host_state, spec_obj) -> float:
        return -host_state.failed_builds
