"""The usage of changed reports written on PostgreSQL.

A busy fleet's reports change every node's usage row; a worker writes
those of a write window in one statement.  That statement's text must
not depend on the rows: a text made of the rows' values was compiled
again, each value rendered by the client, for every batch.
"""

import datetime

from scheduler.db import usage
from tests.functional.db import statement_log

T0 = datetime.datetime(2026, 1, 1)


def _reports(names, used, at, least=None):
    return [usage.NodeReport(name, name, used, 1, 2, 0, at, frozenset(),
                             disk_available_least=least)
            for name in names]


def _rows():
    return {(r['host'], r['nodename']): r for r in usage.usage_get_all()}


def _updates(driver):
    return [s for s in driver.statements if s.startswith('UPDATE node_usage')]


def test_batches_of_any_size_are_written_by_one_statement_text(postgresql):
    names = ['n%d' % n for n in range(7)]
    usage.apply_reports(_reports(names, 0, T0))
    with statement_log.StatementLog() as driver:
        usage.apply_reports(_reports(names[:2], 512,
                                     T0 + datetime.timedelta(seconds=1)))
        usage.apply_reports(_reports(names, 1024,
                                     T0 + datetime.timedelta(seconds=2),
                                     least=50))
    updates = _updates(driver)
    assert len(updates) == 2, driver.statements
    assert updates[0] == updates[1]
    rows = _rows()
    assert {rows[(n, n)]['reported_memory_mb'] for n in names} == {1024}
    assert {rows[(n, n)]['reported_disk_least'] for n in names} == {50}
    assert {rows[(n, n)]['reported_at'] for n in names} == \
        {T0 + datetime.timedelta(seconds=2)}


def test_a_batch_that_measured_no_disk_writes_nulls(postgresql):
    usage.apply_reports(_reports(['a', 'b'], 0, T0, least=10))
    seqs = {key: row['seq'] for key, row in _rows().items()}
    usage.apply_reports(_reports(['a', 'b'], 256,
                                 T0 + datetime.timedelta(seconds=1)))
    rows = _rows()
    assert [rows[k]['reported_disk_least'] for k in sorted(rows)] == \
        [None, None]
    assert [rows[k]['reported_memory_mb'] for k in sorted(rows)] == \
        [256, 256]
    # Each row changed takes a new sequence number of its own.
    assert all(rows[k]['seq'] > seqs[k] for k in rows)
    assert len({rows[k]['seq'] for k in rows}) == 2
