"""IoOpsWeigher: prefer hosts with fewer concurrent I/O operations (or
more, if the multiplier is positive)."""

from scheduler.weights import base


class IoOpsWeigher(base.BaseHostWeigher):
    """Weighs hosts by ``num_io_ops`` (instances building, resizing,
    snapshotting, migrating, rescuing or unshelving).  The default
    ``io_ops_weight_multiplier`` of -1.0 prefers lightly loaded hosts.
    """

    #: As nova: negative raw values (overcommitted hosts) count as 0,
    #: and hosts are normalised over [0, max].
    minval = 0
    multiplier_option = 'io_ops_weight_multiplier'

    def weigh_columns(self, columns, spec_obj):
        return columns.num_io_ops

    def _weigh_object(self, host_state, spec_obj) -> float:
        return host_state.num_io_ops
