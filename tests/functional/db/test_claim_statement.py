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


def test_instances_on_several_nodes_are_one_statement(postgresql):
    # A request of ten instances spread over nodes sent an UPDATE a node
    # inside BEGIN ... COMMIT: each a round trip through a busy worker,
    # every row locked until the last.
    for node in ('n1', 'n2', 'n3'):
        _report(node)
    wanted = [_request('n2'), _request('n1'), _request('n2'), _request('n3')]
    with statement_log.StatementLog() as driver:
        placed = usage.claim_many(wanted)
    assert len(driver.statements) == 1, driver.statements
    assert driver.commits == 0
    rows = {r['host']: r for r in usage.usage_get_all()}
    assert {h: (r['claimed_memory_mb'], r['claimed_instances'])
            for h, r in rows.items()} == {
        'n1': (1024, 1), 'n2': (2048, 2), 'n3': (1024, 1)}
    assert [p['instance_uuid'] for p in placed] == [
        r.instance_uuid for r in wanted]
    for p in placed:
        assert p['usage'] == rows[p['host']]
    found = usage.placements_get([r.instance_uuid for r in wanted])
    assert {u: p['host'] for u, p in found.items()} == {
        r.instance_uuid: r.host for r in wanted}


def test_several_nodes_one_without_room_write_nothing(postgresql):
    # All or none: the node that has room is not left holding usage.
    _report('n1')
    _report('n2')
    usage.claim(_request('n2', memory_mb=3072))
    before = usage.usage_get_all()
    late = [_request('n1'), _request('n2', memory_mb=2048)]
    with pytest.raises(usage.ClaimConflict) as refused:
        usage.claim_many(late)
    assert refused.value.key == ('n2', 'n2')
    assert usage.usage_get_all() == before
    assert usage.placements_get([r.instance_uuid for r in late]) == {}


def test_several_nodes_one_without_a_row_gets_one(postgresql):
    _report('n1')
    placed = usage.claim_many([
        _request('n1'), _request('fresh', reported={'memory_mb_used': 512})])
    rows = {r['host']: r for r in usage.usage_get_all()}
    assert (rows['fresh']['reported_memory_mb'],
            rows['fresh']['claimed_memory_mb']) == (512, 1024)
    assert rows['n1']['claimed_memory_mb'] == 1024
    assert [p['usage'] for p in placed] == [rows['n1'], rows['fresh']]


def test_a_generation_is_checked_on_its_node_alone(postgresql):
    _report('n1')
    _report('n2')
    gen = {r['host']: r['generation'] for r in usage.usage_get_all()}
    usage.claim_many([_request('n1', generation=gen['n1']),
                      _request('n2', generation=gen['n2'])])
    before = usage.usage_get_all()
    with pytest.raises(usage.ClaimConflict) as refused:
        usage.claim_many([_request('n1'),
                          _request('n2', generation=gen['n2'])])
    assert refused.value.key == ('n2', 'n2')
    assert usage.usage_get_all() == before


def test_requests_racing_over_several_nodes_take_exactly_the_room(
        postgresql):
    # Requests of three instances on three of four nodes race for the
    # nodes' slots: each takes all of its instances or none, no node
    # ends above its limit, and no two lock the same rows in an order
    # that deadlocks (the statement locks them in key order).
    import concurrent.futures
    import itertools
    nodes = ['n1', 'n2', 'n3', 'n4']
    for node in nodes:
        _report(node)
    spreads = list(itertools.combinations(nodes, 3))

    def request(i):
        wanted = [_request(node) for node in spreads[i % len(spreads)]]
        try:
            usage.claim_many(wanted)
        except usage.ClaimConflict:
            return []
        return [r.instance_uuid for r in wanted]

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        won = [uuids for uuids in pool.map(request, range(40)) if uuids]
    rows = {r['host']: r for r in usage.usage_get_all()}
    # Four slots of 1024 MB a node, three nodes a request: at most five
    # requests fit (16 slots), and no refusal was spurious: each set of
    # nodes had ten requests, so each ends with a full node.
    assert 1 <= len(won) <= 5
    full = {node for node, row in rows.items()
            if row['claimed_memory_mb'] == 4096}
    assert all(full & set(spread) for spread in spreads)
    found = usage.placements_get([u for uuids in won for u in uuids])
    assert len(found) == 3 * len(won)
    for node, row in rows.items():
        held = [p for p in found.values() if p['host'] == node]
        assert row['claimed_memory_mb'] == 1024 * len(held) <= 4096
        assert row['claimed_instances'] == len(held)
