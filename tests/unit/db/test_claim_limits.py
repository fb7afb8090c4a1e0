"""The claim's over-commit guard, resource by resource.

test_usage.py fills a node to its RAM limit; dropping the vCPU or the
disk check from the conditional UPDATE, or checking the largest of
several claims' limits instead of the smallest, passed every unit test
(issue 24, mutation pass).  Each resource here: claims fill the node
exactly to its limit, one more unit conflicts and leaves nothing behind,
and the compute's reported usage counts against the limit.
"""

import datetime

import pytest

from scheduler.db import usage
from tests.unit import fixtures

T0 = datetime.datetime(2026, 11, 1, 12, 0, 0)

#: limit name -> (request field, NodeReport field, usage column).
RESOURCES = {
    'memory_mb': ('memory_mb', 'memory_mb_used', 'claimed_memory_mb'),
    'vcpu': ('vcpus', 'vcpus_used', 'claimed_vcpus'),
    'disk_gb': ('disk_gb', 'local_gb_used', 'claimed_disk_gb'),
}


def _report(used: dict | None = None, minutes: int = 0) -> usage.NodeReport:
    values = {'memory_mb_used': 0, 'vcpus_used': 0, 'local_gb_used': 0}
    values.update(used or {})
    return usage.NodeReport(
        'h1', 'h1', num_instances=0, instance_uuids=frozenset(),
        updated_at=T0 + datetime.timedelta(minutes=minutes), **values)


def _request(n: int, limit_name: str, amount: int, limit: float
             ) -> usage.ClaimRequest:
    """A claim of ``amount`` of one resource (1 of the others) under a
    limit on that resource only."""
    sizes = {'memory_mb': 1, 'vcpus': 1, 'disk_gb': 1}
    sizes[RESOURCES[limit_name][0]] = amount
    return usage.ClaimRequest(fixtures.uuid(n), 'h1', 'h1',
                              limits={limit_name: limit}, **sizes)


def _row() -> dict:
    return next(r for r in usage.usage_get_all()
                if (r['host'], r['nodename']) == ('h1', 'h1'))


@pytest.fixture(autouse=True)
def node(inventory):
    usage.apply_reports([_report()])
    return inventory


@pytest.mark.parametrize('limit_name', sorted(RESOURCES))
def test_claims_fill_a_node_exactly_to_each_limit(limit_name):
    column = RESOURCES[limit_name][2]
    for n in range(1, 5):
        usage.claim(_request(n, limit_name, 4, limit=16))
    before = _row()
    assert before[column] == 16
    with pytest.raises(usage.ClaimConflict):
        usage.claim(_request(5, limit_name, 1, limit=16))
    assert _row() == before
    assert usage.placements_get([fixtures.uuid(5)]) == {}


@pytest.mark.parametrize('limit_name', sorted(RESOURCES))
def test_the_reported_usage_counts_against_each_limit(limit_name):
    reported = RESOURCES[limit_name][1]
    usage.apply_reports([_report({reported: 12}, minutes=1)])
    with pytest.raises(usage.ClaimConflict):
        usage.claim(_request(1, limit_name, 5, limit=16))
    usage.claim(_request(1, limit_name, 4, limit=16))


@pytest.mark.parametrize('limit_name', sorted(RESOURCES))
def test_claims_made_together_keep_under_the_smallest_limit(limit_name):
    """Instances of one request may carry different limits (a filter's
    limit can differ between instances): the tightest one holds."""
    with pytest.raises(usage.ClaimConflict):
        usage.claim_many([_request(1, limit_name, 4, limit=16),
                          _request(2, limit_name, 4, limit=6)])
    assert _row()[RESOURCES[limit_name][2]] == 0
    usage.claim_many([_request(1, limit_name, 3, limit=16),
                      _request(2, limit_name, 3, limit=6)])
    assert _row()[RESOURCES[limit_name][2]] == 6
