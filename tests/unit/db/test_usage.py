"""The claim protocol in the inventory, on a migrated SQLite file.

The same scenarios run against PostgreSQL and MariaDB in
tests/functional/db/test_backends.py.
"""

import datetime

from oslo_utils import timeutils
import pytest
import sqlalchemy as sa

from scheduler.db import engine
from scheduler.db import models
from scheduler.db import usage
from tests.unit import fixtures

T0 = datetime.datetime(2026, 11, 1, 12, 0, 0)


def _report(host='h1', node='h1', used=0, instances=(), at=T0):
    return usage.NodeReport(host, node, memory_mb_used=used, vcpus_used=0,
                            local_gb_used=0, num_instances=len(instances),
                            updated_at=at, instance_uuids=frozenset(instances))


def _claim(n, memory_mb=1024, limit=4096, host='h1', node='h1', **kw):
    return usage.claim(usage.ClaimRequest(
        fixtures.uuid(n), host, node, memory_mb, 1, 10,
        limits={'memory_mb': limit} if limit else {}, **kw))


def _row(host='h1', node='h1'):
    return next(r for r in usage.usage_get_all()
                if (r['host'], r['nodename']) == (host, node))


@pytest.fixture(autouse=True)
def node(inventory):
    usage.apply_reports([_report()])
    return inventory


def test_claims_fill_a_node_exactly_to_its_limit():
    for n in range(1, 5):
        _claim(n)
    with pytest.raises(usage.ClaimConflict):
        _claim(5)
    row = _row()
    assert (row['claimed_memory_mb'], row['claimed_instances']) == (4096, 4)
    assert sorted(p['instance_uuid'] for p in usage.pending_claims()) == [
        fixtures.uuid(n) for n in range(1, 5)]


def test_a_lost_claim_leaves_nothing_behind():
    _claim(1, memory_mb=3072)
    before = _row()
    with pytest.raises(usage.ClaimConflict):
        _claim(2, memory_mb=2048)
    assert _row() == before
    assert usage.placements_get([fixtures.uuid(2)]) == {}


def test_the_reported_usage_counts_against_the_limit():
    usage.apply_reports([_report(used=3072, at=T0 + datetime.timedelta(1))])
    with pytest.raises(usage.ClaimConflict):
        _claim(1, memory_mb=2048)
    _claim(1, memory_mb=1024)


def test_a_generation_check_refuses_a_changed_node():
    generation = _row()['generation']
    _claim(1, limit=None)
    with pytest.raises(usage.ClaimConflict):
        _claim(2, limit=None, generation=generation)
    _claim(2, limit=None, generation=_row()['generation'])


def _request(n, host, memory_mb=1024, limit=4096, **kw):
    return usage.ClaimRequest(fixtures.uuid(n), host, host, memory_mb, 1, 10,
                              limits={'memory_mb': limit} if limit else {},
                              **kw)


def test_a_request_over_several_nodes_takes_its_share_on_each():
    usage.apply_reports([_report('h2', 'h2', used=1024)])
    placed = usage.claim_many([
        _request(1, 'h1'), _request(2, 'h2', limit=2048),
        _request(3, 'h1', memory_mb=512),
        _request(4, 'h3', limit=None,
                 reported={'memory_mb_used': 256, 'updated_at': T0})])
    assert [(p['host'], p['usage']['claimed_memory_mb']) for p in placed] \
        == [('h1', 1536), ('h2', 1024), ('h1', 1536), ('h3', 1024)]
    assert (_row()['claimed_instances'], _row('h2', 'h2')['claimed_instances'],
            _row('h3', 'h3')['reported_memory_mb']) == (2, 1, 256)
    assert placed[1]['usage'] == _row('h2', 'h2')


