"""The filter scheduler: filter, weigh, pick, claim - one instance at a time.

Every test builds a small fleet of reports, asks for placements and
checks where the instances went.  Randomness only enters through
``host_subset_size``; tests that use it seed ``random``.
"""

import random
import threading

import pytest

from scheduler.db import usage
from scheduler.drivers import filter_scheduler
from scheduler import exception
from scheduler import filters
from scheduler import objects
from tests.unit import fixtures

FLEET = [fixtures.report('small', memory_mb=2048, vcpus=4, local_gb=40),
         fixtures.report('mid', memory_mb=4096, vcpus=8, local_gb=80),
         fixtures.report('big', memory_mb=8192, vcpus=16, local_gb=160)]


def _fleet():
    return [r.obj_clone() for r in FLEET]


@pytest.fixture
def spread(conf):
    """RAM decides alone: the host with the most free RAM wins."""
    conf.config(weight_classes=['RAMWeigher'], ram_weight_multiplier=1.0,
                enabled_filters=fixtures.CORE_FILTERS,
                group='filter_scheduler')


def _driver(reports=None, aggregates=()):
    manager = fixtures.manager_with(
        _fleet() if reports is None else reports, aggregates)
    return filter_scheduler.FilterScheduler(manager)


def _place(driver, spec, uuids=None, alternates=False, context=None):
    return driver.select_destinations(context, spec, uuids,
                                      return_alternates=alternates)


def _hosts(selections):
    return [alts[0].service_host for alts in selections]


# --- placement ---------------------------------------------------------------

def test_one_instance_goes_to_the_best_host(spread):
    selections = _place(_driver(), fixtures.request(memory_mb=1024))
    assert len(selections) == 1 and len(selections[0]) == 1
    chosen = selections[0][0]
    assert isinstance(chosen, objects.Selection)
    assert (chosen.service_host, chosen.nodename) == ('big', 'big')
    assert chosen.weight == 1.0
    # The limits the resource filters computed, for the compute.
    assert chosen.limits.memory_mb == 8192
    assert chosen.limits.vcpu == 16
    assert chosen.limits.disk_gb == 160


def test_the_chosen_host_is_claimed(spread):
    driver = _driver()
    _place(driver, fixtures.request(memory_mb=1024), [fixtures.uuid(1)])
    big = driver.host_manager.get_host_state('big')
    assert big.free_ram_mb == 7168
    assert fixtures.uuid(1) in big.instance_uuids
    assert _place(driver, fixtures.request(memory_mb=1024))[0][0] \
        .instance_uuid is None


def test_stacking_with_a_negative_multiplier(conf, spread):
    conf.config(ram_weight_multiplier=-1.0, group='filter_scheduler')
    assert _hosts(_place(_driver(), fixtures.request(memory_mb=1024))) == \
        ['small']


def test_filters_remove_hosts_before_weighing(spread):
    # Only 'small' reports the hypervisor the flavor asks for.
    reports = _fleet()
    reports[0].hypervisor_type = 'ironic'
    spec = fixtures.request(
        extra_specs={'capabilities:hypervisor_type': 's== ironic'})
    assert _hosts(_place(_driver(reports), spec)) == ['small']


def test_each_instance_consumes_resources_before_the_next(spread):
    # 3 x 3 GB: 'big' (8 GB) takes two, then 'mid' (4 GB) is best.
    driver = _driver()
    uuids = [fixtures.uuid(n) for n in (1, 2, 3)]
    selections = _place(driver, fixtures.request(memory_mb=3072,
                                                 num_instances=3), uuids)
    assert _hosts(selections) == ['big', 'big', 'mid']
    assert [alts[0].instance_uuid for alts in selections] == uuids
    assert driver.host_manager.get_host_state('big').free_ram_mb == 2048
    assert driver.host_manager.get_host_state('mid').free_ram_mb == 1024


def test_uuid_count_must_match_num_instances(spread):
    with pytest.raises(exception.InvalidRequest):
        _place(_driver(), fixtures.request(num_instances=2),
               [fixtures.uuid(1)])


