"""Intake reports and the usage they carry, written in one transaction,
on PostgreSQL and MariaDB.

A busy fleet's reports change every node's report and usage; the worker
that takes them writes a write window's in one transaction, a statement
a table where the server can, and reads the usage back in it.
"""

import datetime
import logging
import warnings

import pytest

from scheduler.db import api
from scheduler.db import usage
from scheduler import host_manager
from scheduler import host_view
from scheduler import report_writer
from tests.functional.db import statement_log
from tests.unit.db import test_report_write
from tests.unit import fixtures

T0 = datetime.datetime(2026, 1, 1)


def test_reports_and_their_usage_are_written_and_read_back(db_server):
    test_report_write.write_reports_with_usage()


def _batch(names, used, at):
    return ([{'host': name, 'nodename': name, 'uuid': None,
              'disabled': False, 'updated_at': at,
              'report': {'used': used}} for name in names],
            [usage.NodeReport(name, name, used, 1, 2, 0, at, frozenset())
             for name in names])


def test_a_busy_batch_is_one_transaction_of_a_statement_a_step(postgresql):
    names = ['n%02d' % n for n in range(40)]
    api.host_reports_save_with_usage(*_batch(names, 0, T0))
    with statement_log.StatementLog() as driver:
        written = api.host_reports_save_with_usage(*_batch(
            names, 512, T0 + datetime.timedelta(seconds=1)))
    words = [' '.join(s.split()[:3]) for s in driver.statements]
    # The usage rows locked, the pending and the settled placements
    # read, the usage rows written (and returned), the report number
    # taken, the hosts rows locked and written: no read after.
    assert words == [
        'SELECT node_usage.id, node_usage.host,',
        'SELECT instances.instance_uuid, instances.host,',
        'SELECT instances.instance_uuid, instances.host,',
        'UPDATE node_usage SET',
        'UPDATE usage_counter SET',
        'SELECT hosts.id, hosts.host,',
        'UPDATE hosts SET'], driver.statements
    assert driver.commits == 1
    assert sorted(r['reported_memory_mb'] for r in written.applied.rows) \
        == [512] * 40
    assert {r['report']['used'] for r in api.host_reports_get_all()} == \
        {512}


@pytest.mark.parametrize('shared', [False, True], ids=['flush', 'intake'])
def test_a_report_postgresql_refuses_is_dropped_alone(
        postgresql, caplog, shared):
    """A node uuid longer than its column, in a batch of the periodic
    flush or of the intake: PostgreSQL refuses that row, and with it
    the transaction; the batch is written again in parts, every other
    report and its usage is stored, and the refused one is dropped with
    one ERROR line, not retried with the batch at every flush."""
    manager = host_manager.HostManager()
    names = ['n1', 'n2', 'n3', 'n4']
    for name in names:
        report = fixtures.report(name, memory_mb_used=256)
        if name == 'n2':
            with warnings.catch_warnings():
                warnings.simplefilter('ignore', FutureWarning)  # no UUID
                report.uuid = 'x' * 100
        if shared:
            view = host_view.HostView(report)
            # As a writing thread killed by a stop leaves them: one
            # batch.
            manager._writer._waiting[view.key()] = report_writer.Taken(
                view.key(), view, host_manager._node_report(view))
        else:
            manager.update_from_report(report)
    manager.flush()
    manager.flush()
    assert [r['host'] for r in api.host_reports_get_all()] == \
        ['n1', 'n3', 'n4']
    assert sorted((r['host'], r['reported_memory_mb'])
                  for r in usage.usage_get_all()) == [
        ('n1', 256), ('n3', 256), ('n4', 256)]
    errors = [r.getMessage() for r in caplog.records
              if r.levelno >= logging.ERROR]
    assert len(errors) == 1, errors
    assert 'n2/n2' in errors[0] and 'character varying(36)' in errors[0]
    # Nor does the worker place on it.
    assert sorted(s.host for s in manager.get_all_host_states()) == \
        ['n1', 'n3', 'n4']