def test_a_request_one_node_cannot_take_takes_nothing_anywhere():
    usage.apply_reports([_report('h2', 'h2', used=1024)])
    before = [_row(), _row('h2', 'h2')]
    with pytest.raises(usage.ClaimConflict) as raised:
        usage.claim_many([_request(1, 'h1'),
                          _request(2, 'h2', memory_mb=2048, limit=2048)])
    assert raised.value.key == ('h2', 'h2')
    stale = _row()['generation']
    with pytest.raises(usage.ClaimConflict) as raised:
        usage.claim_many([_request(3, 'h2', limit=None),
                          _request(4, 'h1', limit=None,
                                   generation=stale - 1)])
    assert raised.value.key == ('h1', 'h1')
    assert [_row(), _row('h2', 'h2')] == before
    assert usage.placements_get([fixtures.uuid(n) for n in range(1, 5)]) \
        == {}


def test_a_report_listing_the_instance_moves_its_usage_out_of_pending():
    _claim(1)
    confirmed = usage.apply_reports([_report(
        used=1024, instances=[fixtures.uuid(1)],
        at=T0 + datetime.timedelta(seconds=10))])
    assert confirmed == [fixtures.uuid(1)]
    row = _row()
    assert (row['reported_memory_mb'], row['claimed_memory_mb']) == (1024, 0)
    placed = usage.placements_get([fixtures.uuid(1)])[fixtures.uuid(1)]
    assert (placed['status'], placed['pending']) == ('active', False)
    # The same report written again by another worker changes nothing.
    seq = row['seq']
    assert usage.apply_reports([_report(
        used=1024, instances=[fixtures.uuid(1)],
        at=T0 + datetime.timedelta(seconds=10))]) == []
    assert _row()['seq'] == seq


def test_an_older_report_never_comes_back():
    usage.apply_reports([_report(used=2048, at=T0 + datetime.timedelta(1))])
    usage.apply_reports([_report(used=0, at=T0)])
    assert _row()['reported_memory_mb'] == 2048


def test_an_older_report_never_comes_back_after_one_that_changed_nothing():
    # The newer report says what the row already holds, so nothing of
    # the usage is written; its time still is, or the older one, taken
    # between the two, would be written over it.
    usage.apply_reports([_report(used=2048, at=T0)])
    usage.apply_reports([_report(used=2048, at=T0 + datetime.timedelta(2))])
    usage.apply_reports([_report(used=0, at=T0 + datetime.timedelta(1))])
    assert _row()['reported_memory_mb'] == 2048


def test_a_report_that_changed_nothing_moves_no_sequence_number():
    # Workers read rows changed since a sequence number: a row whose
    # time alone moved is not news to them.
    usage.apply_reports([_report(used=2048, at=T0)])
    before = _row()
    usage.apply_reports([_report(used=2048, at=T0 + datetime.timedelta(2))])
    after = _row()
    assert (after['seq'], after['generation']) == (before['seq'],
                                                   before['generation'])


def test_a_report_of_a_new_node_creates_its_row():
    usage.apply_reports([_report('h2', 'h2', used=512)])
    assert _row('h2', 'h2')['reported_memory_mb'] == 512


def test_the_first_claim_on_an_unwritten_node_creates_its_row():
    usage.claim(usage.ClaimRequest(
        fixtures.uuid(1), 'h3', 'h3', 1024, 1, 10,
        limits={'memory_mb': 2048},
        reported={'memory_mb_used': 1024, 'updated_at': T0}))
    row = _row('h3', 'h3')
    assert (row['reported_memory_mb'], row['claimed_memory_mb']) == (1024,
                                                                     1024)
    with pytest.raises(usage.ClaimConflict):
        usage.claim(usage.ClaimRequest(fixtures.uuid(2), 'h3', 'h3', 1, 1,
                                       0, limits={'memory_mb': 2048}))


def test_a_pending_instance_is_refused_elsewhere_unless_replaced():
    usage.apply_reports([_report('h2', 'h2')])
    _claim(1)
    with pytest.raises(usage.AlreadyPlaced) as info:
        _claim(1, host='h2', node='h2')
    assert info.value.placement['host'] == 'h1'
    assert _row('h2', 'h2')['claimed_memory_mb'] == 0, 'rolled back'
    usage.claim(usage.ClaimRequest(fixtures.uuid(1), 'h2', 'h2', 1024, 1,
                                   10), replace=True)
    assert _row('h1')['claimed_memory_mb'] == 0
    assert _row('h2', 'h2')['claimed_memory_mb'] == 1024