def test_host_subset_size_picks_among_the_best(conf, spread):
    conf.config(host_subset_size=2, group='filter_scheduler')
    random.seed(1)
    picked = {_hosts(_place(_driver(), fixtures.request()))[0]
              for _ in range(30)}
    # The two best hosts, never the worst.
    assert picked == {'big', 'mid'}


def test_host_subset_size_larger_than_the_fleet(conf, spread):
    conf.config(host_subset_size=50, group='filter_scheduler')
    random.seed(2)
    picked = {_hosts(_place(_driver(), fixtures.request()))[0]
              for _ in range(40)}
    assert picked == {'big', 'mid', 'small'}


# --- alternates --------------------------------------------------------------

def test_alternates_are_distinct_hosts_max_attempts_minus_one(conf, spread):
    conf.config(max_attempts=3, group='scheduler')
    reports = _fleet() + [fixtures.report('big', 'big-node2',
                                          memory_mb=8192)]
    selections = _place(_driver(reports), fixtures.request(),
                        [fixtures.uuid(1)], alternates=True)
    alts = selections[0]
    assert len(alts) == 3
    hosts = [s.service_host for s in alts]
    assert hosts[0] == 'big'
    assert len(set(hosts)) == 3      # the second 'big' node is no alternate
    assert all(s.instance_uuid == fixtures.uuid(1) for s in alts)
    # Best first.
    assert [s.weight for s in alts] == sorted((s.weight for s in alts),
                                              reverse=True)


def test_fewer_alternates_when_fewer_hosts_fit(conf, spread):
    conf.config(max_attempts=5, group='scheduler')
    selections = _place(_driver(), fixtures.request(memory_mb=3000),
                        alternates=True)
    assert [s.service_host for s in selections[0]] == ['big', 'mid']


def test_no_alternates_unless_asked(conf, spread):
    conf.config(max_attempts=3, group='scheduler')
    assert len(_place(_driver(), fixtures.request())[0]) == 1


def test_max_attempts_one_means_no_alternates(conf, spread):
    conf.config(max_attempts=1, group='scheduler')
    assert len(_place(_driver(), fixtures.request(), alternates=True)[0]) \
        == 1


# --- no valid host -----------------------------------------------------------

def test_no_valid_host_releases_the_earlier_claims(spread):
    # 2 x 6 GB: the first fits on 'big', the second nowhere.
    driver = _driver()
    before = {s.host: s.free_ram_mb
              for s in driver.host_manager.get_all_host_states()}
    with pytest.raises(exception.NoValidHost) as info:
        _place(driver, fixtures.request(memory_mb=6144, num_instances=2),
               [fixtures.uuid(1), fixtures.uuid(2)])
    assert '(instance 2 of 2)' in str(info.value)
    after = {s.host: s.free_ram_mb
             for s in driver.host_manager.get_all_host_states()}
    assert after == before
    assert fixtures.uuid(1) not in \
        driver.host_manager.get_host_state('big').instance_uuids
    assert driver.host_manager.placements(
        [fixtures.uuid(1), fixtures.uuid(2)]) == {}


def test_admins_see_the_filter_walk_in_no_valid_host(spread):
    from scheduler import context
    with pytest.raises(exception.NoValidHost) as info:
        _place(_driver(), fixtures.request(memory_mb=1 << 20),
               context=context.get_admin_context())
    assert 'RamFilter: 3 -> 0' in str(info.value)
    with pytest.raises(exception.NoValidHost) as info:
        _place(_driver(), fixtures.request(memory_mb=1 << 20),
               context=context.RequestContext(is_admin=False))
    assert 'RamFilter' not in str(info.value)


def test_no_hosts_at_all(spread):
    with pytest.raises(exception.NoValidHost):
        _place(_driver([]), fixtures.request())


def test_a_detailed_report_explains_the_rejections(spread):
    report = filters.FilterReport(detailed=True)
    with pytest.raises(exception.NoValidHost):
        _driver().select_destinations(None, fixtures.request(vcpus=32),
                                      None, report=report)
    step = report.emptied_by()
    assert step.name == 'VCPUFilter'
    assert step.rejected['big/big'] == 'requested 32 vCPUs > 16 physical CPUs'


