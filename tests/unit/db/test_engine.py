"""The inventory engine's transactions (``engine.run_in_transaction``)
and its SQLite engine's guarantees."""

import os
import sqlite3
import threading

from oslo_db import exception as db_exc
import pytest
import sqlalchemy as sa

from scheduler.db import engine
from scheduler.db import models

_COUNTER = models.UsageCounter.__table__


def _value() -> int:
    with engine.get_engine().connect() as conn:
        return conn.execute(sa.select(_COUNTER.c.value)).scalar()


def _bump(conn) -> None:
    conn.execute(sa.update(_COUNTER).values(value=_COUNTER.c.value + 1))


def test_work_is_committed_before_it_returns(inventory):
    seen = []

    def work(conn):
        seen.append(type(conn).__name__)
        _bump(conn)
        return 'done'

    start = _value()
    assert engine.run_in_transaction(work) == 'done'
    assert seen == ['Connection']
    assert _value() == start + 1


def test_a_driver_error_rolls_back_and_is_raised(inventory):
    calls = []

    def work(conn):
        calls.append(1)
        _bump(conn)
        conn.exec_driver_sql('SELECT * FROM no_such_table')

    start = _value()
    with pytest.raises(db_exc.DBError):
        engine.run_in_transaction(work)
    assert len(calls) == 1
    assert _value() == start


def test_a_duplicate_key_is_oslo_dbs_error_and_nothing_is_kept(inventory):
    table = models.Instance.__table__
    stmt = sa.insert(table).values(
        {c.name: sa.bindparam(c.name) for c in table.columns})
    row = {c.name: None for c in table.columns}
    row.update(instance_uuid='u1', host='h', nodename='h', memory_mb=1,
               vcpus=1, disk_gb=1, status='claimed', pending=True)

    def work(conn):
        _bump(conn)
        conn.execute(stmt, [row, dict(row)])

    start = _value()
    with pytest.raises(db_exc.DBDuplicateEntry):
        engine.run_in_transaction(work)
    assert _value() == start
    with engine.get_engine().connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(
            table)).scalar() == 0


def test_any_other_error_is_raised_and_rolls_back(inventory):
    def work(conn):
        _bump(conn)
        raise ValueError('no')

    start = _value()
    with pytest.raises(ValueError):
        engine.run_in_transaction(work)
    assert _value() == start


def test_transactions_of_one_process_queue_for_sqlite_in_turn(inventory):
    # A transaction waiting here starts the moment the one before it
    # ends, instead of sleeping in SQLite's busy handler.
    done = []
    writer = engine._sqlite_writer()
    with writer.turn():
        second = threading.Thread(
            target=lambda: done.append(engine.run_in_transaction(_bump)))
        second.start()
        second.join(0.3)
        assert not done, 'ran while another transaction of ours wrote'
    second.join(10)
    assert done == [None]
    # A read does not queue.
    with writer.turn():
        assert engine.run_read(lambda conn: 'read') == 'read'


def test_transactions_begin_immediate_holding_the_write_lock(inventory):
    # Another connection cannot write while one of ours is in a
    # transaction that has only read so far.
    path = engine.get_engine().url.database

    def work(conn):
        conn.execute(sa.select(_COUNTER.c.value)).scalar()
        other = sqlite3.connect(path, timeout=0, isolation_level=None)
        try:
            with pytest.raises(sqlite3.OperationalError, match='locked'):
                other.execute('BEGIN IMMEDIATE')
        finally:
            other.close()

    engine.run_in_transaction(work)


def test_a_read_neither_takes_nor_waits_for_the_write_lock(inventory):
    start = _value()
    other = sqlite3.connect(engine.get_engine().url.database,
                            isolation_level=None)
    try:
        other.execute('BEGIN IMMEDIATE')
        assert engine.run_read(lambda conn: conn.execute(
            sa.select(_COUNTER.c.value)).scalar()) == start
    finally:
        other.rollback()
        other.close()


def test_a_forked_child_never_uses_its_parents_connections(inventory):
    eng = engine.get_engine()
    with eng.connect() as conn:
        # Held, so that the child cannot find a new one at its address.
        parent = conn.connection.dbapi_connection
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            with eng.connect() as conn:
                child = conn.connection.dbapi_connection
                conn.execute(sa.select(_COUNTER.c.value)).scalar()
            os.write(write, b'new' if child is not parent else b'shared')
        except BaseException as e:
            os.write(write, repr(e).encode())
        finally:
            os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    with os.fdopen(read, 'rb') as answer:
        assert answer.read() == b'new'


def test_one_engine_holds_the_whole_budget(inventory):
    # No database work runs on a native thread (``run_native`` is for
    # leaf work): one pool holds the worker's whole connection budget.
    engine.reset_engine()
    budget = engine.connection_budget()
    assert engine.get_engine().pool.size() == engine.pool_sizes(budget)[0]
    engine.reset_engine()
