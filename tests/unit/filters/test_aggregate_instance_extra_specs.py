"""AggregateInstanceExtraSpecsFilter over columns: one answer per
distinct set of aggregates, the same as host by host."""

from unittest import mock

import pytest

from scheduler.filters import aggregate_instance_extra_specs as mod
from scheduler import plugin_testing
from tests.unit import fixtures

SCOPED = 'aggregate_instance_extra_specs:'
AGGS = [fixtures.aggregate('ssd', ['s1', 's2', 'both'],
                           metadata={'disk_type': 'ssd'}),
        fixtures.aggregate('fast', ['f1', 'both'],
                           metadata={'disk_type': 'nvme, ssd',
                                     'cores': '16'}),
        fixtures.aggregate('plain', ['p1', 'p2'], metadata={'cores': '4'})]


def _hosts():
    names = ['s1', 's2', 'f1', 'both', 'p1', 'p2', 'loose', 'loose2']
    return fixtures.hosts(*[fixtures.report(n) for n in names],
                          aggregates=AGGS)


@pytest.mark.parametrize('extra_specs', [
    {SCOPED + 'disk_type': 'ssd'},
    {SCOPED + 'disk_type': 'nvme'},
    {SCOPED + 'cores': '>= 8'},
    {'cores': '<or> 4 <or> 16', SCOPED + 'disk_type': 'ssd'},
    {SCOPED + 'disk_type': 'ssd', 'hw:cpu_policy': 'dedicated'},
    {SCOPED + 'gpu': 'true'},
])
def test_columns_agree_with_host_by_host(extra_specs):
    spec = fixtures.request(extra_specs=extra_specs)
    plugin_testing.check_filter(mod.AggregateInstanceExtraSpecsFilter(),
                                _hosts(), spec)


def test_each_set_of_aggregates_is_judged_once():
    # Host by host it was the costliest filter of a request whose
    # flavor names an aggregate key: every host tested every spec.
    flt = mod.AggregateInstanceExtraSpecsFilter()
    spec = fixtures.request(extra_specs={SCOPED + 'disk_type': 'ssd'})
    hosts = _hosts()
    columns = plugin_testing.host_columns(hosts)
    with mock.patch.object(mod.AggregateInstanceExtraSpecsFilter, '_failed',
                           wraps=flt._failed) as failed:
        mask = flt.filter_columns(columns, flt.prepare(spec))
    assert [h.host for h, ok in zip(hosts, mask) if ok] == \
        ['s1', 's2', 'f1', 'both']
    # ssd / fast / ssd+fast / plain / none: five distinct sets.
    assert failed.call_count == len({id(h.aggregates) for h in hosts}) == 5