# --- narrowing before the filters --------------------------------------------

def test_ignore_hosts(spread):
    spec = fixtures.request(ignore_hosts=['big'])
    assert _hosts(_place(_driver(), spec)) == ['mid']


def test_forced_host_skips_the_filters(spread):
    # 'small' has 2 GB: RamFilter would reject a 4 GB instance.
    spec = fixtures.request(memory_mb=4096, force_hosts=['small'])
    assert _hosts(_place(_driver(), spec)) == ['small']


def test_forced_node(spread):
    reports = _fleet() + [fixtures.report('big', 'big-node2',
                                          memory_mb=1024)]
    spec = fixtures.request(memory_mb=4096, force_nodes=['big-node2'])
    selections = _place(_driver(reports), spec)
    assert (selections[0][0].service_host, selections[0][0].nodename) == \
        ('big', 'big-node2')


def test_a_forced_rebuild_still_runs_the_image_filters(spread):
    # nova's compute API sends a rebuild with a new image with the
    # instance's host forced and _nova_check_type=rebuild: the filters
    # that run on a rebuild still check that host.
    reports = _fleet()
    for report in reports:
        report.supported_instances = [['x86_64', 'qemu', 'hvm']]
    rebuild = {'_nova_check_type': ['rebuild']}
    spec = fixtures.request(
        memory_mb=4096, force_hosts=['small'], scheduler_hints=rebuild,
        image_properties={'hw_architecture': 'aarch64'})
    with pytest.raises(exception.NoValidHost):
        _place(_driver(reports), spec)
    # An image the host runs passes; RamFilter does not run on a
    # rebuild (4 GB on 'small' of 2 GB) and sets no limit.
    spec.image = fixtures.request(
        image_properties={'hw_architecture': 'x86_64'}).image
    [[chosen]] = _place(_driver(reports), spec)
    assert chosen.service_host == 'small'
    assert chosen.limits.obj_get('memory_mb') is None


def test_a_rebuild_where_the_instance_runs_claims_nothing(spread):
    # nova's rebuild check asks for no resources: the instance keeps
    # what it holds. Claimed again, it counted twice on its host until
    # the next report, and a resize right after was refused as being
    # placed (InstanceAlreadyPlaced).
    driver = _driver()
    uuid = fixtures.uuid(1)
    [[built]] = _place(driver, fixtures.request(memory_mb=1024), [uuid])
    listed = next(r for r in _fleet() if r.host == built.service_host)
    listed.instance_uuids = [uuid]
    listed.memory_mb_used = 1024
    driver.host_manager.update_from_report(listed)
    driver.host_manager.flush()
    runs = driver.host_manager.placements([uuid])[uuid]
    assert not runs['pending']

    rebuild = fixtures.request(
        memory_mb=1024, force_hosts=[built.service_host],
        scheduler_hints={'_nova_check_type': ['rebuild']},
        instance_uuid=uuid)
    [[again]] = _place(driver, rebuild, [uuid])
    assert again.service_host == built.service_host
    assert driver.host_manager.placements([uuid])[uuid] == runs

    resize = fixtures.request(memory_mb=2048)
    [[moved]] = _place(driver, resize, [uuid])
    assert driver.host_manager.placements([uuid])[uuid]['memory_mb'] == 2048


def test_node_names_are_forced_exactly(spread):
    reports = _fleet() + [fixtures.report('big', 'big-node2',
                                          memory_mb=1024)]
    spec = fixtures.request(force_nodes=['BIG-NODE2'])
    with pytest.raises(exception.NoValidHost):
        _place(_driver(reports), spec)


def test_forced_host_must_still_be_up(spread):
    reports = _fleet()
    reports[0].disabled = True
    with pytest.raises(exception.NoValidHost):
        _place(_driver(reports), fixtures.request(force_hosts=['small']))


def test_forcing_an_unknown_host_finds_nothing(spread):
    with pytest.raises(exception.NoValidHost):
        _place(_driver(), fixtures.request(force_hosts=['nowhere']))


