"""The production-shaped benchmark's fleet and request generators
(tools/bench/mixed_workload.py): seeded, deterministic, and as varied as
the benchmark says.  The benchmark itself is not run here."""

import collections
import importlib.util
import os

import pytest

from scheduler import objects
from scheduler.simulator import fleet as fleet_mod

_PATH = os.path.join(os.path.dirname(__file__), '..', '..', 'tools',
                     'bench', 'mixed_workload.py')


@pytest.fixture(scope='module')
def mix():
    spec = importlib.util.spec_from_file_location('mixed_workload', _PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_fleet_is_a_valid_fleet_file_of_varied_hosts(mix):
    document = mix.fleet_document(1000)
    assert document == mix.fleet_document(1000)
    fleet = fleet_mod.parse(document)
    assert len(fleet.hosts) == 1000
    types = {h.name.rsplit('-', 1)[0] for h in fleet.hosts}
    assert len(types) >= 5
    assert len({(h.memory_mb, h.vcpus, h.architecture)
                for h in fleet.hosts}) >= 5
    zones = {fleet.availability_zone(h.name) for h in fleet.hosts}
    assert len(zones) >= 2 and None not in zones
    aggregates = fleet.aggregates()
    with_metadata = [a for a in aggregates
                     if set(a.metadata) - {'availability_zone'}]
    assert len(with_metadata) >= 3
    assert all(a.hosts for a in aggregates)


def test_prefill_leaves_some_hosts_near_full_and_is_seeded(mix):
    fleet = mix.fleet(1000)
    made = mix.prefill(fleet, 7)
    assert made == mix.prefill(fleet, 7)
    assert made != mix.prefill(fleet, 8)
    sizes = {h.name: h for h in fleet.hosts}
    assert 50 <= len(made) < 500
    for host, memory_mb, vcpus, disk_gb in made:
        assert 0.8 * sizes[host].memory_mb <= memory_mb \
            <= sizes[host].memory_mb
        assert vcpus <= sizes[host].vcpus
        assert disk_gb <= sizes[host].local_gb
    assert len({h.split('-')[0] for h, *_ in made}) >= 2


def test_request_mix_is_seeded_and_deterministic(mix):
    assert mix.RequestMix(3).draws(500) == mix.RequestMix(3).draws(500)
    assert mix.RequestMix(3).draws(500) != mix.RequestMix(4).draws(500)
    one, two = mix.MixState(3), mix.MixState(3)
    assert one.new_uuids(5) == two.new_uuids(5)


def test_request_mix_has_the_promised_variety_and_skew(mix):
    draws = mix.RequestMix(25).draws(5000)
    flavors = collections.Counter(d.flavor.name for d in draws)
    projects = collections.Counter(d.project for d in draws)
    assert len(flavors) >= 20
    assert len(projects) >= 200
    # Skewed: the busiest project and flavor far above the typical one.
    typical = sorted(projects.values())[len(projects) // 2]
    assert projects.most_common(1)[0][1] >= 10 * typical
    assert flavors.most_common(1)[0][1] >= 5 * min(flavors.values())
    assert {d.zone for d in draws} >= {None, 'az1', 'az2', 'az3'}
    assert {d.kind for d in draws} == {None, 'group', 'different_host',
                                       'same_host'}
    assert len({d.instances for d in draws}) >= 3
    assert any(d.flavor.extra_specs for d in draws)
    assert forced_count(mix) == {10}


def forced_count(mix) -> set:
    return {d.instances for d in mix.RequestMix(1, instances=10).draws(50)}


def test_specs_carry_images_hints_and_server_groups(mix):
    draws = mix.RequestMix(25).draws(3000)
    state = mix.MixState(25)
    specs = []
    for n, draw in enumerate(draws):
        uuids = state.new_uuids(draw.instances)
        spec = state.spec(draw, uuids)
        spec.obj_to_primitive()     # it goes over the bus as it is
        specs.append(spec)
        state.placed(draw, uuids, ['host-%d' % (n % 50)] * len(uuids))
    assert all(isinstance(s, objects.RequestSpec) for s in specs)
    arches = {s.image.properties.get('hw_architecture')
              for s in specs if s.image is not None}
    assert {'x86_64', 'aarch64'} <= arches
    assert any(s.is_bfv for s in specs)
    policies = {s.instance_group.policy for s in specs
                if s.instance_group is not None}
    assert {'anti-affinity', 'affinity', 'soft-anti-affinity'} <= policies
    assert any(s.instance_group is not None and s.instance_group.hosts
               for s in specs)
    hints = {k for s in specs for k in (s.scheduler_hints or {})}
    assert hints == {'different_host', 'same_host'}
    grown = max(len(s.instance_group.members) for s in specs
                if s.instance_group is not None)
    assert 1 < grown <= mix.GROUP_MAX_MEMBERS + 10


@pytest.fixture(scope='module')
def bench():
    path = os.path.join(os.path.dirname(_PATH), 'bench_mixed.py')
    spec = importlib.util.spec_from_file_location('bench_mixed', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_in_process_fleet_keeps_no_report_per_host(mix, bench):
    """The in-process bench shares its process with the scheduler whose
    RSS it prints: its fleet keeps the hosts' descriptions and what was
    built on them, and makes each report as it sends it."""
    spec = mix.fleet(60)
    computes = bench.InProcessFleet(spec, 25)
    held = []
    for value in vars(computes).values():
        if isinstance(value, dict):
            value = list(value.values())
        held += value if isinstance(value, list) else [value]
    assert not any(isinstance(value, objects.HostState) for value in held)
    host = spec.hosts[7]
    before = computes.state(7)
    assert before.host == host.name
    request = objects.RequestSpec(is_bfv=False, flavor=objects.Flavor(
        memory_mb=512, vcpus=2, root_gb=10, extra_specs={}))
    computes.built(request, ['u-1', 'u-2'], [host.name, host.name])
    after = computes.state(7)
    assert after.memory_mb_used == before.memory_mb_used + 1024
    assert after.vcpus_used == before.vcpus_used + 4
    assert after.local_gb_used == before.local_gb_used + 20
    assert after.num_instances == before.num_instances + 2
    assert after.instance_uuids == before.instance_uuids + ['u-1', 'u-2']
    if before.disk_available_least is not None:
        assert after.disk_available_least == \
            before.disk_available_least - 20
