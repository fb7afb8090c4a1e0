"""Workers writing the first reports of their nodes at once do not
deadlock.

At start-up every worker writes the first reports it took, which create
the nodes' usage rows.  Their keys interleave: worker A took h00, h02,
..., worker B h01, h03, ...  On MariaDB (REPEATABLE READ) a batch's
locking read of its nodes' usage rows (``usage._locking_read``) found
no row for a new node and locked the gap where it would go instead: the
same gaps for both batches (gap locks do not exclude each other), and
each batch's INSERT then waited for the other's gap lock.  InnoDB
killed one of them (the soak saw 1 to 3 such deadlocks a run, retried
by ``retry_on_conflict``).

The test makes both batches reach their first INSERT of usage rows
before either goes on, and requires that no statement deadlocked.
"""

import datetime
import threading

import sqlalchemy as sa

from scheduler.db import api
from scheduler.db import usage

T0 = datetime.datetime(2026, 1, 1)
#: Seconds a batch waits for the other at its first usage INSERT.
MEET = 5


def _batch(names: list) -> tuple:
    return ([{'host': name, 'nodename': name, 'uuid': None,
              'disabled': False, 'updated_at': T0, 'report': {}}
             for name in names],
            [usage.NodeReport(name, name, 0, 0, 0, 0, T0, frozenset())
             for name in names])


def _deadlock(error: BaseException) -> bool:
    return 'deadlock' in str(error).lower()


def _write_together(batches: list) -> list:
    """Write ``batches`` (``_batch``) in threads of their own, each
    held at its first INSERT of usage rows until the others reach
    theirs (or ``MEET`` seconds); the deadlocks the database reported
    meanwhile, retried or not."""
    engine = api.get_engine()
    meet = threading.Barrier(len(batches), timeout=MEET)
    waited = set()
    deadlocks: list = []
    errors: list = []

    def before(conn, cursor, statement, params, context, many):
        me = threading.get_ident()
        if statement.startswith('INSERT INTO node_usage') and \
                me not in waited:
            waited.add(me)
            try:
                meet.wait()
            except threading.BrokenBarrierError:
                pass   # the other one waits for a lock of this one

    def failed(context):
        if _deadlock(context.original_exception):
            deadlocks.append(str(context.original_exception))

    def write(batch):
        try:
            api.host_reports_save_with_usage(*batch)
        except Exception as e:  # the test's assertion reports it
            errors.append(e)

    sa.event.listen(engine, 'before_cursor_execute', before)
    sa.event.listen(engine, 'handle_error', failed)
    try:
        threads = [threading.Thread(target=write, args=(batch,))
                   for batch in batches]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    finally:
        sa.event.remove(engine, 'before_cursor_execute', before)
        sa.event.remove(engine, 'handle_error', failed)
    assert not any(thread.is_alive() for thread in threads)
    assert errors == []
    return deadlocks


def test_two_workers_first_reports_do_not_deadlock(db_server):
    names = ['h%02d' % n for n in range(20)]
    deadlocks = _write_together([_batch(names[0::2]), _batch(names[1::2])])
    assert deadlocks == []
    assert sorted(row['host'] for row in usage.usage_get_all()) == names
    assert sorted(row['host'] for row in api.host_reports_get_all()) == \
        names


def test_new_nodes_among_known_ones_do_not_deadlock(db_server):
    """Later, new nodes come into gaps between known ones."""
    known = ['h%02d' % n for n in range(0, 40, 4)]
    api.host_reports_save_with_usage(*_batch(known))
    new = ['h%02d' % n for n in range(40) if n % 4]
    deadlocks = _write_together([_batch(new[0::2]), _batch(new[1::2])])
    assert deadlocks == []
    assert sorted(row['host'] for row in usage.usage_get_all()) == \
        sorted(known + new)


def test_the_same_new_nodes_written_twice_do_not_deadlock(db_server):
    """Two workers with the same nodes' first reports (a report
    redelivered to another worker, a claim's row)."""
    names = ['h%02d' % n for n in range(10)]
    deadlocks = _write_together([_batch(names), _batch(names)])
    assert deadlocks == []
    assert sorted(row['host'] for row in usage.usage_get_all()) == names