def test_a_confirmed_instance_claimed_again_is_placed_anew():
    # Its placement is found by the INSERT, not looked for first: the
    # claim goes round once more with the lookup and drops it.
    _claim(1)
    usage.apply_reports([_report(used=1024, instances=[fixtures.uuid(1)],
                                 at=T0 + datetime.timedelta(seconds=10))])
    usage.apply_reports([_report('h2', 'h2')])
    _claim(1, host='h2', node='h2')
    placed = usage.placements_get([fixtures.uuid(1)])[fixtures.uuid(1)]
    assert (placed['host'], placed['pending']) == ('h2', True)
    assert _row('h2', 'h2')['claimed_memory_mb'] == 1024
    assert _row()['claimed_memory_mb'] == 0


def test_changed_rows_and_a_claims_row_read_as_their_types():
    # Both are read through precompiled statements: the timestamp must
    # still come back as a datetime (SQLite stores it as text).
    changed = usage.changed_since(0)
    assert [(r['host'], r['reported_at']) for r in changed] == [('h1', T0)]
    placed = _claim(1)
    assert placed['usage']['reported_at'] == T0
    assert placed['usage']['claimed_memory_mb'] == 1024
    assert usage.changed_since(changed[-1]['seq'])[0]['seq'] == \
        placed['usage']['seq']


#: The statements of one claim, by backend (the backend scenarios run
#: this test on each): SQLite BEGIN IMMEDIATE, the counter's bump, the
#: node's UPDATE (which reads the counter itself and returns the row),
#: the INSERT; PostgreSQL one statement; MySQL the UPDATE, its row read
#: back, the INSERT.
_CLAIM_STATEMENTS = {
    'sqlite': ['BEGIN', 'UPDATE', 'UPDATE', 'INSERT'],
    'postgresql': ['WITH'],
    'mysql': ['UPDATE', 'SELECT', 'INSERT'],
}


def test_a_claims_statements_and_its_sequence_number():
    eng = usage.engine.get_engine()
    counter = models.UsageCounter.__table__
    sent = []

    def log(conn, cursor, statement, *args):
        sent.append(statement.split()[0])

    sa.event.listen(eng, 'before_cursor_execute', log)
    try:
        placed = _claim(1)
        second = _claim(2)
    finally:
        sa.event.remove(eng, 'before_cursor_execute', log)
    assert sent == _CLAIM_STATEMENTS[eng.dialect.name] * 2
    assert second['usage']['seq'] > placed['usage']['seq']
    assert _row()['seq'] == second['usage']['seq']
    if not eng.dialect.supports_sequences:
        # The number is the counter row's.
        with eng.connect() as conn:
            value = conn.execute(sa.select(counter.c.value)).scalar()
        assert second['usage']['seq'] == placed['usage']['seq'] + 1 == value


def test_commits_are_seen_in_order_only_with_the_counter_row():
    supports = usage.engine.get_engine().dialect.supports_sequences
    assert usage.commits_in_seq_order() is (not supports)


def test_release_gives_pending_usage_back():
    _claim(1)
    _claim(2)
    dropped = usage.release([fixtures.uuid(1), fixtures.uuid(9)])
    assert [p['instance_uuid'] for p in dropped] == [fixtures.uuid(1)]
    assert _row()['claimed_memory_mb'] == 1024


