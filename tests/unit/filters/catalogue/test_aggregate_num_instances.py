"""AggregateNumInstancesFilter: per-aggregate limit, smallest wins."""

from scheduler.filters import aggregate_num_instances as mod
from tests.unit.filters.catalogue import aggregate
from tests.unit.filters.catalogue import host
from tests.unit.filters.catalogue import passing
from tests.unit.filters.catalogue import request


def test_falls_back_to_the_option(conf):
    conf.config(max_instances_per_host=2, group='filter_scheduler')
    hosts = [host('a', num_instances=1), host('b', num_instances=2)]
    assert passing(mod.AggregateNumInstancesFilter(), hosts,
                   request()) == ['a']


def test_aggregate_values_smallest_wins(conf):
    conf.config(max_instances_per_host=50, group='filter_scheduler')
    aggs = [aggregate(max_instances_per_host='5'),
            aggregate(max_instances_per_host='3')]
    hosts = [host('a', num_instances=2, aggregates=aggs),
             host('b', num_instances=3, aggregates=aggs),
             host('c', num_instances=40)]
    flt = mod.AggregateNumInstancesFilter()
    assert passing(flt, hosts, request()) == ['a', 'c']
    assert 'aggregate max_instances_per_host 3' in flt.rejection_reason(
        hosts[1], request())
