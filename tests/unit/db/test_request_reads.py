"""The reads a worker makes before a request (the reports other workers
wrote, the usage rows and pending claims of changed nodes) are plain
reads: no transaction of their own, so on SQLite they neither take nor
wait for the write lock, and on PostgreSQL they cost no BEGIN/COMMIT.
"""

import datetime
import sqlite3

import pytest
import sqlalchemy as sa

from scheduler.db import engine
from scheduler.db import hosts
from scheduler.db import usage
from tests.unit import fixtures

T0 = datetime.datetime(2026, 11, 1, 12, 0, 0)


@pytest.fixture
def stored(inventory):
    """Node h1/h1 with a report, a usage row and one pending claim; the
    pool's connections fail at once on a lock (no 30 s busy wait)."""
    hosts.host_reports_save([{
        'host': 'h1', 'nodename': 'h1', 'uuid': None, 'disabled': False,
        'updated_at': T0, 'report': {'host': 'h1', 'free_ram_mb': 10}}])
    usage.apply_reports([usage.NodeReport(
        'h1', 'h1', memory_mb_used=0, vcpus_used=0, local_gb_used=0,
        num_instances=0, updated_at=T0, instance_uuids=frozenset())])
    usage.claim(usage.ClaimRequest(fixtures.uuid(1), 'h1', 'h1', 512, 1, 1))

    @sa.event.listens_for(engine.get_engine(), 'checkout')
    def no_wait(dbapi_connection, _record, _proxy):
        dbapi_connection.execute('PRAGMA busy_timeout = 0')
    yield
    sa.event.remove(engine.get_engine(), 'checkout', no_wait)


@pytest.fixture
def write_locked(stored):
    """Another connection holds SQLite's write lock meanwhile."""
    other = sqlite3.connect(engine.get_engine().url.database,
                            isolation_level=None)
    other.execute('BEGIN IMMEDIATE')
    yield
    other.rollback()
    other.close()


def test_reports_of_nodes_are_read_while_another_writer_holds_the_lock(
        write_locked):
    [row] = hosts.host_reports_get([('h1', 'h1'), ('h2', 'h2')])
    assert (row['host'], row['nodename']) == ('h1', 'h1')
    assert row['report'] == {'host': 'h1', 'free_ram_mb': 10}
    assert row['updated_at'] == T0 and row['disabled'] is False


def test_usage_rows_of_nodes_are_read_while_another_writer_holds_the_lock(
        write_locked):
    [row] = usage.usage_get_nodes([('h1', 'h1'), ('h2', 'h2')])
    assert (row['claimed_memory_mb'], row['claimed_instances']) == (512, 1)


def test_pending_claims_of_nodes_are_read_while_another_writer_holds_it(
        write_locked):
    [claim] = usage.pending_claims([('h1', 'h1'), ('h2', 'h2')])
    assert claim['instance_uuid'] == fixtures.uuid(1)
    assert claim['pending'] is True
    assert (claim['numa'], claim['pci']) == ([], [])


def test_reads_of_no_node_send_nothing(stored):
    sent = []
    sa.event.listen(engine.get_engine(), 'before_cursor_execute',
                    lambda *a: sent.append(a[2]))
    assert hosts.host_reports_get([]) == []
    assert usage.usage_get_nodes([]) == []
    assert usage.pending_claims([]) == []
    assert sent == []


def test_nodes_of_a_host_not_asked_for_are_left_out(stored):
    usage.claim(usage.ClaimRequest(fixtures.uuid(2), 'h1', 'h1-other',
                                   256, 1, 1, reported={}))
    assert [c['instance_uuid'] for c in usage.pending_claims(
        [('h1', 'h1')])] == [fixtures.uuid(1)]
    assert [c['nodename'] for c in usage.pending_claims(
        [('h1', 'h1-other')])] == ['h1-other']
