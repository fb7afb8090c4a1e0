"""The columnar path decides exactly as the per-host path.

A property test generates random fleets (sizes, usage, ratios, zones
and aggregates with ratio and weigher multiplier overrides, disabled,
forced down and stale hosts), claims made before the request, and
requests; both paths must give the same filter walk, the same hosts in
the same order with the same weights, and, with the same seed, the
same placements and alternates.  Small value ranges make ties common:
ties are where an order mistake would show.
"""

import random

from hypothesis import HealthCheck
from hypothesis import Phase
from hypothesis import event
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import numpy as np
import pytest

from scheduler import columns
from scheduler.drivers import filter_scheduler
from scheduler import exception
from scheduler import filters
from scheduler.filters import ram
from scheduler import objects
from scheduler.resources import liveness
from scheduler.weights import base as weights_base
from tests.unit import fixtures

NOW = 1_700_000_000.0

MULTIPLIER_KEYS = ['ram_weight_multiplier', 'cpu_weight_multiplier',
                   'disk_weight_multiplier', 'io_ops_weight_multiplier',
                   'build_failure_weight_multiplier', 'pci_weight_multiplier',
                   'num_instances_weight_multiplier',
                   'hypervisor_version_weight_multiplier',
                   'soft_affinity_weight_multiplier',
                   'soft_anti_affinity_weight_multiplier']
#: Options that refuse negative values.
NON_NEGATIVE = ('pci_weight_multiplier', 'soft_affinity_weight_multiplier',
                'soft_anti_affinity_weight_multiplier')
EXTRA_FILTERS = ['NumInstancesFilter', 'IoOpsFilter',
                 'ServerGroupAntiAffinityFilter', 'ServerGroupAffinityFilter']
#: Instances the hosts run, some of them members of the request's
#: server group; and the claims made before the request.
RUNNING = [fixtures.uuid(700 + n) for n in range(5)]
CLAIMED = [fixtures.uuid(900 + n) for n in range(3)]


