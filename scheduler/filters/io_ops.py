"""IoOpsFilter: the host has fewer concurrent I/O operations than
``max_io_ops_per_host``."""

from oslo_config import cfg

from scheduler.filters import base

CONF = cfg.CONF


class IoOpsFilter(base.RequestScopedFilter):
    """Passes hosts with fewer than ``[filter_scheduler]
    max_io_ops_per_host`` instances building, resizing, snapshotting,
    migrating, rescuing or unshelving (``num_io_ops``).

    Runs for every instance of a request: each instance placed on a
    host counts as one more operation there.
    """

    def prepare(self, spec_obj) -> int:
        # Not about the request: the limit, read once per request.
        return CONF.filter_scheduler.max_io_ops_per_host

    def passes(self, host_state, max_io_ops: int) -> bool:
        return host_state.num_io_ops < max_io_ops

    row_local = True

    def filter_columns(self, columns, max_io_ops: int):
        """``passes`` over columns (``scheduler.columns``)."""
        return columns.num_io_ops < max_io_ops

    def rejection_reason(self, host_state, spec_obj) -> str:
        return ('%d concurrent I/O operations >= max_io_ops_per_host %d'
                % (host_state.num_io_ops, self.prepare(spec_obj)))
