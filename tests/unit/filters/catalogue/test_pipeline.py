"""The catalogue in the real filter scheduler: several instances of one
request, typed errors, and every filter and weigher at once."""

import itertools

import pytest

from scheduler.drivers import filter_scheduler
from scheduler import exception
from scheduler import filters
from scheduler import objects
from tests.unit import fixtures


def _driver(*names, weighers=('RAMWeigher',), reports=None, conf=None):
    conf.config(enabled_filters=fixtures.CORE_FILTERS + list(names),
                weight_classes=list(weighers), group='filter_scheduler')
    reports = reports or [fixtures.report('h%d' % i, memory_mb=4096 * i)
                          for i in (1, 2, 3)]
    return filter_scheduler.FilterScheduler(fixtures.manager_with(reports))


def _group(policy, members, hosts=(), **rules):
    return objects.InstanceGroup(uuid=None, name='g', policy=policy,
                                 rules={k: str(v) for k, v in rules.items()},
                                 members=list(members), hosts=list(hosts))


_NEXT_UUID = itertools.count(1)


def _place(driver, spec, count):
    """Place ``count`` new instances (never the uuids of an earlier call,
    which would be an idempotent retry)."""
    uuids = [fixtures.uuid(next(_NEXT_UUID)) for _ in range(count)]
    return [alts[0].service_host
            for alts in driver.select_destinations(None, spec, uuids)]


def test_anti_affinity_spreads_the_instances_of_one_request(conf):
    uuids = [fixtures.uuid(n) for n in (1, 2, 3)]
    driver = _driver('ServerGroupAntiAffinityFilter', conf=conf)
    spec = fixtures.request(num_instances=3,
                            instance_group=_group('anti-affinity', uuids))
    assert sorted(_place(driver, spec, 3)) == ['h1', 'h2', 'h3']


def test_anti_affinity_without_room_releases_every_claim(conf):
    uuids = [fixtures.uuid(n) for n in (1, 2, 3, 4)]
    driver = _driver('ServerGroupAntiAffinityFilter', conf=conf)
    spec = fixtures.request(num_instances=4,
                            instance_group=_group('anti-affinity', uuids))
    with pytest.raises(exception.NoValidHost):
        _place(driver, spec, 4)
    assert all(not h.instance_uuids
               for h in driver.host_manager.get_all_host_states())


def test_anti_affinity_max_server_per_host(conf):
    uuids = [fixtures.uuid(n) for n in range(1, 7)]
    driver = _driver('ServerGroupAntiAffinityFilter', conf=conf)
    spec = fixtures.request(num_instances=6, instance_group=_group(
        'anti-affinity', uuids, max_server_per_host=2))
    placed = _place(driver, spec, 6)
    assert {h: placed.count(h) for h in placed} == {'h1': 2, 'h2': 2,
                                                    'h3': 2}


def test_affinity_keeps_the_instances_together(conf):
    driver = _driver('ServerGroupAffinityFilter', conf=conf)
    spec = fixtures.request(num_instances=3, instance_group=_group(
        'affinity', [fixtures.uuid(n) for n in (1, 2, 3)]))
    assert _place(driver, spec, 3) == ['h3', 'h3', 'h3']


def test_soft_anti_affinity_weigher_spreads(conf):
    driver = _driver(weighers=('ServerGroupSoftAntiAffinityWeigher',),
                     conf=conf)
    spec = fixtures.request(num_instances=3, instance_group=_group(
        'soft-anti-affinity', [fixtures.uuid(n) for n in (1, 2, 3)]))
    assert sorted(_place(driver, spec, 3)) == ['h1', 'h2', 'h3']


def test_bad_json_query_is_an_invalid_request(conf):
    driver = _driver('JsonFilter', conf=conf)
    spec = fixtures.request(scheduler_hints={'query': ['["=", "$report"']})
    with pytest.raises(exception.InvalidRequest):
        _place(driver, spec, 1)


def test_every_filter_and_weigher_at_once(conf):
    names = [cls.__name__ for cls in filters.all_filters()]
    conf.config(weight_setting=['cpu.frequency=1.0'], group='metrics')
    reports = [fixtures.report('h%d' % i, memory_mb=4096 * i,
                               metrics={'cpu.frequency': 1000.0 * i})
               for i in (1, 2, 3)]
    driver = _driver(*names, weighers=('scheduler.weights.all_weighers',),
                     reports=reports, conf=conf)
    spec = fixtures.request(num_instances=2, project_id='p')
    placed = _place(driver, spec, 2)
    # Best metrics and most free resources first; the first instance's
    # I/O operation then tips IoOpsWeigher towards another host.
    assert placed == ['h3', 'h2']


def _pci_request(count=1):
    return [objects.InstancePCIRequest(
        count=count, spec=[{'vendor_id': '8086', 'product_id': '1520'}],
        alias_name='nic')]


def _pci_pool(count):
    return [objects.PciDevicePool(vendor_id='8086', product_id='1520',
                                  numa_node=None, tags={}, count=count)]


def test_pci_devices_are_consumed_by_each_instance_of_a_request(conf):
    reports = [fixtures.report('h1', pci_pools=_pci_pool(1)),
               fixtures.report('h2', pci_pools=_pci_pool(1)),
               fixtures.report('h3')]
    driver = _driver('PciPassthroughFilter', reports=reports, conf=conf)

    placed = _place(driver, fixtures.request(num_instances=2,
                                             pci_requests=_pci_request()), 2)

    assert sorted(placed) == ['h1', 'h2'], 'one device each, none on h3'
    with pytest.raises(exception.NoValidHost):
        _place(driver, fixtures.request(pci_requests=_pci_request()), 1)


def test_a_pci_claim_survives_a_report_sent_before_the_build(conf):
    reports = [fixtures.report('h1', pci_pools=_pci_pool(1))]
    driver = _driver('PciPassthroughFilter', reports=reports, conf=conf)
    _place(driver, fixtures.request(pci_requests=_pci_request()), 1)

    # The compute reports again without the instance (still building).
    driver.host_manager.update_from_report(
        fixtures.report('h1', pci_pools=_pci_pool(1)))

    with pytest.raises(exception.NoValidHost):
        _place(driver, fixtures.request(pci_requests=_pci_request()), 1)


def test_numa_cells_are_consumed_by_each_instance_of_a_request(conf):
    topology = objects.NUMATopology(cells=[
        objects.NUMACell(id=0, cpuset={0, 1}, memory=2048, cpu_usage=0,
                         memory_usage=0)])
    reports = [fixtures.report('h1', numa_topology=topology,
                               cpu_allocation_ratio=1.0,
                               ram_allocation_ratio=1.0)]
    driver = _driver('NUMATopologyFilter', reports=reports, conf=conf)
    wants = objects.InstanceNUMATopology(cells=[
        objects.InstanceNUMACell(id=0, cpuset={0, 1}, memory=1024)])

    _place(driver, fixtures.request(numa_topology=wants), 1)

    with pytest.raises(exception.NoValidHost):
        _place(driver, fixtures.request(numa_topology=wants), 1)
