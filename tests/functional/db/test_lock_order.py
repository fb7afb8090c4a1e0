"""A report batch locks its nodes' usage rows in key order, and only them.

Claims lock the usage rows of their nodes in key order (host,
nodename); a report batch (``usage.apply_reports``) and a release
(``usage._drop``) must lock theirs in the same order, or a batch and a
claim on two of its nodes can deadlock.  On PostgreSQL a locking
SELECT locks rows in its ORDER BY; InnoDB locks them as it reads them,
in the order of the index it chose, and under REPEATABLE READ keeps the
lock on every row it read: for a batch of a quarter of the fleet or
more MariaDB read the whole table by primary key, and so locked every
node's usage row (and every placement), in id order.  The soak on
MariaDB logged those deadlocks (two report batches) and lock waits of
claims on nodes no batch named.

Each test holds a lock the batch needs (a claim's on the usage row of
its first node, or on a placement of it) and lets the batch wait for
it; meanwhile the batch must hold neither its last node (a claim on the
first and the last would deadlock) nor anything of a node outside it.
A claim of a server group's member takes its group's row before any of
these, and so, waiting for it, holds no node.
"""

import contextlib
import datetime
import threading
import time

import sqlalchemy as sa

from scheduler import conf
from scheduler.db import usage

CONF = conf.CONF

#: Nodes in the fleet; the batch is all of them but one.
NODES = 40
#: Seconds to wait for the batch to queue behind the claim's lock.
WAIT = 30


def _report(host: str, at: datetime.datetime) -> usage.NodeReport:
    return usage.NodeReport(host, host, 0, 0, 0, 0, at, frozenset())


def _waiting_for_a_row_lock(conn: sa.Connection) -> int:
    if conn.dialect.name == 'postgresql':
        return conn.execute(sa.text(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = "
            "current_database() AND wait_event_type = 'Lock'")).scalar()
    return conn.execute(sa.text(
        "SELECT count(*) FROM information_schema.innodb_trx t "
        "JOIN information_schema.processlist p "
        "ON p.id = t.trx_mysql_thread_id "
        "WHERE p.db = database() AND t.trx_state = 'LOCK WAIT'")).scalar()


def _locked(engine: sa.Engine, host: str) -> bool:
    """Whether another transaction holds ``host``'s usage row."""
    with engine.connect() as conn, conn.begin():
        try:
            conn.execute(sa.text(
                'SELECT id FROM node_usage WHERE host = :h '
                'FOR UPDATE NOWAIT'), {'h': host})
        except sa.exc.DBAPIError:
            return True
    return False