def test_requested_destination_host_and_node(spread):
    reports = _fleet() + [fixtures.report('big', 'big-node2',
                                          memory_mb=1024)]
    spec = fixtures.request(requested_destination=objects.Destination(
        host='mid', node=None, aggregates=None))
    assert _hosts(_place(_driver(reports), spec)) == ['mid']
    spec = fixtures.request(requested_destination=objects.Destination(
        host='big', node='big-node2', aggregates=None))
    assert _place(_driver(reports), spec)[0][0].nodename == 'big-node2'


def test_requested_destination_still_runs_the_filters(spread):
    spec = fixtures.request(memory_mb=4096,
                            requested_destination=objects.Destination(
                                host='small', node=None, aggregates=None))
    with pytest.raises(exception.NoValidHost):
        _place(_driver(), spec)


def test_requested_destination_aggregates(spread):
    aggs = [fixtures.aggregate('ssd', ['small', 'mid']),
            fixtures.aggregate('gpu', ['small'])]
    dest = objects.Destination(host=None, node=None, aggregates=['ssd'])
    assert _hosts(_place(_driver(aggregates=aggs),
                         fixtures.request(requested_destination=dest))) == \
        ['mid']
    # Each entry must hold; an entry is a comma list of alternatives.
    dest = objects.Destination(host=None, node=None,
                               aggregates=['ssd', 'gpu,other'])
    assert _hosts(_place(_driver(aggregates=aggs),
                         fixtures.request(requested_destination=dest))) == \
        ['small']


def test_availability_zone_request(spread):
    aggs = [fixtures.aggregate('rack', ['small'], zone='az1')]
    spec = fixtures.request(availability_zone='az1')
    selections = _place(_driver(aggregates=aggs), spec)
    assert _hosts(selections) == ['small']
    assert selections[0][0].availability_zone == 'az1'


# --- server groups -----------------------------------------------------------

def test_group_hosts_grow_with_each_placed_instance(spread):
    group = objects.InstanceGroup(uuid=fixtures.uuid(900), name='web',
                                  policy='anti-affinity', rules={},
                                  members=[], hosts=['elsewhere'])
    spec = fixtures.request(memory_mb=3072, num_instances=2,
                            instance_group=group)
    _place(_driver(), spec, [fixtures.uuid(1), fixtures.uuid(2)])
    assert group.hosts == ['elsewhere', 'big', 'big']


def test_group_hosts_of_the_driver_come_from_members():
    driver = _driver([fixtures.report('h1', instance_uuids=[fixtures.uuid(1)]),
                      fixtures.report('h2')])
    group = objects.InstanceGroup(uuid=None, name=None, policy='affinity',
                                  rules={}, members=[fixtures.uuid(1)],
                                  hosts=['h9'])
    assert driver.group_hosts(None, group) == ['h1', 'h9']


def test_an_affinity_member_follows_a_group_another_worker_started(conf):
    # Another worker placed the group's first member on mid while this
    # one's request (group hosts still empty) was on its way: RAM picks
    # big, the claim is refused there, and the next try goes to mid.
    conf.config(weight_classes=['RAMWeigher'], ram_weight_multiplier=1.0,
                enabled_filters=fixtures.CORE_FILTERS
                + ['ServerGroupAffinityFilter'], group='filter_scheduler')
    driver = _driver()
    usage.claim_many([usage.ClaimRequest(fixtures.uuid(1), 'mid', 'mid',
                                         512, 1, 1)])
    members = [fixtures.uuid(1), fixtures.uuid(2)]
    group = objects.InstanceGroup(uuid=fixtures.uuid(900), name='web',
                                  policy='affinity', rules={},
                                  members=members, hosts=[])
    spec = fixtures.request(instance_group=group)
    assert _hosts(_place(driver, spec, [fixtures.uuid(2)])) == ['mid']


# --- configuration -----------------------------------------------------------

