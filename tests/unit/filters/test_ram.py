"""RamFilter: usable RAM = total x ram_allocation_ratio - used."""

from scheduler.filters import ram
from tests.unit import fixtures


def _passes(host, memory_mb):
    return ram.RamFilter().host_passes(host, fixtures.request(
        memory_mb=memory_mb))


def test_fits_exactly_and_not_one_mb_more():
    host = fixtures.host('h1', memory_mb=2048, memory_mb_used=1024)
    assert _passes(host, 1024)
    assert not _passes(host, 1025)


def test_allocation_ratio_lets_a_host_oversubscribe():
    host = fixtures.host('h1', memory_mb=1024, memory_mb_used=512,
                         ram_allocation_ratio=1.5)
    assert _passes(host, 1024)
    assert not _passes(host, 1025)


def test_one_instance_never_overcommits_against_itself():
    # nova's guard: the ratio lets instances share RAM, it does not
    # make one instance larger than the host.
    host = fixtures.host('h1', memory_mb=1024, ram_allocation_ratio=16.0)
    assert _passes(host, 1024)
    assert not _passes(host, 1025)
    assert ram.RamFilter().rejection_reason(
        host, fixtures.request(memory_mb=2048)) == (
        'requested 2048 MB RAM > 1024 MB physical RAM (no overcommit '
        'against itself)')


def test_limit_for_the_compute_is_total_times_ratio():
    host = fixtures.host('h1', memory_mb=1024, ram_allocation_ratio=1.5)
    assert _passes(host, 512)
    assert ram.RamFilter().host_limits(host, fixtures.request()) == {
        'memory_mb': 1536}


def test_aggregate_ratio_overrides_the_reported_one_smallest_wins():
    aggs = [fixtures.aggregate('lax', ['h1'],
                               {'ram_allocation_ratio': '2.0'}),
            fixtures.aggregate('strict', ['h1'],
                               {'ram_allocation_ratio': '1.0'})]
    host = fixtures.host('h1', memory_mb=1024, ram_allocation_ratio=1.5,
                         aggregates=aggs)
    assert _passes(host, 1024)
    assert not _passes(host, 1025)


def test_rejection_reason_says_what_was_missing():
    host = fixtures.host('h1', memory_mb=2048, memory_mb_used=1024)
    spec = fixtures.request(memory_mb=2048)
    assert ram.RamFilter().rejection_reason(host, spec) == (
        'usable RAM 1024 MB < requested 2048 MB (total 2048 MB x ratio '
        '1.0, used 1024 MB)')


def test_runs_for_every_instance_of_a_request():
    # Each placed instance uses RAM: the answer changes between them.
    assert ram.RamFilter().run_filter_for_index(3)
