"""VCPUFilter: free vCPUs = total x cpu_allocation_ratio - used."""

from scheduler.filters import vcpu
from tests.unit import fixtures


def _passes(host, vcpus):
    return vcpu.VCPUFilter().host_passes(host, fixtures.request(vcpus=vcpus))


def test_free_vcpus_with_the_allocation_ratio():
    host = fixtures.host('h1', vcpus=4, vcpus_used=10,
                         cpu_allocation_ratio=4.0)
    assert _passes(host, 4)      # 16 - 10 = 6 free
    assert vcpu.VCPUFilter().host_limits(host, fixtures.request()) == {
        'vcpu': 16}
    host = fixtures.host('h1', vcpus=4, vcpus_used=14,
                         cpu_allocation_ratio=4.0)
    assert not _passes(host, 3)


def test_one_instance_may_not_have_more_vcpus_than_the_host_has():
    host = fixtures.host('h1', vcpus=4, cpu_allocation_ratio=16.0)
    assert not _passes(host, 5)
    assert vcpu.VCPUFilter().rejection_reason(
        host, fixtures.request(vcpus=5)) == \
        'requested 5 vCPUs > 4 physical CPUs'


def test_a_host_that_does_not_know_its_vcpus_passes():
    assert _passes(fixtures.host('h1', vcpus=0), 64)


def test_aggregate_cpu_ratio_override():
    aggs = [fixtures.aggregate('dense', ['h1'],
                               {'cpu_allocation_ratio': '1.0'})]
    host = fixtures.host('h1', vcpus=4, vcpus_used=4,
                         cpu_allocation_ratio=16.0, aggregates=aggs)
    assert not _passes(host, 1)


def test_rejection_reason_for_a_full_host():
    host = fixtures.host('h1', vcpus=2, vcpus_used=2)
    assert vcpu.VCPUFilter().rejection_reason(
        host, fixtures.request(vcpus=1)) == \
        'free vCPUs 0 < requested 1 (total 2 x ratio 1.0, used 2)'
