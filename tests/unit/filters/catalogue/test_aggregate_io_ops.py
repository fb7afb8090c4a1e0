"""AggregateIoOpsFilter: per-aggregate limit, smallest wins, option
fallback."""

from scheduler.filters import aggregate_io_ops as mod
from tests.unit.filters.catalogue import aggregate
from tests.unit.filters.catalogue import host
from tests.unit.filters.catalogue import passing
from tests.unit.filters.catalogue import request


def test_falls_back_to_the_option(conf):
    conf.config(max_io_ops_per_host=4, group='filter_scheduler')
    hosts = [host('idle', num_io_ops=3), host('busy', num_io_ops=4)]
    flt = mod.AggregateIoOpsFilter()
    assert passing(flt, hosts, request()) == ['idle']
    assert '[filter_scheduler] max_io_ops_per_host 4' in \
        flt.rejection_reason(hosts[1], request())


def test_aggregate_value_overrides_the_option(conf):
    conf.config(max_io_ops_per_host=4, group='filter_scheduler')
    agg = aggregate(max_io_ops_per_host='10')
    hosts = [host('h', num_io_ops=6, aggregates=[agg])]
    assert passing(mod.AggregateIoOpsFilter(), hosts, request()) == ['h']


def test_smallest_aggregate_value_wins():
    aggs = [aggregate(max_io_ops_per_host='10'),
            aggregate(max_io_ops_per_host='3')]
    hosts = [host('h', num_io_ops=3, aggregates=aggs)]
    flt = mod.AggregateIoOpsFilter()
    assert passing(flt, hosts, request()) == []
    assert 'aggregate max_io_ops_per_host 3' in flt.rejection_reason(
        hosts[0], request())


def test_bad_aggregate_value_is_ignored(conf):
    conf.config(max_io_ops_per_host=8, group='filter_scheduler')
    hosts = [host('h', num_io_ops=5,
                  aggregates=[aggregate(max_io_ops_per_host='lots')])]
    assert passing(mod.AggregateIoOpsFilter(), hosts, request()) == ['h']


def test_runs_for_every_instance():
    assert not mod.AggregateIoOpsFilter.run_filter_once_per_request
