"""The inventory engine's transactions on the SQLite driver's own
connection (``engine.run_in_transaction``), and their way back to
SQLAlchemy."""

import gc
import sqlite3
import threading
import weakref

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
    engine.execute_compiled(conn, sa.update(_COUNTER).values(
        value=_COUNTER.c.value + 1), {})


def test_work_is_committed_on_the_driver_connection(inventory):
    seen = []

    def work(conn):
        seen.append(type(conn).__name__)
        _bump(conn)
        return 'done'

    start = _value()
    assert engine.run_in_transaction(work) == 'done'
    assert seen == ['_DriverConnection']
    assert _value() == start + 1


def test_a_driver_error_runs_the_work_again_through_sqlalchemy(inventory):
    seen = []

    def work(conn):
        seen.append(type(conn).__name__)
        _bump(conn)
        if len(seen) == 1:
            raise sqlite3.OperationalError('as if the disk said no')
        return len(seen)

    start = _value()
    assert engine.run_in_transaction(work) == 2
    assert seen == ['_DriverConnection', 'Connection']
    # The first run's change was rolled back: one bump in all.
    assert _value() == start + 1


def test_a_statement_only_sqlalchemy_runs_goes_there(inventory):
    seen = []

    def work(conn):
        seen.append(type(conn).__name__)
        _bump(conn)
        return conn.execute(sa.select(_COUNTER.c.value)).scalar()

    start = _value()
    assert engine.run_in_transaction(work) == start + 1
    assert seen == ['_DriverConnection', 'Connection']


def test_a_duplicate_key_is_oslo_dbs_error_and_nothing_is_kept(inventory):
    table = models.Instance.__table__
    stmt = sa.insert(table).values(
        {c.name: sa.bindparam(c.name) for c in table.columns})
    row = {c.name: None for c in table.columns}
    row.update(instance_uuid='u1', host='h', nodename='h', memory_mb=1,
               vcpus=1, disk_gb=1, status='claimed', pending=True)

    def work(conn):
        _bump(conn)
        engine.insert_many(conn, stmt, [row, dict(row)])

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


def test_the_driver_connection_is_freed_without_the_garbage_collector():
    conn = engine._DriverConnection(None, None)
    assert conn.connection.connection is conn
    gone = weakref.ref(conn)
    gc.disable()
    try:
        del conn
        assert gone() is None
    finally:
        gc.enable()
