"""The nova HostState and RequestSpec names the seeds' debugging aids read.

The walkthrough's DumpFilter logs these attributes of every host and of
the request; each must read the same here, on the wire object and on
the scheduler's HostView (doc/authoring-guide.md, "Nova's names").
"""

import pytest

from scheduler import host_view
from tests.unit import fixtures

#: Every attribute of a host the walkthrough's DumpFilter logs.
SEED_HOST_NAMES = (
    'host', 'nodename', 'total_usable_ram_mb', 'total_usable_disk_gb',
    'disk_mb_used', 'free_ram_mb', 'free_disk_mb', 'vcpus_total',
    'vcpus_used', 'pci_stats', 'numa_topology', 'num_instances',
    'num_io_ops', 'host_ip', 'hypervisor_type', 'hypervisor_version',
    'hypervisor_hostname', 'cpu_info', 'supported_instances', 'limits',
    'metrics', 'aggregates', 'instances', 'ram_allocation_ratio',
    'cpu_allocation_ratio', 'disk_allocation_ratio', 'updated')


def _report():
    return fixtures.report('h1', memory_mb=4096, local_gb=100, vcpus=8,
                           memory_mb_used=1024, local_gb_used=10,
                           vcpus_used=2, num_instances=1,
                           instance_uuids=[fixtures.uuid(1)])


@pytest.mark.parametrize('make', [
    lambda: host_view.HostView(_report()),
    lambda: _report().set_defaults()], ids=['HostView', 'HostState'])
def test_every_name_the_seed_dumps_reads(make):
    host = make()
    for name in SEED_HOST_NAMES:
        if name in ('limits', 'aggregates') and not hasattr(host, name):
            continue  # the scheduler's, not on the wire object
        getattr(host, name)
    assert host.disk_mb_used == 10 * 1024
    assert host.free_disk_mb == 90 * 1024
    assert host.total_usable_ram_mb == 4096
    assert host.vcpus_total == 8
    assert host.pci_stats == host.pci_pools
    assert host.updated == host.updated_at
    assert host.instances == {fixtures.uuid(1): None}


def test_the_request_shortcuts():
    spec = fixtures.request(memory_mb=2048, vcpus=4)
    assert (spec.memory_mb, spec.vcpus) == (2048, 4)
