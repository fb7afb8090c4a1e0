"""AggregateIoOpsFilter: the host has fewer concurrent I/O operations
than its aggregates' ``max_io_ops_per_host``."""

from scheduler.filters import counts


class AggregateIoOpsFilter(counts.AggregateCountBelowLimit):
    """Passes hosts with fewer concurrent I/O operations (``num_io_ops``)
    than the ``max_io_ops_per_host`` metadata of their aggregates (the
    smallest when several set it), or than ``[filter_scheduler]
    max_io_ops_per_host`` when none does.
    """

    count = 'num_io_ops'
    option = 'max_io_ops_per_host'
    what = 'concurrent I/O operations'
