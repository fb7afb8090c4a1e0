"""AggregateInstanceExtraSpecsFilter over columns: one answer per
distinct set of aggregates, the same as host by host."""

import gc
from unittest import mock
import weakref

import pytest

from scheduler import columns as columns_mod
from scheduler import host_view
from scheduler import objects
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


def test_the_distinct_lists_are_found_without_walking_every_view():
    # At 10,000 hosts a walk of every view, to tell their lists of
    # aggregates apart, cost more than judging the few lists: the
    # candidates' aggregate_set column tells them apart instead.
    flt = mod.AggregateInstanceExtraSpecsFilter()
    spec = fixtures.request(extra_specs={SCOPED + 'cores': '>= 8'})
    hosts = _hosts()
    columns = plugin_testing.host_columns(hosts)
    with mock.patch.object(type(columns), 'views',
                           side_effect=AssertionError('walked every view')):
        mask = flt.filter_columns(columns, flt.prepare(spec))
    assert [h.host for h, ok in zip(hosts, mask) if ok] == ['f1', 'both']


def test_a_host_whose_aggregates_change_is_judged_by_its_new_ones():
    flt = mod.AggregateInstanceExtraSpecsFilter()
    spec = fixtures.request(extra_specs={SCOPED + 'disk_type': 'ssd'})
    hosts = _hosts()
    loose = hosts[6]
    store = columns_mod.ColumnStore(capacity=len(hosts))
    for host in hosts:
        store.view_changed(host.key(), host)
    moved = loose.successor()
    moved.set_aggregates(list(hosts[0].aggregates))
    store.view_changed(moved.key(), moved)
    snapshot = store.snapshot()
    try:
        columns = columns_mod.Columns(snapshot, snapshot.ordered)
        mask = flt.filter_columns(columns, flt.prepare(spec))
        passed = [v.host for v, ok in zip(columns.views(), mask) if ok]
    finally:
        snapshot.release()
    assert sorted(passed) == ['both', 'f1', 'loose', 's1', 's2']


def test_the_store_keeps_no_aggregate_alive_that_no_view_holds(monkeypatch):
    # An operator growing a large aggregate one host at a time replaces
    # it each time: a store that kept every old one (with its list of
    # hosts) for as long as the service runs would only grow.
    monkeypatch.setattr(host_view, '_ATTACHED', {})
    old = objects.Aggregate.from_row(
        fixtures.aggregate('old', ['h1'], metadata={'disk_type': 'ssd'}))
    view = fixtures.host('h1').successor()
    view.set_aggregates([old])
    store = columns_mod.ColumnStore(capacity=1)
    store.view_changed(view.key(), view)
    moved = view.successor()
    moved.set_aggregates([objects.Aggregate.from_row(
        fixtures.aggregate('new', ['h1']))])
    store.view_changed(moved.key(), moved)
    gone = weakref.ref(old)
    del old, view
    host_view._ATTACHED.clear()
    gc.collect()
    assert gone() is None