def test_unknown_enabled_filter_is_named(conf):
    conf.config(enabled_filters=['RamFilter', 'NoSuchFilter'],
                group='filter_scheduler')
    with pytest.raises(exception.SchedulerHostFilterNotFound) as info:
        _driver()
    assert 'NoSuchFilter' in str(info.value)


def test_unknown_weigher_is_named(conf):
    conf.config(weight_classes=['NoSuchWeigher'], group='filter_scheduler')
    with pytest.raises(exception.SchedulerWeigherNotFound) as info:
        _driver()
    assert 'NoSuchWeigher' in str(info.value)


def test_reset_applies_new_filters_and_multipliers(conf, spread):
    driver = _driver()
    assert _hosts(_place(driver, fixtures.request(memory_mb=3072,
                                                  force_hosts=None))) == \
        ['big']
    # The operator drops RamFilter and turns spreading into stacking.
    conf.config(enabled_filters=['ComputeFilter'],
                ram_weight_multiplier=-1.0, group='filter_scheduler')
    driver.reset()
    assert [f.name() for f in driver.enabled_filters] == ['ComputeFilter']
    # Stacking now: 'small' (2 GB free) is chosen, no RamFilter to stop it.
    assert _hosts(_place(driver, fixtures.request(memory_mb=3072))) == \
        ['small']


def test_a_bad_reset_keeps_the_running_pipeline(conf, spread):
    driver = _driver()
    running = list(driver.enabled_filters)
    conf.config(enabled_filters=['Nope'], group='filter_scheduler')
    with pytest.raises(exception.SchedulerHostFilterNotFound):
        driver.reset()
    assert driver.enabled_filters == running
    assert _hosts(_place(driver, fixtures.request())) == ['big']


def test_a_reload_swaps_filters_and_weighers_in_one_assignment(
        conf, spread, monkeypatch):
    # Under native threads a request may read the pipeline between any
    # two attribute writes of ``reset``: every pair it can see must be
    # the old one or the new one, never new filters with old weighers.
    driver = _driver()
    old = (list(driver.enabled_filters), list(driver.weighers))
    seen = []
    cls = type(driver)

    def watching(self, name, value):
        object.__setattr__(self, name, value)
        if self is driver:
            seen.append(([f.name() for f in self.enabled_filters],
                         [w.name() for w in self.weighers]))

    monkeypatch.setattr(cls, '__setattr__', watching, raising=False)
    conf.config(enabled_filters=['ComputeFilter'],
                weight_classes=['scheduler.weights.cpu.CPUWeigher'],
                group='filter_scheduler')
    driver.reset()
    monkeypatch.undo()
    new = ([f.name() for f in driver.enabled_filters],
           [w.name() for w in driver.weighers])
    assert new == (['ComputeFilter'], ['CPUWeigher'])
    before = ([f.name() for f in old[0]], [w.name() for w in old[1]])
    assert before != new and before[1] != new[1]
    assert seen and all(pair in (before, new) for pair in seen), seen


@pytest.mark.parametrize('columnar', [True, False])
def test_filter_and_weigh_runs_one_pipeline_across_a_reload(
        conf, spread, monkeypatch, columnar):
    # A caller that passes no filters and weighers (tools, out-of-tree
    # drivers) gets those of one pipeline even if a reload lands while
    # the call reads them.
    conf.config(columnar=columnar, group='filter_scheduler')
    driver = _driver()
    old = driver.pipeline
    new = filter_scheduler.Pipeline(list(old.filters), list(old.weighers))
    spec = fixtures.request(memory_mb=1024)
    hosts = (driver.column_candidates(spec, filters.FilterReport())
             if columnar else driver.candidate_hosts(spec))
    used = {}
    real_columns = filter_scheduler.columns.filter_and_weigh

    def columns_run(hosts, spec_obj, index, report, enabled, weighers):
        used.update(filters=enabled, weighers=weighers)
        return real_columns(hosts, spec_obj, index, report, enabled,
                            weighers)

    def filtered(enabled, *args):
        used['filters'] = enabled
        return list(args[0])

    def weighed(weighers, *args, **kwargs):
        used['weighers'] = weighers
        return []

    monkeypatch.setattr(filter_scheduler.columns, 'filter_and_weigh',
                        columns_run)
    monkeypatch.setattr(driver.filter_handler, 'get_filtered_objects',
                        filtered)
    monkeypatch.setattr(driver.weight_handler, 'get_weighed_objects',
                        weighed)

    def reading(self, name):
        value = object.__getattribute__(self, name)
        if name == 'pipeline' and self is driver:
            # A reload lands right after each read.
            object.__setattr__(self, 'pipeline', new)
        return value

    monkeypatch.setattr(type(driver), '__getattribute__', reading,
                        raising=False)
    driver.filter_and_weigh(spec, hosts)
    monkeypatch.undo()
    assert used['filters'] is old.filters
    assert used['weighers'] is old.weighers


