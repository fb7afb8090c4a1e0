"""IoOpsFilter: the host has fewer concurrent I/O operations than
``max_io_ops_per_host``."""

from scheduler.filters import counts


class IoOpsFilter(counts.CountBelowLimit):
    """Passes hosts with fewer than ``[filter_scheduler]
    max_io_ops_per_host`` instances building, resizing, snapshotting,
    migrating, rescuing or unshelving (``num_io_ops``).

    Runs for every instance of a request: each instance placed on a
    host counts as one more operation there.
    """

    count = 'num_io_ops'
    option = 'max_io_ops_per_host'
    what = 'concurrent I/O operations'
