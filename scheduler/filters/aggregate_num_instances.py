"""AggregateNumInstancesFilter: the host runs fewer instances than its
aggregates' ``max_instances_per_host``."""

from scheduler.filters import counts


class AggregateNumInstancesFilter(counts.AggregateCountBelowLimit):
    """Passes hosts running fewer instances than the
    ``max_instances_per_host`` metadata of their aggregates (the
    smallest when several set it), or than ``[filter_scheduler]
    max_instances_per_host`` when none does.
    """

    count = 'num_instances'
    option = 'max_instances_per_host'
    what = 'instances'
