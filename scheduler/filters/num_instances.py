"""NumInstancesFilter: the host runs fewer than ``max_instances_per_host``
instances."""

from scheduler.filters import counts


class NumInstancesFilter(counts.CountBelowLimit):
    """Passes hosts running fewer than ``[filter_scheduler]
    max_instances_per_host`` instances.

    Runs for every instance of a request: each instance placed on a
    host counts there.
    """

    count = 'num_instances'
    option = 'max_instances_per_host'
    what = 'instances'