def test_a_deleted_instance_keeps_its_reported_usage_until_a_report_drops_it():
    # An instance built and listed: its usage is the report's.  Its
    # deletion (news kept through an outage, applied by one worker)
    # can come before the report without it (taken by another worker
    # during the outage, written at its next flush): the placement
    # goes at once, its usage with that report, however late.
    _claim(1)
    usage.apply_reports([_report(used=1024, instances=[fixtures.uuid(1)],
                                 at=T0 + datetime.timedelta(1))])
    taken_during_the_outage = _report(used=0,
                                      at=T0 + datetime.timedelta(2))
    assert [p['instance_uuid'] for p in usage.release(
        [fixtures.uuid(1)], host='h1')] == [fixtures.uuid(1)]
    assert usage.placements_get([fixtures.uuid(1)]) == {}
    row = _row()
    assert (row['reported_memory_mb'], row['claimed_memory_mb']) == (1024, 0)
    usage.apply_reports([taken_during_the_outage])
    row = _row()
    assert (row['reported_memory_mb'], row['claimed_memory_mb']) == (0, 0)


def test_expiry_drops_only_old_unconfirmed_claims_and_only_once():
    _claim(1)
    _claim(2)
    usage.confirm('h1', [fixtures.uuid(2)])   # built: never expires
    later = timeutils.utcnow() + datetime.timedelta(seconds=5)
    uuids = [fixtures.uuid(1), fixtures.uuid(2)]
    assert [p['instance_uuid'] for p in usage.expire(uuids, later)] == [
        fixtures.uuid(1)]
    assert usage.expire(uuids, later) == []
    assert _row()['claimed_memory_mb'] == 1024
    early = timeutils.utcnow() - datetime.timedelta(seconds=60)
    _claim(3)
    assert usage.expire([fixtures.uuid(3)], early) == []


def test_confirmed_instances_stay_counted_until_a_report_has_them():
    _claim(1)
    assert usage.confirm('h1', [fixtures.uuid(1)]) == 1
    assert _row()['claimed_memory_mb'] == 1024


def test_sync_host_drops_what_the_compute_no_longer_has():
    _claim(1)
    _claim(2)
    usage.apply_reports([_report(used=1024, instances=[fixtures.uuid(1)],
                                 at=T0 + datetime.timedelta(1))])
    dropped = usage.sync_host('h1', [])
    assert [p['instance_uuid'] for p in dropped] == [fixtures.uuid(1)]
    assert list(usage.placements_get(
        [fixtures.uuid(1), fixtures.uuid(2)])) == [fixtures.uuid(2)], \
        'a claim still building stays'


def test_a_sync_taken_before_a_build_does_not_free_the_build():
    """A compute's list of its instances, taken before it built one,
    is served after that build's confirmation (another worker served
    the confirmation first, or the two casts were served at once).
    The built instance keeps its usage: no report counts it yet, and
    giving it back would let another claim have its room."""
    _claim(1, memory_mb=3072)
    assert usage.confirm('h1', [fixtures.uuid(1)]) == 1
    assert usage.sync_host('h1', []) == []
    with pytest.raises(usage.ClaimConflict):
        _claim(2, memory_mb=3072)
    # A report that lists it settles it.
    usage.apply_reports([_report(used=3072, instances=[fixtures.uuid(1)],
                                 at=T0 + datetime.timedelta(1))])
    assert _row()['claimed_memory_mb'] == 0


def _resize_on_its_own_node():
    """Instance 1 runs at 1 GB, listed; it claims 3 GB on its node,
    and a report taken before the resize began lists it at 1 GB."""
    _claim(1)
    usage.confirm('h1', [fixtures.uuid(1)])
    usage.apply_reports([_report(used=1024, instances=[fixtures.uuid(1)],
                                 at=T0 + datetime.timedelta(1))])
    _claim(1, memory_mb=3072, replace=True)
    usage.apply_reports([_report(used=1024, instances=[fixtures.uuid(1)],
                                 at=T0 + datetime.timedelta(2))])


def test_a_resize_on_its_own_node_keeps_its_new_size_until_reported():
    """An instance of 1 GB is resized to 3 GB on the node it runs on
    (nova's allow_resize_to_same_host).  The node's next report, taken
    before the compute began the resize, lists it at 1 GB: the 3 GB
    claim must not be settled by it, or 2 GB of the resize's room goes
    to another claim."""
    _resize_on_its_own_node()
    with pytest.raises(usage.ClaimConflict):
        _claim(2, memory_mb=3072)