@st.composite
def fleets(draw):
    count = draw(st.integers(1, 24))
    reports, ages = [], []
    for i in range(count):
        # Some hosts have two nodes: aggregates name hosts, not nodes.
        host = 'h%d' % (i // 2 if draw(st.booleans()) else i)
        memory = draw(st.sampled_from([2048, 4096, 8192]))
        vcpus = draw(st.sampled_from([0, 4, 8, 16]))
        disk = draw(st.sampled_from([20, 40, 80]))
        pools = [objects.PciDevicePool(
            vendor_id='8086', product_id='1520', numa_node=None, tags={},
            count=draw(st.integers(1, 3)))] if draw(st.booleans()) else []
        reports.append(fixtures.report(
            host, 'n%d' % i, memory_mb=memory, vcpus=vcpus, local_gb=disk,
            memory_mb_used=draw(st.sampled_from([0, 512, 1024, 3072])),
            vcpus_used=draw(st.integers(0, 4)),
            local_gb_used=draw(st.sampled_from([0, 5, 30])),
            disk_available_least=draw(st.sampled_from([None, None, 3, 50])),
            ram_allocation_ratio=draw(st.sampled_from([1.0, 1.5])),
            cpu_allocation_ratio=draw(st.sampled_from([1.0, 4.0])),
            disk_allocation_ratio=draw(st.sampled_from([1.0, 2.0])),
            num_instances=draw(st.integers(0, 3)),
            num_io_ops=draw(st.integers(0, 3)),
            failed_builds=draw(st.sampled_from([0, 0, 1])),
            hypervisor_version=draw(st.sampled_from([None, 1000, 2000])),
            hypervisor_type='kvm',
            supported_instances=draw(st.sampled_from(
                [[['x86_64', 'kvm', 'hvm']]] * 4
                + [[['aarch64', 'kvm', 'hvm']], []])),
            disabled=draw(st.integers(0, 9)) == 0,
            forced_down=draw(st.integers(0, 9)) == 0,
            instance_uuids=draw(st.lists(st.sampled_from(RUNNING),
                                         max_size=3, unique=True)),
            pci_pools=pools))
        ages.append(draw(st.sampled_from([0] * 6 + [30, 1000])))
    hosts = sorted({r.host for r in reports})
    aggregates = []
    for n in range(draw(st.integers(0, 3))):
        metadata = {}
        if draw(st.booleans()):
            metadata['availability_zone'] = draw(st.sampled_from(
                ['az1', 'az2']))
        for key in draw(st.lists(st.sampled_from(
                MULTIPLIER_KEYS + ['cpu_allocation_ratio',
                                   'ram_allocation_ratio',
                                   'disk_allocation_ratio']), max_size=3)):
            metadata[key] = draw(st.sampled_from(
                ['2.0', '0.5', '-1.0', '0', 'bad']))
        aggregates.append(fixtures.aggregate(
            'agg%d' % n, draw(st.lists(st.sampled_from(hosts),
                                       unique=True)), metadata))
    return reports, ages, aggregates


@st.composite
def requests(draw, hosts):
    image = draw(st.sampled_from([None, {}, {'hw_architecture': 'x86_64'},
                                  {'hw_architecture': 'x86_64',
                                   'img_hv_type': 'kvm'},
                                  {'hw_architecture': 'aarch64'}]))
    extra = draw(st.sampled_from([{}, {'capabilities:hypervisor_type':
                                       'kvm'}]))
    spec = fixtures.request(
        memory_mb=draw(st.sampled_from([256, 512, 512, 1024, 2048])),
        vcpus=draw(st.integers(1, 2)),
        root_gb=draw(st.sampled_from([0, 1, 10])),
        swap=draw(st.sampled_from([0, 512])),
        extra_specs=extra, image_properties=image,
        num_instances=draw(st.integers(1, 4)),
        availability_zone=draw(st.sampled_from([None] * 4
                                               + ['az1', 'az2', 'nova'])),
        project_id='p', user_id='u')
    ignored = draw(st.lists(st.sampled_from(hosts), max_size=2))
    if ignored:
        spec.ignore_hosts = [h.upper() for h in ignored]
    policy = draw(st.sampled_from([None, None, 'soft-affinity',
                                   'soft-anti-affinity', 'affinity',
                                   'anti-affinity']))
    if policy is not None:
        # Members running somewhere, claimed before, or nowhere; the
        # caller's hosts list, with repeats, may miss some or be stale.
        spec.instance_group = objects.InstanceGroup(
            uuid=fixtures.uuid(600), name='g', policy=policy,
            members=draw(st.lists(st.sampled_from(
                RUNNING + CLAIMED + [fixtures.uuid(1)]), max_size=5,
                unique=True)),
            hosts=draw(st.lists(st.sampled_from(hosts + ['elsewhere']),
                                max_size=4)))
    return spec


def _configure(conf, draw):
    for key in MULTIPLIER_KEYS:
        if key in NON_NEGATIVE:
            value = draw(st.sampled_from([0.0, 1.0, 2.5]))
        else:
            value = draw(st.sampled_from([-1.0, 0.0, 1.0, 2.5]))
        conf.config(**{key: value}, group='filter_scheduler')
    enabled = fixtures.CORE_FILTERS + (
        EXTRA_FILTERS if draw(st.booleans()) else [])
    conf.config(enabled_filters=enabled,
                host_subset_size=draw(st.integers(1, 3)),
                shuffle_best_same_weighed_hosts=draw(st.booleans()),
                group='filter_scheduler')
    conf.config(max_attempts=3, group='scheduler')


def _manager(reports, ages, aggregates):
    manager = fixtures.manager_with((), aggregates)
    for report, age in zip(reports, ages):
        liveness.set_clock(lambda age=age: NOW - age)
        manager.update_from_report(report)
    liveness.set_clock(lambda: NOW)
    return manager


def _walk(report):
    return [(s.name, s.hosts_in, s.hosts_out) for s in report.steps]


def _ranking(weighed):
    return [(w.obj.key(), w.weight) for w in weighed]


def _select(driver, spec, uuids, columnar, conf, seed, keep=False):
    """The request's answer and filter walk; its claims given back
    unless ``keep``."""
    conf.config(columnar=columnar, group='filter_scheduler')
    report = filters.FilterReport()
    random.seed(seed)
    try:
        result = driver.select_destinations(None, spec.obj_clone(), uuids,
                                            return_alternates=True,
                                            report=report)
        answer = [[(s.service_host, s.nodename, s.weight,
                    s.limits.obj_to_primitive() if s.limits else None)
                   for s in alts] for alts in result]
    except exception.NoValidHost:
        answer = 'NoValidHost'
    if not keep:
        # Only the nodes it claimed on change back: the others stay as
        # they were (and as decisions kept from before saw them).
        driver.host_manager.usage_db.release(uuids)
        if answer != 'NoValidHost':
            driver.host_manager.refresh_nodes(
                sorted({alts[0][:2] for alts in answer}))
    return answer, _walk(report)


@pytest.fixture(autouse=True)
def _clock():
    yield
    liveness.set_clock(None)


# No shrinking: a failure prints its example at once (CI stays short).
@settings(max_examples=120, deadline=None, derandomize=True,
          phases=[Phase.explicit, Phase.reuse, Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(fleet=fleets(), data=st.data())
def test_columnar_and_per_host_decide_alike(conf, fleet, data):
    reports, ages, aggregates = fleet
    _configure(conf, data.draw)
    manager = _manager(reports, ages, aggregates)
    driver = filter_scheduler.FilterScheduler(manager)
    # Claims made before the request, laid over the reports.
    views = manager.get_all_host_states()
    for n, index in enumerate(data.draw(st.lists(
            st.integers(0, len(views) - 1), max_size=3))):
        try:
            manager.claim(views[index], fixtures.request(memory_mb=512),
                          fixtures.uuid(900 + n))
        except exception.ClaimConflict:
            pass
    spec = data.draw(requests(sorted({r.host for r in reports})))

    # One instance, stage by stage: walk, survivors, weights.
    conf.config(columnar=True, group='filter_scheduler')
    by_host, by_column = filters.FilterReport(), filters.FilterReport()
    expected = driver.filter_and_weigh(
        spec, driver.candidate_hosts(spec), 0, by_host)
    cands = driver.column_candidates(spec, by_column)
    assert cands is not None
    got = driver.filter_and_weigh(spec, cands, 0, by_column)
    event('survivors: %s' % min(len(expected), 4))
    step = by_host.emptied_by()
    event('emptied by %s' % (step.name if step else None))
    assert _walk(by_column) == _walk(by_host)
    assert [k for k, _w in _ranking(got)] == \
        [k for k, _w in _ranking(expected)]
    np.testing.assert_allclose([w for _k, w in _ranking(got)],
                               [w for _k, w in _ranking(expected)],
                               rtol=0, atol=1e-9)

    # The whole request, claims included, with the same seed.
    uuids = [fixtures.uuid(n + 1) for n in range(spec.num_instances)]
    seed = data.draw(st.integers(0, 1000))
    per_host = _select(driver, spec, uuids, False, conf, seed)
    columnar = _select(driver, spec, uuids, True, conf, seed)
    event('placed: %s' % (per_host[0] if isinstance(per_host[0], str)
                          else len(per_host[0])))
    assert columnar == per_host


class _Bounded(weights_base.BaseHostWeigher):
    def __init__(self, minval=None, maxval=None):
        self.minval, self.maxval = minval, maxval


def test_snapshots_read_the_store_until_released_and_copy_to_change(conf):
    manager = fixtures.manager_with(
        [fixtures.report('a'), fixtures.report('b')])
    store = columns.ColumnStore()
    manager.watch_views(store)

    def used(snap):
        return snap.column('memory_mb_used')[snap.ordered].tolist()

    # Released: the next change is written in place, nothing copied.
    first = store.snapshot()
    arrays = store._arrays
    first.release()
    manager.update_from_report(fixtures.report('a', memory_mb_used=100))
    assert store._arrays is arrays
    # Held: the change waits, nothing copied; the snapshot reads what
    # it had.
    held = store.snapshot()
    manager.update_from_report(fixtures.report('a', memory_mb_used=200))
    assert store._arrays is arrays
    assert used(held) == [100, 0]
    # A new snapshot meanwhile sees the change, in copies.
    newer = store.snapshot()
    assert store._arrays is not arrays
    assert used(newer) == [200, 0]
    assert used(held) == [100, 0]
    newer.release()
    assert used(store.snapshot()) == [200, 0]
    # A snapshot changing a row (a claim between instances) changes its
    # own copy, not the store nor another snapshot.
    mine, other = store.snapshot(), store.snapshot()
    row = mine.row_of(('b', 'b'))
    view = mine.views[row].copy()
    view.memory_mb_used = 50
    mine.put(row, view)
    assert used(mine) == [200, 50]
    assert used(other) == [200, 0]
    assert used(store.snapshot()) == [200, 0]
    assert store._views[row] is not view
    # Only the columns read since are copied (with the changed row).
    assert set(mine._own) == {'memory_mb_used'}
    assert mine.arrays.data is other.arrays.data
    view = view.copy()
    view.memory_mb_used = 60
    mine.put(row, view)
    assert used(mine) == [200, 60]
    # Releasing twice, or a snapshot of an older generation, is harmless.
    for snap in (mine, other, held, other):
        snap.release()
    # Snapshots of the same arrays share their read-only views; an
    # aggregate column one of them reads is its own.
    first, second = store.snapshot(), store.snapshot()
    assert first.arrays.data is second.arrays.data
    first.release(), second.release()
    manager.update_from_report(fixtures.report('b', memory_mb_used=300))
    before = store.snapshot()
    assert used(before) == [200, 300]
    before.release()
    manager.update_from_report(fixtures.report('b', memory_mb_used=400))
    after = store.snapshot()
    assert after.arrays.data is before.arrays.data, 'written in place'
    assert used(after) == [200, 400]
    after.release()
    first.aggregate_column('cpu_weight_multiplier')
    assert 'cpu_weight_multiplier' not in second.arrays.agg
    assert 'cpu_weight_multiplier' in store.snapshot().arrays.agg
    # A new node grows the arrays: the next snapshot has its row.
    for name in 'cdefghijklmnop':
        manager.update_from_report(fixtures.report(name))
    store_rows = store.snapshot()
    assert len(used(store_rows)) == len(store) == 16


def test_changes_wait_for_the_snapshot_reading_and_keep_their_order(conf):
    manager = fixtures.manager_with([fixtures.report(h) for h in 'abc'])
    store = columns.ColumnStore()
    manager.watch_views(store)
    views = {v.host: v for v in manager.get_all_host_states()}

    def seen(snap):
        return [(snap.views[r].host, int(snap.column('memory_mb_used')[r]))
                for r in snap.ordered]

    held = store.snapshot()
    arrays = store._arrays
    # A claim or report overtaking a request: node 'a' leaves and comes
    # back, 'b' changes.  Nothing is copied; the request reads what it
    # had.
    busier = views['b'].copy()
    busier.memory_mb_used = 100
    store.view_removed(('a', 'a'))
    store.view_changed(('b', 'b'), busier)
    store.view_changed(('a', 'a'), views['a'])
    assert store._arrays is arrays
    assert seen(held) == [('a', 0), ('b', 0), ('c', 0)]
    # Released: written in place, in their order (the node that came
    # back is last, as in the HostManager's order).
    held.release()
    assert store._arrays is arrays and not store._pending
    after = store.snapshot()
    assert seen(after) == [('b', 100), ('c', 0), ('a', 0)]
    after.release()


def test_a_burst_of_changes_does_not_wait_for_the_snapshot(conf):
    manager = fixtures.manager_with([fixtures.report(h) for h in 'ab'])
    store = columns.ColumnStore()
    manager.watch_views(store)
    view = manager.get_host_state('a')
    held = store.snapshot()
    arrays = store._arrays
    for used in range(1, columns._WAIT_MIN + 2):
        changed = view.copy()
        changed.memory_mb_used = used
        store.view_changed(('a', 'a'), changed)
    # Too many to apply when the request ends: copied and written now.
    assert store._arrays is not arrays and not store._pending
    assert held.column('memory_mb_used')[held.ordered].tolist() == [0, 0]
    fresh = store.snapshot()
    assert fresh.column('memory_mb_used')[fresh.ordered].tolist() == \
        [columns._WAIT_MIN + 1, 0]
    held.release(), fresh.release()


def test_plugins_get_read_only_columns_gathered_only_when_needed(conf):
    manager = fixtures.manager_with(
        [fixtures.report(h, memory_mb=m) for h, m in
         (('a', 1024), ('b', 2048), ('c', 4096))])
    store = columns.ColumnStore()
    manager.watch_views(store)
    snap = store.snapshot()
    every = columns.Candidates(snap, snap.ordered)
    some = every.take(np.array([2, 0]))
    assert every.columns() is every.columns()
    # Every host in row order: the snapshot's column itself.
    assert every.columns().memory_mb is snap.column('memory_mb')
    assert some.columns().memory_mb.tolist() == [4096, 1024]
    for array in (every.columns().memory_mb, some.columns().memory_mb):
        with pytest.raises(ValueError):
            array[0] = 1


def test_whether_any_host_sets_a_key_is_known_until_aggregates_change(conf):
    manager = fixtures.manager_with(
        [fixtures.report('a'), fixtures.report('b')],
        [fixtures.aggregate('slow', ['b'])])
    store = columns.ColumnStore()
    manager.watch_views(store)
    key = 'ram_weight_multiplier'
    before = store.snapshot()
    assert not before.has_aggregate_values(key)
    # Reports and claims do not change aggregates: the answer is kept.
    manager.update_from_report(fixtures.report('a', memory_mb_used=100))
    manager.claim(manager.get_host_state('b'), fixtures.request(),
                  fixtures.uuid(1))
    assert store.snapshot()._has_values is before._has_values
    manager.update_aggregates([objects.Aggregate(
        name='slow', hosts=['b'], metadata={key: '-1.0'})])
    after = store.snapshot()
    assert after.has_aggregate_values(key)
    assert after.aggregate_column(key)[after.ordered].tolist()[1] == -1.0
    assert not before.has_aggregate_values(key)


def test_a_subclass_overriding_the_per_host_test_loses_the_vector_form():
    class Stricter(ram.RamFilter):
        def passes(self, host_state, requested):
            return False

    assert columns.vector_form(ram.RamFilter(), 'filter_columns',
                               columns.FILTER_METHODS) is not None
    assert columns.vector_form(Stricter(), 'filter_columns',
                               columns.FILTER_METHODS) is None


def test_store_follows_reports_removals_and_aggregates(conf):
    manager = fixtures.manager_with(
        [fixtures.report('a'), fixtures.report('b')],
        [fixtures.aggregate('fat', ['b'], {'ram_allocation_ratio': '3.0'})])
    store = columns.ColumnStore(capacity=1)
    manager.watch_views(store)
    snap = store.snapshot()
    views = [snap.views[r] for r in snap.ordered]
    assert [v.host for v in views] == ['a', 'b']
    assert snap.column('ram_ratio')[snap.ordered].tolist() == [1.0, 3.0]
    # A new report changes one row; the snapshot taken before does not.
    manager.update_from_report(fixtures.report('a', memory_mb_used=100))
    assert snap.column('memory_mb_used')[snap.ordered].tolist() == [0, 0]
    fresh = store.snapshot()
    assert fresh.column('memory_mb_used')[fresh.ordered].tolist() == \
        [100, 0]
    # An aggregate change reaches the rows of its hosts.
    manager.update_aggregates([objects.Aggregate(
        name='fat', hosts=['a', 'b'],
        metadata={'ram_allocation_ratio': '2.0'})])
    fresh = store.snapshot()
    assert fresh.column('ram_ratio')[fresh.ordered].tolist() == [2.0, 2.0]


class _RoomyFilter(filters.BaseHostFilter):
    """An out-of-tree filter with a vector form: passes hosts with room
    for the flavor's RAM (counting calls)."""

    def __init__(self):
        #: Hosts asked about, per call of the vector form.
        self.asked: list = []
        #: Hosts asked about one by one.
        self.asked_one_by_one: list = []

    def filter_columns(self, columns, spec_obj):
        self.asked.append(len(columns))
        return columns.free_ram_mb >= spec_obj.flavor.memory_mb

    def host_passes(self, host_state, spec_obj) -> bool:
        self.asked_one_by_one.append(host_state.host)
        return host_state.free_ram_mb >= spec_obj.flavor.memory_mb


class _FreeRamWeigher(weights_base.BaseHostWeigher):
    """An out-of-tree weigher with a vector form: weighs free RAM
    (counting calls)."""

    def __init__(self):
        self.asked: list = []
        self.asked_one_by_one: list = []

    def weigh_columns(self, columns, spec_obj):
        self.asked.append(len(columns))
        return columns.free_ram_mb

    def _weigh_object(self, host_state, spec_obj) -> float:
        self.asked_one_by_one.append(host_state.host)
        return host_state.free_ram_mb


def _counting(monkeypatch, cls, vector: str, per_host: str) -> tuple:
    """Count the calls of an in-tree plugin's forms, in place: the
    forms stay its class's own."""
    asked, one_by_one = [], []
    vector_method, per_host_method = getattr(cls, vector), \
        getattr(cls, per_host)

    def counted_vector(self, columns, *args):
        asked.append(len(columns))
        return vector_method(self, columns, *args)

    def counted_per_host(self, host_state, *args):
        one_by_one.append(host_state.host)
        return per_host_method(self, host_state, *args)

    monkeypatch.setattr(cls, vector, counted_vector)
    monkeypatch.setattr(cls, per_host, counted_per_host)
    return asked, one_by_one


def _place_three(conf, columnar: bool, plugins: tuple,
                 memory: tuple) -> tuple:
    conf.config(columnar=columnar, host_subset_size=1,
                group='filter_scheduler')
    manager = fixtures.manager_with(
        [fixtures.report('h%d' % i, memory_mb=m)
         for i, m in enumerate(memory)])
    driver = filter_scheduler.FilterScheduler(manager)
    driver.enabled_filters = [f for f in plugins[:2] if f is not None]
    driver.weighers = list(plugins[2:])
    report = filters.FilterReport()
    placed = driver.select_destinations(
        None, fixtures.request(memory_mb=2048, num_instances=3),
        [fixtures.uuid(n) for n in (1, 2, 3)], report=report)
    return [(s[0].service_host, s[0].weight) for s in placed], _walk(report)


def test_later_instances_ask_in_tree_plugins_only_about_the_claimed_host(
        conf, monkeypatch):
    from scheduler.weights import ram as ram_weigher
    filter_asked, filter_one_by_one = _counting(
        monkeypatch, ram.RamFilter, 'filter_columns', 'passes')
    weigher_asked, weigher_one_by_one = _counting(
        monkeypatch, ram_weigher.RAMWeigher, 'weigh_columns',
        '_weigh_object')
    # Four hosts tie for the most free RAM: a claim on one of them
    # moves neither the lowest nor the highest free RAM.
    memory = (4096, 8192, 8192, 8192, 8192)
    columnar = _place_three(conf, True, (
        ram.RamFilter(), None, ram_weigher.RAMWeigher()), memory)
    assert [host for host, _w in columnar[0]] == ['h1', 'h2', 'h3']
    # Every host by the vector form for the first instance; then only
    # the host the previous instance was placed on, by the per-host
    # form (cheaper for one host than gathering its columns).
    assert filter_asked == weigher_asked == [5]
    assert filter_one_by_one == weigher_one_by_one == ['h1', 'h2']
    assert columnar == _place_three(conf, False, (
        ram.RamFilter(), None, ram_weigher.RAMWeigher()), memory)
    for counted in (filter_asked, filter_one_by_one, weigher_asked,
                    weigher_one_by_one):
        counted.clear()
    # An out-of-tree vector form promises nothing about its answers:
    # it is asked about every host for every instance, and the
    # weighers beside it weigh every host again.
    memory = (4096, 5120, 6144, 7168, 8192)
    outside, weigh_outside = _RoomyFilter(), _FreeRamWeigher()
    columnar = _place_three(conf, True, (
        ram.RamFilter(), outside, ram_weigher.RAMWeigher(), weigh_outside),
        memory)
    # h4 has the most free RAM (8 GB), then h3 (7 GB): 2 GB claimed on
    # h4 puts h3 first, then h4 again.
    assert [host for host, _w in columnar[0]] == ['h4', 'h3', 'h4']
    assert filter_asked == [5]
    assert filter_one_by_one == ['h4', 'h3']
    assert outside.asked == weigh_outside.asked == weigher_asked == [5, 5, 5]
    assert outside.asked_one_by_one == weigh_outside.asked_one_by_one == \
        weigher_one_by_one == []
    per_host = _place_three(conf, False, (
        ram.RamFilter(), _RoomyFilter(), ram_weigher.RAMWeigher(),
        _FreeRamWeigher()), memory)
    assert columnar == per_host


class _WithEarlierInstancesFilter(filters.BaseHostFilter):
    """An out-of-tree filter whose vector form reads the hosts the
    request's earlier instances went to (as an affinity rule does), and
    whose class still says ``row_local``, which promised once that it
    did not: the attribute means nothing now."""

    row_local = True

    def filter_columns(self, columns, spec_obj):
        hosts = list(spec_obj.instance_group.hosts)
        if not hosts:
            return np.ones(len(columns), bool)
        return columns.host_counts(hosts) > 0

    def host_passes(self, host_state, spec_obj) -> bool:
        hosts = spec_obj.instance_group.hosts
        return not hosts or host_state.host in hosts


def test_an_out_of_tree_vector_form_is_asked_about_every_host_each_time(
        conf):
    # The first instance goes to h4 (the most free RAM); the filter then
    # passes h4 alone, though h3 has more free RAM after the claim.
    # Asked only about the claimed host, it would keep passing h3.
    def place(columnar):
        conf.config(columnar=columnar, host_subset_size=1,
                    group='filter_scheduler')
        manager = fixtures.manager_with(
            [fixtures.report('h%d' % i, memory_mb=4096 + 1024 * i)
             for i in range(5)])
        driver = filter_scheduler.FilterScheduler(manager)
        driver.enabled_filters = [_WithEarlierInstancesFilter()]
        driver.weighers = [_FreeRamWeigher()]
        spec = fixtures.request(
            memory_mb=2048, num_instances=3,
            instance_group=objects.InstanceGroup(
                uuid=fixtures.uuid(700), name='g', policy='affinity',
                members=[], hosts=[]))
        placed = driver.select_destinations(
            None, spec, [fixtures.uuid(n) for n in (1, 2, 3)])
        return [s[0].service_host for s in placed]

    assert place(True) == place(False) == ['h4', 'h4', 'h4']


def _place_group(conf, columnar: bool, flt, policy: str, reports: list,
                 num: int) -> list:
    conf.config(columnar=columnar, host_subset_size=1,
                group='filter_scheduler')
    driver = filter_scheduler.FilterScheduler(fixtures.manager_with(reports))
    driver.enabled_filters = [ram.RamFilter(), flt]
    from scheduler.weights import ram as ram_weigher
    driver.weighers = [ram_weigher.RAMWeigher()]
    spec = fixtures.request(
        memory_mb=2048, num_instances=num,
        instance_group=objects.InstanceGroup(
            uuid=fixtures.uuid(700), name='g', policy=policy, members=[],
            hosts=[]))
    placed = driver.select_destinations(
        None, spec, [fixtures.uuid(n) for n in range(1, num + 1)])
    return [(s[0].service_host, s[0].nodename) for s in placed]


@pytest.mark.parametrize('policy,h1b,h2,expected', [
    # h1's other node has the most free RAM after the first claim, but
    # is on the first instance's host.
    ('anti-affinity', 15360, 8192, [('h1', 'h1a'), ('h2', 'h2')]),
    # h2 has the most free RAM after the first claim, but is not the
    # first instance's host.
    ('affinity', 4096, 15360, [('h1', 'h1a'), ('h1', 'h1a')]),
])
def test_group_requests_of_several_instances_are_judged_over_columns(
        conf, monkeypatch, policy, h1b, h2, expected):
    from scheduler.filters import server_group_affinity as affinity
    from scheduler.filters import server_group_anti_affinity as anti
    cls = {'affinity': affinity.ServerGroupAffinityFilter,
           'anti-affinity': anti.ServerGroupAntiAffinityFilter}[policy]
    reports = [fixtures.report('h1', 'h1a', memory_mb=16384),
               fixtures.report('h1', 'h1b', memory_mb=h1b),
               fixtures.report('h2', memory_mb=h2),
               fixtures.report('h3', memory_mb=4096)]
    assert _place_group(conf, False, cls(), policy, reports, 2) == expected
    one_by_one = []
    passes = cls.passes

    def counted(self, host_state, prepared):
        one_by_one.append(host_state.key())
        return passes(self, host_state, prepared)

    monkeypatch.setattr(cls, 'passes', counted)
    assert _place_group(conf, True, cls(), policy, reports, 2) == expected
    assert one_by_one == []


def test_an_overcommitted_host_weighs_as_clamped_for_later_instances(conf):
    # RAM oversubscribed twice over: each instance of 1.5 GB fits on
    # every node, and leaves the node it lands on with negative free
    # RAM, which the RAM weigher (minval 0) clamps to 0 for the next
    # instances, in the stacked rows too.
    def place(columnar):
        conf.config(columnar=columnar, host_subset_size=1,
                    group='filter_scheduler')
        conf.config(max_attempts=3, group='scheduler')
        manager = fixtures.manager_with(
            [fixtures.report('h%d' % i, memory_mb=2048,
                             memory_mb_used=1200 - 100 * i,
                             ram_allocation_ratio=2.0) for i in range(3)])
        driver = filter_scheduler.FilterScheduler(manager)
        placed = driver.select_destinations(
            None, fixtures.request(memory_mb=1500, num_instances=3),
            [fixtures.uuid(n) for n in (1, 2, 3)], return_alternates=True)
        return [[(s.service_host, s.weight) for s in alts]
                for alts in placed]

    columnar = place(True)
    assert [alts[0][0] for alts in columnar] == ['h2', 'h1', 'h0']
    assert columnar == place(False)


def test_order_sorts_by_every_key_when_the_last_one_ties():
    # Later instances rank by their weights, ties broken by the earlier
    # instances' weights, then by position; one sort when nothing ties.
    rng = np.random.default_rng(0)
    for _trial in range(2000):
        n = int(rng.integers(1, 30))
        keys = [rng.integers(0, 4, n).astype(float)
                for _ in range(int(rng.integers(1, 5)))]
        if rng.random() < 0.3:
            keys[-1] = rng.standard_normal(n)
        if rng.random() < 0.1:
            keys[-1][0] = np.nan
        among = None if rng.random() < 0.5 else \
            np.flatnonzero(rng.random(n) < 0.6)
        pos = np.arange(n) if among is None else among
        expected = pos[np.lexsort(
            [pos] + [-(k if among is None else k[among]) for k in keys])]
        assert columns._order(keys, n, among).tolist() == expected.tolist()


def test_one_hosts_new_weights_give_the_full_totals_to_the_bit():
    # A later instance changes the claimed host's raw weights; when no
    # weigher's bound moves, only that host's total is computed again,
    # and every other host's is what summing every host again gives.
    rng = np.random.default_rng(3)
    fast = 0
    for _trial in range(400):
        n = int(rng.integers(2, 40))
        terms = []
        for _row in range(int(rng.integers(1, 8))):
            bounds = [None, None]
            if rng.random() < 0.3:
                bounds[int(rng.integers(0, 2))] = float(rng.integers(-2, 3))
            weigher = _Bounded(*bounds)
            # Few distinct values: ties at the bounds are common.
            raw = rng.integers(-3, 4, n).astype(float)
            if rng.random() < 0.2:
                raw[:] = 1.0
            mult = float(rng.choice([-2.0, 0.5, 1.0, 3.0])) \
                if rng.random() < 0.7 else rng.standard_normal(n)
            terms.append((weigher, mult, columns._clamped(raw, weigher)))
        totals, summed = columns._summed(terms, n)
        for _instance in range(3):
            position = int(rng.integers(0, n))
            was = {}
            for weigher, _mult, raw, _low, _high in summed:
                was[id(weigher)] = raw[position]
                if rng.random() < 0.7:
                    raw[position] = columns._clamped(
                        np.array([float(rng.integers(-4, 5))]), weigher)[0]
            total = columns._total_after(summed, position, was)
            expected, again = columns._summed([t[:3] for t in summed], n)
            if total is None:
                totals, summed = expected, again
                continue
            fast += 1
            totals = totals.copy()
            totals[position] = total
            assert totals.tobytes() == expected.tobytes()
    assert fast > 300, 'the shortcut is taken when no bound moves'


def test_a_moved_host_is_put_back_into_the_sorted_start_of_the_ranking():
    # A later instance whose claim changed one host's total only: the
    # start of the previous ranking, that host moved, is the start of
    # the new one (``_order`` over every host says what it must be).
    rng = np.random.default_rng(4)
    for _trial in range(3000):
        n = int(rng.integers(2, 30))
        keys = [rng.integers(0, 4, n).astype(float)
                for _ in range(int(rng.integers(1, 4)))]
        before = columns._order(keys, n)
        known = before[:int(rng.integers(1, n + 1))]
        moved = int(known[0]) if rng.random() < 0.7 else \
            int(rng.integers(0, n))
        last = keys[-1].copy()
        last[moved] = float(rng.integers(-1, 5))
        if rng.random() < 0.05:
            last[moved] = np.nan
        now = keys + [last]
        got = columns._moved(known, moved, now)
        if np.isnan(last[moved]):
            assert not len(got)
            continue
        expected = columns._order(now, n)
        assert got.tolist() == expected[:len(got)].tolist()
        assert len(got) >= len(known) - 1


def test_instance_counts_follow_views_snapshots_and_planned_claims(conf):
    # The soft (anti-)affinity weighers' vector form: how many of a
    # group's members each row's view lists, found through the store's
    # index, exact for the views each snapshot reads.
    a, b, c = (fixtures.uuid(n) for n in (701, 702, 703))
    manager = fixtures.manager_with(
        [fixtures.report('h1', instance_uuids=[a, b]),
         fixtures.report('h2', instance_uuids=[c])])
    store = columns.ColumnStore()
    manager.watch_views(store)
    members = frozenset({a, b, c, fixtures.uuid(704)})

    def counts(snap):
        return {snap.views[row].host: n
                for row, n in snap.instance_counts(members).items()}

    held = store.snapshot()
    assert counts(held) == {'h1': 2, 'h2': 1}
    # h1 drops b and h2 runs it now: a snapshot taken before still
    # counts what its views list, a new one what the new views list.
    manager.update_from_report(fixtures.report('h1', instance_uuids=[a]))
    manager.update_from_report(fixtures.report('h2',
                                               instance_uuids=[c, b]))
    newer = store.snapshot()
    assert counts(newer) == {'h1': 1, 'h2': 2}
    assert counts(held) == {'h1': 2, 'h2': 1}
    # A request's planned claim on its own snapshot counts at once.
    row = newer.row_of(('h1', 'h1'))
    view = newer.views[row].copy()
    view.instance_uuids = view.instance_uuids + [fixtures.uuid(704)]
    newer.put(row, view)
    assert counts(newer) == {'h1': 2, 'h2': 2}
    cols = columns.Columns(newer, newer.ordered)
    assert cols.instances_among(members).tolist() == [2, 1 + 1]
    assert cols.host_counts(['h2', 'h2', 'nowhere']).tolist() == [0, 2]
    # Entries no view lists go once no snapshot may read an old view.
    for snap in (held, newer):
        snap.release()
    store._forget_unlisted()
    assert store.instance_rows(b) == (store.row_of(('h2', 'h2')),)
    manager.update_from_report(fixtures.report('h2', instance_uuids=[]))
    store.snapshot().release()
    store._forget_unlisted()
    assert store.instance_rows(c) == () and store.instance_rows(b) == ()
    assert store.instance_rows(a) == (store.row_of(('h1', 'h1')),)


def test_server_group_weighers_weigh_over_columns(conf):
    # No per-host fallback for requests of a soft (anti-)affinity group.
    from scheduler.weights import server_group_soft_affinity as soft
    from scheduler.weights import server_group_soft_anti_affinity as anti
    a = fixtures.uuid(701)
    manager = fixtures.manager_with(
        [fixtures.report('h1', instance_uuids=[a]), fixtures.report('h2'),
         fixtures.report('h3')])
    store = columns.ColumnStore()
    manager.watch_views(store)
    snap = store.snapshot()
    cols = columns.Columns(snap, snap.ordered)
    for weigher, policy, expected in (
            (soft.ServerGroupSoftAffinityWeigher(), 'soft-affinity',
             [1, 2, 0]),
            (anti.ServerGroupSoftAntiAffinityWeigher(), 'soft-anti-affinity',
             [-1, -2, 0])):
        spec = fixtures.request(instance_group=objects.InstanceGroup(
            uuid=fixtures.uuid(600), name='g', policy=policy,
            members=[a], hosts=['h2', 'h2', 'h1']))
        raw = weigher.weigh_columns(cols, spec)
        assert isinstance(raw, np.ndarray) and raw.tolist() == expected
        assert raw.tolist() == weigher.weigh_objects(
            [weights_base.WeighedHost(v) for v in cols.views()], spec)
        assert weigher.weigh_columns(cols, fixtures.request()) == 0.0
    snap.release()