def test_schedule_run_instance_casts_to_the_chosen_hosts(spread):
    driver = _driver()
    casts = []

    class Compute:
        def run_instance(self, context, host, node, instance_uuid, spec_obj,
                         limits=None):
            casts.append((host, node, instance_uuid, spec_obj.num_instances))

    driver.compute_rpcapi = Compute()
    driver.schedule_run_instance(
        None, fixtures.request(memory_mb=6144, num_instances=3),
        [fixtures.uuid(1), fixtures.uuid(2), fixtures.uuid(3)])
    # One instance at a time; the third fits nowhere and is only logged.
    assert casts == [('big', 'big', fixtures.uuid(1), 1)]


def test_shuffle_best_same_weighed_hosts_spreads_identical_hosts(conf):
    conf.config(enabled_filters=fixtures.CORE_FILTERS,
                weight_classes=['RAMWeigher'],
                shuffle_best_same_weighed_hosts=True, host_subset_size=1,
                group='filter_scheduler')
    reports = [fixtures.report('h%d' % i, memory_mb=65536) for i in range(4)]
    random.seed(7)
    chosen = set()
    for n in range(12):
        driver = filter_scheduler.FilterScheduler(
            fixtures.manager_with(reports))
        [[selection]] = driver.select_destinations(
            None, fixtures.request(), [fixtures.uuid(n)])
        chosen.add(selection.service_host)
    assert len(chosen) > 1, 'tied hosts are shuffled, not always the first'


def test_without_shuffle_identical_hosts_keep_their_order(conf):
    conf.config(enabled_filters=fixtures.CORE_FILTERS,
                weight_classes=['RAMWeigher'], host_subset_size=1,
                group='filter_scheduler')
    reports = [fixtures.report('h%d' % i, memory_mb=65536) for i in range(4)]
    chosen = {filter_scheduler.FilterScheduler(fixtures.manager_with(reports))
              .select_destinations(None, fixtures.request(),
                                   [fixtures.uuid(n)])[0][0].service_host
              for n in range(6)}
    assert len(chosen) == 1


# --- claims against other workers --------------------------------------------

def _other_worker(driver):
    """A second worker on the same inventory, with the same reports."""
    from scheduler import host_manager
    other = host_manager.HostManager(inventory=driver.host_manager.db)
    for state in driver.host_manager.get_all_host_states():
        other.update_from_report(state.report)
    return filter_scheduler.FilterScheduler(other)


def test_a_node_filled_by_another_worker_is_not_chosen(spread):
    driver = _driver()
    other = _other_worker(driver)
    # The other worker fills 'big' (8 GB) completely.
    _place(other, fixtures.request(memory_mb=8192),
           [fixtures.uuid(50)])
    # This worker sees that before it chooses: 'mid' is the best now.
    assert _hosts(_place(driver, fixtures.request(memory_mb=1024),
                         [fixtures.uuid(1)])) == ['mid']


def test_a_lost_claim_race_goes_to_the_next_best_host(spread, monkeypatch):
    driver = _driver()
    other = _other_worker(driver)
    # The race: this worker refreshed its cache before the other worker
    # filled 'big', and chooses from the stale view.
    monkeypatch.setattr(driver.host_manager, 'refresh_usage', lambda: 0)
    _place(other, fixtures.request(memory_mb=8192), [fixtures.uuid(50)])
    selections = _place(driver, fixtures.request(memory_mb=1024),
                        [fixtures.uuid(1)])
    assert _hosts(selections) == ['mid']
    assert driver.host_manager.placements([fixtures.uuid(1)])[
        fixtures.uuid(1)]['host'] == 'mid'
    # The lost race refreshed 'big': the cache shows it full now.
    assert driver.host_manager.get_host_state('big').free_ram_mb == 0


