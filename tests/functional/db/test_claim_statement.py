"""The claim on PostgreSQL: one statement that commits as it returns.

A claim's transaction used to be BEGIN, UPDATE, INSERT and COMMIT, the
node's row locked from the UPDATE to the COMMIT, across round trips to
a worker busy with other requests; concurrent claims on that node
queued behind it, each holding a pooled connection.  Here the
statements the driver sees are counted, and the all-or-nothing of the
one statement is checked against the database's own rows.
"""

import uuid

import pytest

from scheduler.db import usage
from tests.functional.db import statement_log

_LIMITS = {'memory_mb': 4096, 'vcpu': 8, 'disk_gb': 100}


def _request(node='n1', memory_mb=1024, **kw):
    return usage.ClaimRequest(str(uuid.uuid4()), node, node, memory_mb, 1,
                              10, limits=dict(_LIMITS), **kw)


def _report(node='n1'):
    from oslo_utils import timeutils
    usage.apply_reports([usage.NodeReport(node, node, 0, 0, 0, 0,
                                          timeutils.utcnow(), frozenset())])


def test_a_claim_is_one_statement_and_no_transaction(postgresql):
    _report()
    with statement_log.StatementLog() as driver:
        placed = usage.claim_many([_request(), _request()])
    assert len(driver.statements) == 1, driver.statements
    assert driver.commits == 0
    assert driver.statements[0].lstrip().upper().startswith('WITH')
    # Committed as it returned: another connection sees both rows.
    found = usage.placements_get([p['instance_uuid'] for p in placed])
    assert sorted(found) == sorted(p['instance_uuid'] for p in placed)
    assert all(p['pending'] for p in found.values())
    row, = usage.usage_get_all()
    assert (row['claimed_memory_mb'], row['claimed_instances']) == (2048, 2)
    assert placed[0]['usage']['claimed_memory_mb'] == 2048
    assert placed[0]['usage']['seq'] == row['seq']


def test_a_claim_without_room_writes_nothing(postgresql):
    _report()
    usage.claim(_request(memory_mb=3072))
    before, = usage.usage_get_all()
    late = [_request(memory_mb=1024), _request(memory_mb=1024)]
    with pytest.raises(usage.ClaimConflict):
        usage.claim_many(late)
    after, = usage.usage_get_all()
    assert after == before
    assert usage.placements_get([r.instance_uuid for r in late]) == {}


def test_a_node_without_a_row_gets_one_then_the_claim(postgresql):
    request = _request(node='fresh', reported={'memory_mb_used': 512})
    placed, = usage.claim_many([request])
    row, = usage.usage_get_all()
    assert (row['reported_memory_mb'],
            row['claimed_memory_mb']) == (512, 1024)
    assert placed['usage'] == row


def test_an_instance_placed_twice_writes_nothing_the_second_time(postgresql):
    _report()
    _report('n2')
    first = _request()
    usage.claim(first)
    again = usage.ClaimRequest(first.instance_uuid, 'n2', 'n2', 1024, 1, 10,
                               limits=dict(_LIMITS))
    with pytest.raises(usage.AlreadyPlaced):
        usage.claim(again)
    rows = {r['host']: r for r in usage.usage_get_all()}
    assert rows['n2']['claimed_memory_mb'] == 0
    assert rows['n1']['claimed_memory_mb'] == 1024
    # A replacement moves it, in a transaction (it reads first).
    usage.claim(again, replace=True)
    rows = {r['host']: r for r in usage.usage_get_all()}
    assert (rows['n1']['claimed_memory_mb'],
            rows['n2']['claimed_memory_mb']) == (0, 1024)


def test_a_build_confirms_its_claims_in_one_statement(postgresql):
    # confirm() comes with every build: as a transaction its rows stayed
    # locked across BEGIN, UPDATE and COMMIT, each a round trip through
    # a busy worker, and reports applying those rows waited.
    _report()
    placed = usage.claim_many([_request(), _request()])
    uuids = [p['instance_uuid'] for p in placed]
    with statement_log.StatementLog() as driver:
        assert usage.confirm('n1', uuids + [str(uuid.uuid4())]) == 2
    assert len(driver.statements) == 1, driver.statements
    assert driver.commits == 0
    found = usage.placements_get(uuids)
    assert {p['status'] for p in found.values()} == {'active'}
    assert usage.confirm('n1', uuids) == 0


def test_builds_confirmed_together_in_one_statement(postgresql):
    # Every build's confirmation took a pooled connection of its own;
    # under load they queued in front of the claims.  Written together
    # (HostManager's group commit), they are one statement, and each
    # compute's count is its own: a claim is marked only by its host.
    _report('n1')
    _report('n2')
    on_n1 = [p['instance_uuid'] for p in usage.claim_many(
        [_request('n1'), _request('n1')])]
    on_n2 = [p['instance_uuid'] for p in usage.claim_many(
        [_request('n2')])]
    with statement_log.StatementLog() as driver:
        assert usage.confirm_many([
            ('n1', on_n1 + [str(uuid.uuid4())]),
            ('n2', on_n2),
            ('n2', on_n1),          # not n2's: left alone
        ]) == [2, 1, 0]
    assert len(driver.statements) == 1, driver.statements
    assert driver.commits == 0
    found = usage.placements_get(on_n1 + on_n2)
    assert {p['status'] for p in found.values()} == {'active'}
    assert usage.confirm_many([('n1', on_n1), ('n2', on_n2)]) == [0, 0]