def test_a_confirmed_resize_is_settled_by_a_report_taken_after_it():
    _resize_on_its_own_node()
    assert usage.confirm('h1', [fixtures.uuid(1)]) == 1
    # Taken before the confirmation: it may still count the old size.
    usage.apply_reports([_report(used=1024, instances=[fixtures.uuid(1)],
                                 at=T0 + datetime.timedelta(3))])
    assert _row()['claimed_memory_mb'] == 3072
    usage.apply_reports([_report(
        used=3072, instances=[fixtures.uuid(1)],
        at=timeutils.utcnow() + datetime.timedelta(seconds=5))])
    row = _row()
    assert (row['reported_memory_mb'], row['claimed_memory_mb']) == (3072, 0)
    placed = usage.placements_get([fixtures.uuid(1)])[fixtures.uuid(1)]
    assert (placed['status'], placed['pending']) == ('active', False)


def test_an_unconfirmed_resize_on_its_own_node_still_expires():
    _resize_on_its_own_node()
    # The compute's list of what runs has it: no confirmation.
    usage.sync_host('h1', [fixtures.uuid(1)])
    usage.apply_reports([_report(
        used=1024, instances=[fixtures.uuid(1)],
        at=timeutils.utcnow() + datetime.timedelta(seconds=1))])
    assert _row()['claimed_memory_mb'] == 3072
    later = timeutils.utcnow() + datetime.timedelta(seconds=5)
    assert [p['instance_uuid'] for p in usage.expire(
        [fixtures.uuid(1)], later)] == [fixtures.uuid(1)]
    row = _row()
    assert (row['reported_memory_mb'], row['claimed_memory_mb']) == (1024, 0)


def test_changed_since_returns_rows_in_sequence_order():
    usage.apply_reports([_report('h2', 'h2')])
    start = max(r['seq'] for r in usage.usage_get_all())
    _claim(1)
    _claim(2, host='h2', node='h2')
    _claim(3)
    changed = usage.changed_since(start)
    assert [(r['host'], r['claimed_instances']) for r in changed] == [
        ('h2', 1), ('h1', 2)]
    assert [r['seq'] for r in changed] == sorted(r['seq'] for r in changed)
    assert usage.changed_since(changed[-1]['seq']) == []


def test_changed_since_also_returns_the_rows_of_the_gaps_asked():
    usage.apply_reports([_report('h2', 'h2'), _report('h3', 'h3')])
    _claim(1)
    _claim(2, host='h2', node='h2')
    _claim(3, host='h3', node='h3')
    seqs = {r['host']: r['seq'] for r in usage.usage_get_all()}
    # h1's and h2's numbers taken as gaps below h3's; one no row has.
    changed = usage.changed_since(seqs['h3'],
                                  [seqs['h2'], seqs['h1'], 10 ** 9])
    assert [r['host'] for r in changed] == ['h1', 'h2']
    assert [r['host'] for r in usage.changed_since(seqs['h2'], [])] == \
        ['h3']


def test_new_nodes_reported_together_get_their_rows_in_node_order():
    # A service's first flush writes every node's row in one statement
    # (tests/functional/db/test_backends.py: on PostgreSQL and MariaDB
    # too, where the sequence is the database's own).
    start = max(r['seq'] for r in usage.usage_get_all())
    usage.apply_reports([_report('h4', 'n4', used=4),
                         _report('h2', 'n2', used=2),
                         _report('h1', 'h1', used=1, at=T0 + _DAY),
                         _report('h3', 'n3', used=3)])
    changed = usage.changed_since(start)
    assert [(r['host'], r['reported_memory_mb']) for r in changed] == [
        ('h1', 1), ('h2', 2), ('h3', 3), ('h4', 4)]
    assert len({r['seq'] for r in changed}) == 4
    assert all(r['generation'] == 0 for r in changed[1:])
    # The next change of any row comes after them.
    _claim(1, host='h3', node='n3')
    assert [r['host'] for r in usage.changed_since(changed[-1]['seq'])] \
        == ['h3']