def test_claim_attempts_bound_the_retries(spread, conf, monkeypatch):
    conf.config(claim_attempts=1, group='scheduler')
    driver = _driver()
    other = _other_worker(driver)
    monkeypatch.setattr(driver.host_manager, 'refresh_usage', lambda: 0)
    _place(other, fixtures.request(memory_mb=8192), [fixtures.uuid(50)])
    with pytest.raises(exception.NoValidHost):
        _place(driver, fixtures.request(memory_mb=1024), [fixtures.uuid(1)])


def test_the_same_uuids_again_get_the_same_placements(spread):
    driver = _driver()
    uuids = [fixtures.uuid(1), fixtures.uuid(2)]
    first = _hosts(_place(driver, fixtures.request(memory_mb=1024,
                                                   num_instances=2), uuids))
    again = _place(driver, fixtures.request(memory_mb=1024, num_instances=2),
                   uuids, alternates=True)
    assert _hosts(again) == first
    assert again[0][0].limits.memory_mb == 8192
    free = {s.host: s.free_ram_mb
            for s in driver.host_manager.get_all_host_states()}
    assert sum(8192 if h == 'big' else 4096 if h == 'mid' else 2048
               for h in free) - sum(free.values()) == 2048, 'claimed once'


def test_a_retry_on_a_worker_that_never_heard_of_the_node_keeps_it(spread):
    driver = _driver()
    first = _place(driver, fixtures.request(memory_mb=1024),
                   [fixtures.uuid(1)])
    # Another worker on the same inventory, which has had no report of
    # that node yet (the retry reached it first).
    from scheduler import host_manager
    other = host_manager.HostManager(inventory=driver.host_manager.db)
    for state in driver.host_manager.get_all_host_states():
        if state.host != first[0][0].service_host:
            other.update_from_report(state.report)
    again = _place(filter_scheduler.FilterScheduler(other),
                   fixtures.request(memory_mb=1024), [fixtures.uuid(1)],
                   alternates=True)
    assert _hosts(again) == _hosts(first)
    assert again[0][0].limits.to_dict() == {}


def test_a_pending_instance_asked_for_with_another_flavor_is_refused(spread):
    driver = _driver()
    _place(driver, fixtures.request(memory_mb=1024), [fixtures.uuid(1)])
    with pytest.raises(exception.InstanceAlreadyPlaced):
        _place(driver, fixtures.request(memory_mb=2048), [fixtures.uuid(1)])


def test_a_reschedule_away_from_the_failed_host_replaces_the_claim(spread):
    driver = _driver()
    assert _hosts(_place(driver, fixtures.request(memory_mb=1024),
                         [fixtures.uuid(1)])) == ['big']
    retry = objects.SchedulerRetry(num_attempts=2, hosts=[['big', 'big']])
    spec = fixtures.request(memory_mb=1024, ignore_hosts=['big'])
    spec.retry = retry
    assert _hosts(_place(driver, spec, [fixtures.uuid(1)])) == ['mid']
    assert driver.host_manager.get_host_state('big').free_ram_mb == 8192


def test_limits_written_by_a_plugin_stay_in_their_request(spread):
    class NovaStyleFilter(filters.BaseHostFilter):
        """Writes limits the nova way, onto the host state."""

        def host_passes(self, host_state, spec_obj):
            host_state.limits['memory_mb'] = 12345
            return True

    driver = _driver()
    enabled = driver.enabled_filters
    driver.enabled_filters = [NovaStyleFilter()]
    first = _place(driver, fixtures.request(memory_mb=1024),
                   [fixtures.uuid(1)])
    assert first[0][0].limits.memory_mb == 12345
    # The next request, without that filter, carries none of it.
    driver.enabled_filters = enabled
    second = _place(driver, fixtures.request(memory_mb=1024),
                    [fixtures.uuid(2)])
    assert second[0][0].limits.memory_mb == 8192
    assert driver.host_manager.get_host_state('big').limits == {}


