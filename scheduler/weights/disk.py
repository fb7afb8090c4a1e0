"""DiskWeigher: prefer hosts with more free disk (or less, if negative)."""

from scheduler.weights import base


class DiskWeigher(base.BaseHostWeigher):
    """Weighs hosts by free local disk: the smaller of totals minus usage
    and the compute's ``disk_available_least``, as nova does."""

    #: As nova: negative raw values (overcommitted hosts) count as 0,
    #: and hosts are normalised over [0, max].
    minval = 0
    multiplier_option = 'disk_weight_multiplier'

    def weigh_columns(self, columns, spec_obj):
        return columns.free_disk_mb

    def _weigh_object(self, host_state, spec_obj) -> float:
        return host_state.free_disk_mb