_DAY = datetime.timedelta(1)


def test_a_placement_another_worker_dropped_first_is_skipped():
    # No fixture: tests/functional/db/test_backends.py runs this on
    # PostgreSQL and MariaDB too.
    _claim(1)
    _claim(2)
    read = usage._usage_rows

    def other_worker_drops_the_first(session, keys, lock=False):
        # Between this worker's read and its lock, another worker's
        # release of the same instance commits.
        session.execute(sa.delete(models.Instance).where(
            models.Instance.instance_uuid == fixtures.uuid(1)))
        return read(session, keys, lock=lock)

    usage._usage_rows = other_worker_drops_the_first
    try:
        dropped = usage.release([fixtures.uuid(1), fixtures.uuid(2)])
    finally:
        usage._usage_rows = read
    assert [d['instance_uuid'] for d in dropped] == [fixtures.uuid(2)]


def test_a_compute_releases_only_its_own_placements():
    _claim(1)
    assert usage.release([fixtures.uuid(1)], host='h2') == []
    assert _row()['claimed_memory_mb'] == 1024
    assert len(usage.release([fixtures.uuid(1)], host='h1')) == 1


def test_disk_claims_stay_within_the_reported_disk_available_least():
    # 1,000 GB by the totals, 20 GB really free (issue 23, item 5).
    def claim(n, disk_gb, overcommit=0.0):
        return usage.claim(usage.ClaimRequest(
            fixtures.uuid(n), 'h1', 'h1', 1, 1, disk_gb,
            limits={'disk_gb': 1000}, disk_overcommit_gb=overcommit))

    def report(least, used, listed, minutes):
        return usage.NodeReport(
            'h1', 'h1', memory_mb_used=0, vcpus_used=0,
            local_gb_used=used, num_instances=len(listed),
            updated_at=T0 + datetime.timedelta(minutes=minutes),
            disk_available_least=least,
            instance_uuids=frozenset(fixtures.uuid(n) for n in listed))

    usage.apply_reports([report(20, 0, [], 1)])
    claim(1, 8)
    claim(2, 8)
    with pytest.raises(usage.ClaimConflict):
        claim(3, 8)
    # The overcommit a disk ratio allows stretches real free disk too.
    claim(3, 8, overcommit=4.0)
    usage.release([fixtures.uuid(3)])
    # The compute reports the two instances: the measure counts them
    # now, and they stop pending in the same write.
    usage.apply_reports([report(4, 16, [1, 2], 2)])
    row = _row()
    assert (row['reported_disk_least'], row['claimed_disk_gb']) == (4, 0)
    with pytest.raises(usage.ClaimConflict):
        claim(3, 8)
    claim(3, 4)
    # A compute that does not measure it: only the totals count.
    usage.apply_reports([report(None, 16, [1, 2], 3)])
    claim(4, 8)


def test_a_release_locks_usage_rows_before_any_placement():
    # An active placement gives no usage back, yet a report may unlist
    # it (pending again) between the release's read and its lock; then
    # the release updates the usage row.  Locked only then, after the
    # placement row, it deadlocked with the report's transaction (usage
    # rows first) on PostgreSQL after every outage of the soak.
    _claim(1)
    usage.apply_reports([_report(used=1024, instances=[fixtures.uuid(1)],
                                 at=T0 + _DAY)])
    assert not usage.placements_get([fixtures.uuid(1)])[
        fixtures.uuid(1)]['pending']
    read = usage._usage_rows
    asked = []

    def recording(session, keys, lock=False):
        keys = list(keys)
        if lock:
            asked.extend(keys)
        return read(session, keys, lock=lock)

    usage._usage_rows = recording
    try:
        dropped = usage.release([fixtures.uuid(1)], host='h1')
    finally:
        usage._usage_rows = read
    assert [d['instance_uuid'] for d in dropped] == [fixtures.uuid(1)]
    assert asked == [('h1', 'h1')]


