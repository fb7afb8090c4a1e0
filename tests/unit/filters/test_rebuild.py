"""A rebuild on the instance's own host: only image filters run (nova).

nova marks the rebuild check with the scheduler hint
``_nova_check_type=rebuild``; filters without ``RUN_ON_REBUILD`` pass
the host unexamined, since the instance keeps its resources there.
"""

import pytest

from scheduler import filters
from scheduler.filters import base
from tests.unit import fixtures

REBUILD = {'_nova_check_type': ['rebuild']}


def _full_host():
    return fixtures.host('h1', memory_mb=1024, memory_mb_used=1024,
                         local_gb=10, local_gb_used=10, vcpus=2,
                         vcpus_used=2, num_instances=50, num_io_ops=20,
                         supported_instances=[['x86_64', 'qemu', 'hvm']])


def _run(names, spec):
    by_name = {cls.__name__: cls for cls in filters.all_filters()}
    return filters.HostFilterHandler().get_filtered_objects(
        [by_name[n]() for n in names], [_full_host()], spec)


RESOURCE_AND_TOPOLOGY = ['RamFilter', 'DiskFilter', 'VCPUFilter',
                         'NumInstancesFilter', 'IoOpsFilter',
                         'NUMATopologyFilter', 'PciPassthroughFilter',
                         'ComputeCapabilitiesFilter']


def test_request_is_rebuild_reads_nova_hint():
    assert base.request_is_rebuild(fixtures.request(scheduler_hints=REBUILD))
    assert not base.request_is_rebuild(fixtures.request())
    assert not base.request_is_rebuild(fixtures.request(
        scheduler_hints={'_nova_check_type': ['resize']}))


@pytest.mark.parametrize('name', RESOURCE_AND_TOPOLOGY)
def test_filters_nova_skips_on_rebuild_pass_the_full_host(name):
    spec = fixtures.request(memory_mb=512, root_gb=5, vcpus=1,
                            extra_specs={'capabilities:host': 's== other'})
    assert _run([name], spec) == [] or name in (
        'NUMATopologyFilter', 'PciPassthroughFilter')
    spec.scheduler_hints = REBUILD
    assert [h.host for h in _run([name], spec)] == ['h1']


@pytest.mark.parametrize('name', ['ImagePropertiesFilter',
                                  'IsolatedHostsFilter',
                                  'AggregateImagePropertiesIsolation'])
def test_image_filters_still_run_on_rebuild(name):
    by_name = {cls.__name__: cls for cls in filters.all_filters()}
    assert by_name[name].run_on_rebuild


def test_a_new_image_the_host_cannot_run_fails_the_rebuild():
    spec = fixtures.request(image_properties={'hw_architecture': 'aarch64'},
                            scheduler_hints=REBUILD)
    assert _run(['RamFilter', 'ImagePropertiesFilter'], spec) == []
