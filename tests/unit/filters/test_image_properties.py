"""ImagePropertiesFilter: architecture, hypervisor type and version,
VM mode, as the admin guide describes them."""

import pytest

from scheduler.filters import image_properties
from tests.unit import fixtures

KVM_X86 = dict(supported_instances=[['x86_64', 'qemu', 'hvm'],
                                    ['i686', 'qemu', 'hvm']],
               hypervisor_type='QEMU', hypervisor_version=8002000)  # 8.2.0
ARM = dict(supported_instances=[['aarch64', 'qemu', 'hvm']],
           hypervisor_version=6000000)
XEN = dict(supported_instances=[['x86_64', 'xen', 'xen']])


def _passing(properties):
    hosts = fixtures.hosts(fixtures.report('kvm', **KVM_X86),
                           fixtures.report('arm', **ARM),
                           fixtures.report('xen', **XEN),
                           fixtures.report('bare'))   # reports nothing
    spec = fixtures.request(image_properties=properties)
    return [h.host for h in image_properties.ImagePropertiesFilter()
            .filter_all(hosts, spec)]


def test_an_image_without_these_properties_goes_anywhere():
    assert _passing({'os_distro': 'cirros'}) == ['kvm', 'arm', 'xen', 'bare']
    assert _passing({}) == ['kvm', 'arm', 'xen', 'bare']


def test_no_image_at_all_goes_anywhere():
    hosts = fixtures.hosts(fixtures.report('bare'))
    assert image_properties.ImagePropertiesFilter().filter_all(
        hosts, fixtures.request()) == hosts


def test_architecture():
    assert _passing({'hw_architecture': 'x86_64'}) == ['kvm', 'xen']
    assert _passing({'hw_architecture': 'aarch64'}) == ['arm']
    # The pre-Liberty name still works.
    assert _passing({'architecture': 'i686'}) == ['kvm']


def test_architecture_and_hypervisor_type_together():
    # The admin guide's example: --architecture arm --property img_hv_type=qemu
    assert _passing({'hw_architecture': 'aarch64',
                     'img_hv_type': 'qemu'}) == ['arm']
    assert _passing({'hw_architecture': 'x86_64',
                     'img_hv_type': 'xen'}) == ['xen']
    assert _passing({'hypervisor_type': 'qemu'}) == ['kvm', 'arm']


def test_vm_mode_and_its_old_aliases():
    assert _passing({'hw_vm_mode': 'xen'}) == ['xen']
    assert _passing({'vm_mode': 'hv'}) == ['kvm', 'arm']   # hv means hvm
    assert _passing({'hw_vm_mode': 'exe'}) == []


@pytest.mark.parametrize('requirement, expected', [
    ('>= 6.0.0', ['kvm', 'arm']),
    ('>= 8.2.0', ['kvm']),
    ('>= 9.0.0', []),
    ('8.2.0', ['kvm']),            # no operator: this exact version
    ('<= 7.0.0', ['arm']),
    # Two-part versions mean x.y.0, as the hosts' versions are x.y.z.
    ('>= 8.1', ['kvm']),
    ('>= 9.0', []),
    ('8.2', ['kvm']),
    # Written without a space, as in the admin guide (">=6000").
    ('>=8.0', ['kvm']),
    ('<=7.0', ['arm']),
])
def test_requested_hypervisor_version(requirement, expected):
    assert _passing({'img_hv_requested_version': requirement}) == expected


def test_an_unreadable_version_matches_no_host():
    assert _passing({'img_hv_requested_version': 'latest'}) == []


def test_rejection_reasons():
    flt = image_properties.ImagePropertiesFilter()
    bare = fixtures.host('bare')
    arm = fixtures.host('arm', **ARM)
    spec = fixtures.request(image_properties={'hw_architecture': 'x86_64'})
    assert flt.rejection_reason(bare, spec) == \
        'reports no supported instance types'
    assert 'not architecture=x86_64' in flt.rejection_reason(arm, spec)


def test_runs_once_per_request():
    assert not image_properties.ImagePropertiesFilter() \
        .run_filter_for_index(1)