def test_release_on_hosts_drops_each_only_on_its_own_host():
    _claim(1)
    _claim(2, host='h2', node='h2', limit=None)
    _claim(3)
    dropped = usage.release_on_hosts({'h1': [fixtures.uuid(1)],
                                      'h2': [fixtures.uuid(3),
                                             fixtures.uuid(2)]})
    assert sorted(d['instance_uuid'] for d in dropped) == [
        fixtures.uuid(1), fixtures.uuid(2)]
    assert list(usage.placements_get([fixtures.uuid(n) for n in (1, 2, 3)])
                ) == [fixtures.uuid(3)], 'h2 does not speak for h1'
    assert _row()['claimed_memory_mb'] == 1024


def test_a_flush_writes_its_nodes_usage_in_a_few_statements():
    # The flush's transaction keeps the rows it writes locked, and every
    # statement is a round trip during which a green worker serves other
    # requests: a statement per node held a flush's rows (and the claims
    # on them) for seconds.  The count must not grow with the nodes.
    hosts = ['n%03d' % n for n in range(60)]
    usage.apply_reports([_report(h, h) for h in hosts])
    for n, h in enumerate(hosts):
        _claim(100 + n, memory_mb=512, host=h, node=h)
    statements = []

    def count(conn, cursor, statement, *args):
        statements.append(statement)
    sa.event.listen(usage.engine.get_engine(), 'before_cursor_execute',
                    count)
    try:
        confirmed = usage.apply_reports([
            _report(h, h, used=512, instances=[fixtures.uuid(100 + n)],
                    at=T0 + datetime.timedelta(1))
            for n, h in enumerate(hosts)])
    finally:
        sa.event.remove(usage.engine.get_engine(), 'before_cursor_execute',
                        count)
    assert len(statements) < 10, statements
    rows = {r['host']: r for r in usage.usage_get_all()}
    assert {rows[h]['reported_memory_mb'] for h in hosts} == {512}
    seqs = sorted(rows[h]['seq'] for h in hosts)
    assert len(set(seqs)) == len(hosts), 'each row a sequence number'
    assert {(rows[h]['generation'], rows[h]['claimed_memory_mb'])
            for h in hosts} == {(2, 0)}, 'claimed, then reported'
    assert sorted(confirmed) == sorted(fixtures.uuid(100 + n)
                                       for n in range(len(hosts)))
    placed = usage.placements_get(confirmed)
    assert {(p['pending'], p['status']) for p in placed.values()} == {
        (False, 'active')}


def test_confirmations_together_are_one_transaction_on_sqlite():
    # Each was a transaction, and so an fsync, of its own: a burst of
    # builds queued its confirmations on the database's write lock.
    from scheduler.db import engine
    usage.apply_reports([_report('h2', 'h2')])
    _claim(1)
    _claim(2)
    _claim(3, host='h2', node='h2')
    begun = []

    def began(conn):
        begun.append(conn)
    sa.event.listen(engine.get_engine(), 'begin', began)
    try:
        counts = usage.confirm_many([('h1', [fixtures.uuid(1)]),
                                     ('h2', [fixtures.uuid(3)]),
                                     ('h1', [fixtures.uuid(2),
                                             fixtures.uuid(3)])])
    finally:
        sa.event.remove(engine.get_engine(), 'begin', began)
    assert counts == [1, 1, 1]
    # One transaction on SQLite (one fsync) and PostgreSQL (one
    # statement); MariaDB and MySQL confirm each build on its own (the
    # backend scenarios run this test there too).
    one_each = engine.get_engine().dialect.name in ('mysql', 'mariadb')
    assert len(begun) == (3 if one_each else 1)
    statuses = {uuid: p['status'] for uuid, p in usage.placements_get(
        [fixtures.uuid(n) for n in (1, 2, 3)]).items()}
    assert set(statuses.values()) == {'active'}