def test_limits_answered_by_a_plugin_reach_the_selection(spread):
    class CappedRam(filters.BaseHostFilter):
        """Passes every host and caps its RAM for the compute."""

        def host_passes(self, host_state, spec_obj):
            return True

        def host_limits(self, host_state, spec_obj):
            return {'memory_mb': 2048}

    class CappedAlike(CappedRam):
        """Answers host_limits through an attribute of the instance."""

    alike = CappedAlike()
    alike.host_limits = lambda host_state, spec_obj: {'vcpu': 3}
    driver = _driver()
    driver.enabled_filters = [CappedRam(), alike]
    placed = _place(driver, fixtures.request(memory_mb=1024),
                    [fixtures.uuid(1)])
    assert placed[0][0].limits.memory_mb == 2048
    assert placed[0][0].limits.vcpu == 3


class _WaitingFilter(filters.BaseHostFilter):
    """Passes every host, after waiting for ``go`` (once per walk)."""

    def __init__(self):
        self.walks = 0
        self.entered = threading.Event()
        self.go = threading.Event()

    def filter_all(self, host_states, spec_obj):
        self.walks += 1
        self.entered.set()
        assert self.go.wait(10)
        return list(host_states)


@pytest.mark.parametrize('at_once', [1, 2])
def test_requests_choose_one_at_a_time_unless_configured(
        spread, conf, tmp_path, at_once):
    conf.config(max_concurrent_decisions=at_once, group='filter_scheduler')
    driver = filter_scheduler.FilterScheduler(fixtures.manager_with(
        _fleet(), url='sqlite:///%s' % (tmp_path / 'inventory.sqlite')))
    waiting = _WaitingFilter()
    driver.enabled_filters = [waiting]
    answers = []

    def place(n):
        answers.append(_place(driver, fixtures.request(memory_mb=512),
                              [fixtures.uuid(n)]))

    first = threading.Thread(target=place, args=(1,))
    first.start()
    assert waiting.entered.wait(10)
    second = threading.Thread(target=place, args=(2,))
    second.start()
    # The second request waits for the first to choose (a filter that
    # waits on I/O lets it in when more may choose at once).
    second.join(0.3)
    assert waiting.walks == at_once
    waiting.go.set()
    first.join(10), second.join(10)
    assert waiting.walks == 2 and len(answers) == 2


def test_forced_and_ignored_hosts_match_in_any_case(conf):
    # nova lower-cases both sides (host_manager._strip_ignore_hosts,
    # _match_forced_hosts); the driver goes through scheduler.pipeline.
    driver = filter_scheduler.FilterScheduler(fixtures.manager_with(
        [fixtures.report('Compute1'), fixtures.report('compute2')], []))
    [[chosen]] = driver.select_destinations(
        None, fixtures.request(ignore_hosts=['COMPUTE1']), None)
    assert chosen.service_host == 'compute2'
    [[chosen]] = driver.select_destinations(
        None, fixtures.request(force_hosts=['compute1']), None)
    assert chosen.service_host == 'Compute1'


def test_explain_ranks_with_each_weighers_raw_and_normalised_value(conf):
    conf.config(weight_classes=['RAMWeigher'], group='filter_scheduler')
    driver = filter_scheduler.FilterScheduler(fixtures.manager_with(
        [fixtures.report('big', memory_mb=8192),
         fixtures.report('small', memory_mb=2048)], []))
    ranking = driver.explain(None, fixtures.request())['ranking']
    assert [r['host'] for r in ranking] == ['big', 'small']
    assert ranking[1]['weighers']['RAMWeigher'] == {
        'raw': 2048, 'normalized': 0.25, 'multiplier': 1.0,
        'contribution': 0.25}
    assert ranking[1]['contributions'] == {'RAMWeigher': 0.25}
