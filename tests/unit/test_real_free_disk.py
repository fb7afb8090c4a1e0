"""Claims respect the disk a node really has free (issue 23, item 5).

A compute reports ``disk_available_least``: what its disk can really
still give, often far below ``local_gb - local_gb_used``.  nova's free
disk is the smaller of the two and every claim lowers both; so must
the claim here, within a request (the later instances), between
requests (the pending claims composed into the view) and in the
inventory's conditional UPDATE (between workers; the UPDATE alone is
tested in tests/unit/db/test_usage.py, which also runs on PostgreSQL
and MariaDB).

The node of these tests has 1,000 GB by its totals and 20 GB really
free: two 8 GB instances fit, a third does not.
"""

import pytest

from scheduler.db import usage
from scheduler.drivers import filter_scheduler
from scheduler import exception
from scheduler import host_manager
from tests.unit import fixtures

TOTAL_GB = 1000
LEAST_GB = 20
ROOT_GB = 8


@pytest.fixture(params=[True, False], ids=['columnar', 'per-host'])
def disk_only(request, conf):
    """DiskFilter decides; both pipelines (columns and per host)."""
    conf.config(enabled_filters=fixtures.CORE_FILTERS,
                weight_classes=['DiskWeigher'], columnar=request.param,
                group='filter_scheduler')


def _report(host='tight', least=LEAST_GB, used=0, instances=(),
            **fields):
    return fixtures.report(host, local_gb=TOTAL_GB, memory_mb=65536,
                           vcpus=128, local_gb_used=used,
                           disk_available_least=least,
                           instance_uuids=list(instances),
                           num_instances=len(instances), **fields)


def _driver(manager):
    return filter_scheduler.FilterScheduler(manager)


def _place(driver, n_first, num=1):
    spec = fixtures.request(root_gb=ROOT_GB, num_instances=num)
    uuids = [fixtures.uuid(n) for n in range(n_first, n_first + num)]
    return driver.select_destinations(None, spec, uuids)


def _row(host='tight'):
    return next(r for r in usage.usage_get_all() if r['host'] == host)


def test_later_instances_of_one_request_see_the_disk_the_first_took(
        disk_only):
    driver = _driver(fixtures.manager_with([_report()]))
    with pytest.raises(exception.NoValidHost):
        _place(driver, 1, num=3)
    assert usage.pending_claims() == []
    assert len(_place(driver, 1, num=2)) == 2
    view = driver.host_manager.get_host_state('tight')
    assert view.disk_available_least == LEAST_GB - 2 * ROOT_GB
    assert view.free_disk_mb == (LEAST_GB - 2 * ROOT_GB) * 1024


def test_requests_one_after_another_see_the_disk_pending_claims_took(
        disk_only):
    driver = _driver(fixtures.manager_with([_report()]))
    _place(driver, 1)
    _place(driver, 2)
    with pytest.raises(exception.NoValidHost):
        _place(driver, 3)
    assert _row()['claimed_disk_gb'] == 2 * ROOT_GB


def test_the_inventory_refuses_a_claim_beyond_real_free_disk(disk_only):
    # Two workers: the second has not seen the first's claims when it
    # claims, so only the inventory's check can stop it.
    first = fixtures.manager_with([_report()])
    second = host_manager.HostManager(inventory=first.db)
    second.update_from_report(_report())
    _place(_driver(first), 1, num=2)
    stale = second.get_host_state('tight')
    assert stale.free_disk_mb == LEAST_GB * 1024
    with pytest.raises(exception.ClaimConflict):
        second.claim(stale, fixtures.request(root_gb=ROOT_GB),
                     fixtures.uuid(3), limits={'disk_gb': TOTAL_GB})
    # The lost race refreshed the node: it shows the real free disk.
    assert second.get_host_state('tight').disk_available_least == \
        LEAST_GB - 2 * ROOT_GB
    with pytest.raises(exception.NoValidHost):
        _place(_driver(second), 3)


def test_a_report_moves_pending_disk_without_counting_it_twice(disk_only):
    manager = fixtures.manager_with([_report()])
    driver = _driver(manager)
    _place(driver, 1, num=2)
    manager.flush()
    # The compute built both: its report lists them, and its measure of
    # free disk already counts them.
    uuids = [fixtures.uuid(1), fixtures.uuid(2)]
    manager.update_from_report(_report(least=LEAST_GB - 2 * ROOT_GB,
                                       used=2 * ROOT_GB, instances=uuids))
    manager.flush()
    view = manager.get_host_state('tight')
    assert view.disk_available_least == LEAST_GB - 2 * ROOT_GB
    assert view.local_gb_used == 2 * ROOT_GB
    assert usage.pending_claims() == []
    # The compute frees disk of its own (20 GB again); a third instance
    # is placed, and the next report does not list it yet: it counts
    # against the new measure, once.
    manager.update_from_report(_report(least=LEAST_GB, used=2 * ROOT_GB,
                                       instances=uuids))
    manager.flush()
    _place(driver, 3)
    manager.update_from_report(_report(least=LEAST_GB - 1,
                                       used=2 * ROOT_GB, instances=uuids))
    manager.flush()
    view = manager.get_host_state('tight')
    assert view.disk_available_least == LEAST_GB - 1 - ROOT_GB
    assert view.local_gb_used == 3 * ROOT_GB
    assert _row()['claimed_disk_gb'] == ROOT_GB


@pytest.mark.parametrize('ratio, fits', [(1.0, 2), (1.01, 3), (1.5, 65)])
def test_filter_and_claim_agree_on_how_much_fits(disk_only, ratio, fits):
    # nova's usable disk: total x ratio - (total - free), free capped
    # by disk_available_least.  The filter and the inventory's check
    # must stop at the same instance, or requests fail with conflicts.
    driver = _driver(fixtures.manager_with([_report(
        disk_allocation_ratio=ratio)]))
    placed = 0
    for n in range(1, fits + 3):
        try:
            _place(driver, n)
        except exception.NoValidHost:
            break
        placed += 1
    assert placed == fits
    assert _row()['claimed_disk_gb'] == fits * ROOT_GB