def test_the_locking_reads_name_indexes_of_the_schema():
    """``usage._locking_read`` names its index to MySQL/MariaDB (FORCE
    INDEX); a name the schema lacks fails every report batch there."""
    def names(table):
        return ({index.name for index in table.indexes}
                | {c.name for c in table.constraints})
    assert usage._USAGE_KEY_INDEX in names(models.NodeUsage.__table__)
    assert usage._INST_NODE_INDEX in names(models.Instance.__table__)


GROUP = fixtures.uuid(90)


def _member(n, host, members, group_max=0, **kw):
    """Member ``n`` of server group ``GROUP`` on ``host``; ``group_max``
    0: affinity."""
    return _request(n, host, limit=None, group_uuid=GROUP,
                    group_members=members, group_max=group_max, **kw)


def test_an_anti_affinity_member_is_refused_where_another_was_placed():
    # Another worker chose the same host for another member in the
    # meantime: its placement is in the inventory, the group's rule not
    # in this worker's view.
    members = (fixtures.uuid(1), fixtures.uuid(2), fixtures.uuid(3))
    usage.claim_many([_member(1, 'h1', members, group_max=1)])
    with pytest.raises(usage.ClaimConflict):
        usage.claim_many([_member(2, 'h1', members, group_max=1)])
    # Two may share it under max_server_per_host=2; a third may not.
    usage.claim_many([_member(2, 'h1', members, group_max=2)])
    with pytest.raises(usage.ClaimConflict):
        usage.claim_many([_member(3, 'h1', members, group_max=2)])
    # Without a group to check, a claim is as before.
    usage.claim_many([_request(3, 'h1', limit=None)])


def test_an_affinity_member_is_refused_away_from_the_others():
    # Another worker started the group on h2 while this one chose h1:
    # refused, told where the group runs, and placed there it fits.
    usage.apply_reports([_report('h2', 'h2')])
    members = (fixtures.uuid(1), fixtures.uuid(2), fixtures.uuid(3))
    usage.claim_many([_member(1, 'h2', members)])
    with pytest.raises(usage.ClaimConflict) as refused:
        usage.claim_many([_member(2, 'h1', members)])
    assert (refused.value.key, refused.value.group_hosts) == (
        ('h1', 'h1'), ['h2'])
    assert usage.placements_get([fixtures.uuid(2)]) == {}
    usage.claim_many([_member(2, 'h2', members), _member(3, 'h2', members)])
    # A request of its own split over two hosts is refused too.
    with pytest.raises(usage.ClaimConflict):
        usage.claim_many([_member(4, 'h2', members + (fixtures.uuid(4),)),
                          _member(5, 'h1', members + (fixtures.uuid(5),))])


def test_a_member_moving_away_is_not_held_back_by_its_own_placement():
    usage.apply_reports([_report('h2', 'h2')])
    members = (fixtures.uuid(1),)
    usage.claim_many([_member(1, 'h1', members)])
    usage.claim_many([_member(1, 'h2', members, replace=True)])
    assert usage.placements_get(members)[fixtures.uuid(1)]['host'] == 'h2'


def _group_locks() -> list:
    with engine.transaction() as session:
        return session.execute(sa.select(
            models.ServerGroupLock.group_uuid)).scalars().all()


def test_a_group_lock_row_is_made_once_and_dropped_when_long_unused():
    members = (fixtures.uuid(1), fixtures.uuid(2))
    usage.claim_many([_member(1, 'h1', members)])
    usage.claim_many([_member(2, 'h1', members)])
    assert _group_locks() == [GROUP]
    # Another group's first claim, long after: the first's row goes.
    timeutils.set_time_override(timeutils.utcnow() + usage.GROUP_LOCK_KEPT
                                + datetime.timedelta(seconds=1))
    try:
        usage.claim_many([_request(3, 'h1', limit=None,
                                   group_uuid=fixtures.uuid(91),
                                   group_members=(fixtures.uuid(3),))])
    finally:
        timeutils.clear_time_override()
    assert _group_locks() == [fixtures.uuid(91)]
