"""NUMATopologyFilter: cells fit distinct host cells within the ratios;
claim_numa / release_numa consume and give back."""

from scheduler.filters import numa_topology as mod
from scheduler.resources import numa
from scheduler import objects
from tests.unit.filters.catalogue import aggregate
from tests.unit.filters.catalogue import host
from tests.unit.filters.catalogue import passing
from tests.unit.filters.catalogue import request


def _host(name, cells, **fields):
    topology = objects.NUMATopology(cells=[
        objects.NUMACell(id=i, cpuset=set(range(cpus)), memory=memory,
                         cpu_usage=cpu_used, memory_usage=mem_used)
        for i, (cpus, memory, cpu_used, mem_used) in enumerate(cells)])
    return host(name, numa_topology=topology, **fields)


def _spec(*cells):
    topology = objects.InstanceNUMATopology(cells=[
        objects.InstanceNUMACell(id=i, cpuset=set(range(cpus)),
                                 memory=memory)
        for i, (cpus, memory) in enumerate(cells)])
    return request(numa_topology=topology)


def test_no_instance_topology_passes_every_host():
    flt = mod.NUMATopologyFilter()
    assert flt.prepare(request()) is mod.base.SKIP
    assert passing(flt, [host('plain')], request()) == ['plain']


def test_instance_topology_needs_a_numa_host():
    flt = mod.NUMATopologyFilter()
    spec = _spec((2, 1024))
    assert passing(flt, [host('plain')], spec) == []
    assert 'no NUMA topology' in flt.rejection_reason(host('plain'), spec)


def test_each_guest_cell_in_a_distinct_host_cell():
    two_cells = _host('two', [(4, 4096, 0, 0), (4, 4096, 0, 0)])
    one_cell = _host('one', [(8, 8192, 0, 0)])
    spec = _spec((2, 1024), (2, 1024))
    assert passing(mod.NUMATopologyFilter(), [two_cells, one_cell],
                   spec) == ['two']


def test_guest_cell_larger_than_any_host_cell():
    h = _host('h', [(4, 4096, 0, 0), (4, 4096, 0, 0)])
    assert passing(mod.NUMATopologyFilter(), [h], _spec((6, 1024))) == []
    assert passing(mod.NUMATopologyFilter(), [h], _spec((2, 5000))) == []


def test_oversubscription_by_allocation_ratios():
    # 4 CPUs with 3 used: 2 more fit only with a cpu ratio >= 1.25.
    strict = _host('strict', [(4, 4096, 3, 0)])
    loose = _host('loose', [(4, 4096, 3, 0)], cpu_allocation_ratio=2.0)
    spec = _spec((2, 1024))
    flt = mod.NUMATopologyFilter()
    assert passing(flt, [strict, loose], spec) == ['loose']
    assert flt.host_limits(loose, spec)['numa_topology'] == {
        'cpu_allocation_ratio': 2.0, 'ram_allocation_ratio': 1.0}
    assert 'cell 0: 3/4 CPUs' in flt.rejection_reason(strict, spec)


def test_aggregate_ratio_override_counts():
    agg = aggregate(ram_allocation_ratio='1.5')
    h = _host('h', [(4, 4096, 0, 3072)], aggregates=[agg])
    spec = _spec((1, 2048))
    flt = mod.NUMATopologyFilter()
    assert passing(flt, [h], spec) == ['h']
    assert flt.host_limits(h, spec)['numa_topology'][
        'ram_allocation_ratio'] == 1.5


def test_matching_finds_the_fit_a_greedy_choice_misses():
    # Guest cell 0 (small) fits both host cells, guest cell 1 (big)
    # only host cell 0: a first fit giving host cell 0 to guest cell 0
    # would fail.
    h = _host('h', [(8, 8192, 0, 0), (2, 2048, 0, 0)])
    assert passing(mod.NUMATopologyFilter(), [h],
                   _spec((2, 1024), (6, 4096))) == ['h']
    assert numa.fit_cells([], [(0, 1, 1)], 1.0, 1.0) is None


def test_claim_and_release():
    h = _host('h', [(4, 4096, 0, 0), (4, 4096, 0, 0)])
    spec = _spec((4, 4096))
    flt = mod.NUMATopologyFilter()
    used = numa.claim_numa(h, spec)
    assert used == [(0, 4, 4096)]
    assert passing(flt, [h], spec) == ['h']
    second = numa.claim_numa(h, spec)
    assert second == [(1, 4, 4096)]
    assert passing(flt, [h], spec) == []
    numa.release_numa(h, used)
    assert passing(flt, [h], spec) == ['h']
    assert h.report.numa_topology.cells[0].cpu_usage == 0
    assert numa.claim_numa(h, request()) == []


def test_recorded_usage_lays_over_a_new_report():
    spec = _spec((2, 1024))
    used = numa.claim_numa(_host('h', [(4, 4096, 0, 0)]), spec)
    new = _host('h', [(4, 4096, 1, 512)])
    numa.apply_numa_usage(new, used)
    cell = new.numa_topology.cells[0]
    assert (cell.cpu_usage, cell.memory_usage) == (3, 1536)
    numa.release_numa(new, used + used)
    assert (cell.cpu_usage, cell.memory_usage) == (0, 0)
