"""ComputeCapabilitiesFilter: flavor extra specs against what hosts report.

Keys scoped ``capabilities:`` (or not scoped at all) name a host
attribute; other scopes belong to other filters and are ignored.  The
value may start with an operator (see test_extra_specs_ops).
"""

import pytest

from scheduler.filters import compute_capabilities
from tests.unit import fixtures

HOST = dict(memory_mb=8192, memory_mb_used=2048, local_gb=100,
            vcpus=48, vcpus_used=8, num_instances=3, num_io_ops=2,
            hypervisor_type='QEMU', hypervisor_version=1005003,
            cpu_info={'arch': 'x86_64', 'vendor': 'Intel',
                      'features': 'aes,mmx,sse2',
                      'topology.cores': '8'})


def _passes(extra_specs, host='compute-01', **report):
    values = dict(HOST, **report)
    state = fixtures.host(host, **values)
    return compute_capabilities.ComputeCapabilitiesFilter().host_passes(
        state, fixtures.request(extra_specs=extra_specs))


def test_no_extra_specs_every_host_passes():
    assert _passes({})


@pytest.mark.parametrize('key, requirement', [
    # The admin guide's list of useful keys, with its example values.
    ('capabilities:free_ram_mb', '>= 4096'),
    ('capabilities:free_disk_mb', '>= 10240'),
    ('capabilities:host', '<in> compute'),
    ('capabilities:host', 's== compute-01'),
    ('capabilities:hypervisor_type', 's== QEMU'),
    ('capabilities:hypervisor_version', '>= 1005003'),
    ('capabilities:hypervisor_version', '== 1005003'),
    ('capabilities:num_instances', '<= 10'),
    ('capabilities:num_io_ops', '<= 5'),
    ('capabilities:vcpus_total', '= 48'),
    ('capabilities:vcpus_total', '>= 24'),
    ('capabilities:vcpus_used', '<= 10'),
    # cpu_info, nested and flattened with dots.
    ('capabilities:cpu_info:arch', 'x86_64'),
    ('capabilities:cpu_info:vendor', '<or> AMD <or> Intel'),
    ('capabilities:cpu_info:features', '<all-in> aes mmx'),
    ('capabilities:cpu_info:topology:cores', '>= 8'),
    # Unscoped keys are matched too (discouraged, but supported).
    ('hypervisor_type', 'QEMU'),
])
def test_the_admin_guides_capabilities_are_met(key, requirement):
    assert _passes({key: requirement})


@pytest.mark.parametrize('key, requirement', [
    ('capabilities:free_ram_mb', '>= 8192'),
    ('capabilities:host', '<in> gpu'),
    ('capabilities:hypervisor_type', 's== ironic'),
    ('capabilities:num_instances', '<= 2'),
    ('capabilities:vcpus_total', '= 64'),
    ('capabilities:cpu_info:features', '<all-in> aes avx512'),
    ('capabilities:cpu_info:vendor', '<or> AMD <or> ARM'),
    ('capabilities:cpu_info:topology:cores', '>= 16'),
    # A capability the host does not report never matches.
    ('capabilities:gpus', '>= 1'),
    ('capabilities:cpu_info:flags', '<in> x'),
    ('capabilities:_private', 'x'),
])
def test_unmet_capabilities_reject_the_host(key, requirement):
    assert not _passes({key: requirement})


def test_other_scopes_are_left_to_other_filters():
    assert _passes({'aggregate_instance_extra_specs:CPU': 'Trove',
                    'hw:cpu_policy': 'dedicated',
                    'quota:disk_read_bytes_sec': '10240000'})


def test_every_spec_must_hold():
    assert _passes({'capabilities:hypervisor_type': 's== QEMU',
                    'capabilities:vcpus_total': '>= 24'})
    assert not _passes({'capabilities:hypervisor_type': 's== QEMU',
                        'capabilities:vcpus_total': '>= 96'})


def test_rejection_reason_names_the_spec_and_the_host_value():
    state = fixtures.host('compute-01', **HOST)
    spec = fixtures.request(
        extra_specs={'capabilities:hypervisor_type': 's== xen'})
    assert compute_capabilities.ComputeCapabilitiesFilter().rejection_reason(
        state, spec) == \
        "extra spec capabilities:hypervisor_type='s== xen' not met " \
        "(host has 'QEMU')"


def test_runs_once_per_request():
    assert not compute_capabilities.ComputeCapabilitiesFilter() \
        .run_filter_for_index(1)


def test_an_unscoped_key_the_host_does_not_know_is_ignored_as_in_nova():
    # trust=trusted is for another filter: no host is rejected for it.
    assert _passes({'trust': 'trusted'})
    assert _passes({'trust:trusted_host': 'trusted'})
    # An unscoped key naming a host attribute is still checked.
    assert not _passes({'hypervisor_type': 'xen'})


def test_keys_resolve_against_stats():
    stats = {'num_os_type_windows': '3', 'io_workload': '1'}
    assert _passes({'capabilities:num_os_type_windows': '>= 2'},
                   stats=stats)
    assert not _passes({'capabilities:num_os_type_windows': '>= 4'},
                       stats=stats)
    # Unscoped: checked only because the host's stats have the key.
    assert not _passes({'io_workload': '== 0'}, stats=stats)
    assert _passes({'io_workload': '== 0'})
    # Scoped and absent everywhere: the host cannot satisfy it.
    assert not _passes({'capabilities:num_os_type_windows': '>= 1'})


def test_host_attributes_win_over_stats():
    assert _passes({'capabilities:vcpus_total': '= 48'},
                   stats={'vcpus_total': '1'})


def test_only_host_values_are_reachable():
    # Not an attribute the filter may read: looked up in stats only.
    assert not _passes({'capabilities:report': 's== x'})
    assert not _passes({'capabilities:aggregates': 's== []'})


def test_maxphysaddr_bits_needs_as_many_host_bits():
    cpu = dict(HOST['cpu_info'], **{'maxphysaddr.mode': 'emulate',
                                    'maxphysaddr.bits': '46'})
    assert _passes({'hw:maxphysaddr_bits': '42'}, cpu_info=cpu)
    assert _passes({'hw:maxphysaddr_bits': '46'}, cpu_info=cpu)
    assert not _passes({'hw:maxphysaddr_bits': '48'}, cpu_info=cpu)
    # A host that does not say how many bits it has cannot promise them.
    assert not _passes({'hw:maxphysaddr_bits': '42'})