def _fleet() -> tuple:
    """The usage rows of ``NODES`` nodes, made last key first (id order
    is the reverse of key order); (hosts, a batch of reports of all but
    one, that one)."""
    hosts = ['node-%02d' % i for i in range(NODES)]
    outside = hosts[NODES // 2]
    at = datetime.datetime(2026, 1, 1)
    for host in reversed(hosts):
        usage.apply_reports([_report(host, at)])
    batch = [_report(h, at + datetime.timedelta(seconds=1))
             for h in hosts if h != outside]
    return hosts, batch, outside


def _placement_locked(engine: sa.Engine, uuid: str) -> bool:
    """Whether another transaction holds placement ``uuid``."""
    with engine.connect() as conn, conn.begin():
        try:
            conn.execute(sa.text(
                'SELECT host FROM instances WHERE instance_uuid = :u '
                'FOR UPDATE NOWAIT'), {'u': uuid})
        except sa.exc.DBAPIError:
            return True
    return False


def _insert_waits(engine: sa.Engine, uuid: str, host: str) -> bool:
    """Whether a claim's INSERT of placement ``uuid`` on ``host`` waits
    (for a second) for another transaction; rolled back."""
    with engine.connect() as conn, conn.begin():
        if conn.dialect.name == 'postgresql':
            conn.execute(sa.text("SET LOCAL lock_timeout = '1s'"))
        else:
            conn.execute(sa.text('SET SESSION innodb_lock_wait_timeout = 1'))
        try:
            conn.execute(sa.text(
                'INSERT INTO instances (instance_uuid, host, nodename, '
                'memory_mb, vcpus, disk_gb, status, pending) VALUES '
                "(:u, :h, :h, 1, 1, 1, 'claimed', true)"),
                {'u': uuid, 'h': host})
        except sa.exc.DBAPIError:
            return True
        conn.rollback()
    return False


def _claim(uuid: str, host: str) -> None:
    usage.claim(usage.ClaimRequest(uuid, host, host, 1, 1, 1))


def _uuid(digit: str) -> str:
    return '%s-%s-%s-%s-%s' % (digit * 8, digit * 4, digit * 4, digit * 4,
                               digit * 12)


@contextlib.contextmanager
def _batch_waiting_behind(lock: str, params: dict, batch: list):
    """Take a row lock (statement ``lock``) in a transaction of its own,
    start ``usage.apply_reports(batch)`` in a thread and yield, once the
    batch waits for that lock, an engine to look at what it holds with;
    then release the lock, and require the batch to end without error.
    """
    other = sa.create_engine(CONF.database.connection,
                             poolclass=sa.pool.NullPool)
    holder = other.connect()
    holder_tx = holder.begin()
    errors = []

    def write_batch():
        try:
            usage.apply_reports(batch)
        except Exception as e:  # the test's assertion reports it
            errors.append(e)

    writer = threading.Thread(target=write_batch)
    try:
        holder.execute(sa.text(lock), params)
        writer.start()
        deadline = time.monotonic() + WAIT
        with other.connect() as probe:
            while not _waiting_for_a_row_lock(probe):
                assert writer.is_alive(), errors
                assert time.monotonic() < deadline, \
                    'the batch never waited for the lock held'
                time.sleep(0.05)
        yield other
    finally:
        holder_tx.commit()
        holder.close()
        writer.join(WAIT)
        other.dispose()
    assert not writer.is_alive()
    assert errors == []


def test_a_report_batch_waiting_for_a_claim_holds_no_other_node(db_server):
    hosts, batch, outside = _fleet()
    first, last = hosts[0], hosts[-1]
    # A claim's lock on the first node, as its UPDATE takes it.
    with _batch_waiting_behind(
            'UPDATE node_usage SET generation = generation + 1 '
            'WHERE host = :h', {'h': first}, batch) as other:
        held = [host for host in (last, outside) if _locked(other, host)]
        assert held == [], (
            'the batch, waiting for %s, holds %s' % (first, held))


def test_a_report_batch_waiting_for_a_placement_holds_no_other_nodes(
        db_server):
    hosts, batch, outside = _fleet()
    first = hosts[0]
    # Primary key order: the outside node's placement, then the first's.
    _claim(_uuid('a'), outside)
    _claim(_uuid('f'), first)
    # The first node's pending placement locked (a release, say).
    with _batch_waiting_behind(
            'UPDATE instances SET vcpus = vcpus WHERE instance_uuid = :u',
            {'u': _uuid('f')}, batch) as other:
        held = []
        if _placement_locked(other, _uuid('a')):
            held.append('the placement on %s' % outside)
        if _insert_waits(other, _uuid('1'), outside):
            held.append('a new placement on %s waits' % outside)
        assert held == [], (
            'the batch, waiting for a placement on %s: %s'
            % (first, '; '.join(held)))


def test_a_group_member_waiting_for_its_group_holds_no_node(db_server):
    # A claim of a server group's member locks the group's row before
    # any node's usage row: while it waits for another member's claim,
    # reports and other claims on its node go on.
    at = datetime.datetime(2026, 1, 1)
    usage.apply_reports([_report('node-a', at)])
    group, members = _uuid('9'), (_uuid('a'), _uuid('b'))

    def member(uuid: str) -> usage.ClaimRequest:
        return usage.ClaimRequest(uuid, 'node-a', 'node-a', 1, 1, 1,
                                  group_uuid=group, group_members=members)
    usage.claim_many([member(_uuid('a'))])
    other = sa.create_engine(CONF.database.connection,
                             poolclass=sa.pool.NullPool)
    holder = other.connect()
    holder_tx = holder.begin()
    errors = []

    def claim():
        try:
            usage.claim_many([member(_uuid('b'))])
        except Exception as e:  # the test's assertion reports it
            errors.append(e)

    claimer = threading.Thread(target=claim)
    try:
        holder.execute(sa.text(
            'UPDATE server_group_locks SET locked_at = locked_at '
            'WHERE group_uuid = :g'), {'g': group})
        claimer.start()
        deadline = time.monotonic() + WAIT
        with other.connect() as probe:
            while not _waiting_for_a_row_lock(probe):
                assert claimer.is_alive(), errors
                assert time.monotonic() < deadline, \
                    'the claim never waited for its group'
                time.sleep(0.05)
        assert not _locked(other, 'node-a')
    finally:
        holder_tx.commit()
        holder.close()
        claimer.join(WAIT)
        other.dispose()
    assert errors == []
    assert usage.placements_get([_uuid('b')])[_uuid('b')]['host'] == 'node-a'
