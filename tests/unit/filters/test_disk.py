"""DiskFilter: root + ephemeral + swap must fit in total x ratio - used."""

from scheduler.filters import disk
from scheduler.resources import compute
from tests.unit import fixtures


def _passes(host, **flavor):
    return disk.DiskFilter().host_passes(host, fixtures.request(**flavor))


def test_root_ephemeral_and_swap_all_count():
    host = fixtures.host('h1', local_gb=20, local_gb_used=5)
    # 10 + 4 GB + 1024 MB swap = 15 GB: exactly what is free.
    assert _passes(host, root_gb=10, ephemeral_gb=4, swap=1024)
    assert not _passes(host, root_gb=10, ephemeral_gb=4, swap=1025)


def test_boot_from_volume_needs_no_root_disk_here():
    host = fixtures.host('h1', local_gb=5)
    assert not _passes(host, root_gb=20)
    assert _passes(host, root_gb=20, is_bfv=True)


def test_allocation_ratio_and_limit():
    host = fixtures.host('h1', local_gb=100, local_gb_used=100,
                         disk_allocation_ratio=2.0)
    assert _passes(host, root_gb=100)
    assert disk.DiskFilter().host_limits(host, fixtures.request()) == {
        'disk_gb': 200}
    assert not _passes(host, root_gb=101)


def test_one_instance_never_overcommits_against_itself():
    # nova's guard: larger than the whole disk is refused at any ratio.
    host = fixtures.host('h1', local_gb=100, disk_allocation_ratio=10.0)
    assert _passes(host, root_gb=100)
    assert not _passes(host, root_gb=101)
    assert disk.DiskFilter().rejection_reason(
        host, fixtures.request(root_gb=101)) == (
        'requested 103424 MB disk > 100 GB physical disk (no overcommit '
        'against itself)')


def test_disk_available_least_caps_free_disk_as_in_nova():
    # The totals say 60 GB free; the hypervisor measures 20 GB.
    host = fixtures.host('h1', local_gb=100, local_gb_used=40,
                         disk_available_least=20)
    assert host.free_disk_mb == 20 * 1024
    assert _passes(host, root_gb=20)
    assert not _passes(host, root_gb=21)
    assert disk.DiskFilter().rejection_reason(
        host, fixtures.request(root_gb=21)).endswith(
        'free 20 GB, disk_available_least 20 GB)')
    # Larger than the totals' free disk: the totals win.
    roomy = fixtures.host('h2', local_gb=100, local_gb_used=40,
                          disk_available_least=90)
    assert roomy.free_disk_mb == 60 * 1024


def test_claims_shrink_disk_available_least_too():
    host = fixtures.host('h1', local_gb=100, disk_available_least=20)
    host.apply_claim(0, 0, 5)
    assert host.free_disk_mb == 15 * 1024
    host.apply_claim(0, 0, 5, sign=-1)
    assert host.free_disk_mb == 20 * 1024


def test_aggregate_disk_ratio_override():
    aggs = [fixtures.aggregate('thin', ['h1'],
                               {'disk_allocation_ratio': '3.0'})]
    host = fixtures.host('h1', local_gb=10, local_gb_used=10,
                         aggregates=aggs)
    assert _passes(host, root_gb=10)
    assert not _passes(fixtures.host('h1', local_gb=10, local_gb_used=21,
                                     aggregates=aggs), root_gb=10)


def test_rejection_reason():
    host = fixtures.host('h1', local_gb=10, local_gb_used=8)
    assert disk.DiskFilter().rejection_reason(
        host, fixtures.request(root_gb=5)) == (
        'usable disk 2048 MB < requested 5120 MB (total 10 GB x ratio 1.0, '
        'free 2 GB)')


def test_requested_disk_mb():
    assert compute.requested_disk_mb(fixtures.request(
        root_gb=1, ephemeral_gb=1, swap=512)) == 2560
