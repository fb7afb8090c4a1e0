"""DiskWeigher: prefer hosts with more free disk (or less, if negative)."""

from scheduler.weights import base


class DiskWeigher(base.BaseHostWeigher):
    """Weighs hosts by free local disk."""

    multiplier_option = 'disk_weight_multiplier'

    def _weigh_object(self, host_state, spec_obj) -> float:
        return host_state.free_disk_mb
