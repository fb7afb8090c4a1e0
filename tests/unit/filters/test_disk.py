"""DiskFilter: root + ephemeral + swap must fit in total x ratio - used."""

from scheduler.filters import disk
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
    host = fixtures.host('h1', local_gb=100, disk_allocation_ratio=2.0)
    assert _passes(host, root_gb=200)
    assert disk.DiskFilter().host_limits(host, fixtures.request()) == {
        'disk_gb': 200}
    assert not _passes(host, root_gb=201)


def test_aggregate_disk_ratio_override():
    aggs = [fixtures.aggregate('thin', ['h1'],
                               {'disk_allocation_ratio': '3.0'})]
    host = fixtures.host('h1', local_gb=10, aggregates=aggs)
    assert _passes(host, root_gb=30)


def test_rejection_reason():
    host = fixtures.host('h1', local_gb=10, local_gb_used=8)
    assert disk.DiskFilter().rejection_reason(
        host, fixtures.request(root_gb=5)) == (
        'usable disk 2048 MB < requested 5120 MB (total 10 GB x ratio 1.0, '
        'used 8 GB)')


def test_requested_disk_mb():
    assert disk.requested_disk_mb(fixtures.request(
        root_gb=1, ephemeral_gb=1, swap=512)) == 2560
