"""The owners of shared state guard it with ``concurrency.native_lock``.

test_concurrency.py shows what the lock itself does; these show that
the owners use it: replacing one owner's lock with a no-op (or
``native_lock`` with one that excludes nothing) passed every test of
the owners (issue 24).  Choreographies, not timing: a section is
stopped from inside (through the liveness clock it reads) and the lock
is tried from another thread meanwhile.
"""

import threading
import time

import pytest

from scheduler import columns
from scheduler import concurrency
from scheduler.db import availability
from scheduler import group_commit
from scheduler import replies
from scheduler import report_lag
from scheduler import report_writer
from scheduler.resources import liveness
from tests.unit import fixtures


def _tried_while_inside(section, lock) -> bool:
    """Run ``section`` in a thread, stop it where it reads the liveness
    clock, and try ``lock`` from this thread meanwhile: whether it was
    taken."""
    inside, go = threading.Event(), threading.Event()
    runner: dict = {}

    def clock() -> float:
        if threading.get_ident() == runner.get('ident'):
            inside.set()
            go.wait(30)
        return time.time()

    def run():
        runner['ident'] = threading.get_ident()
        section()

    liveness.set_clock(clock)
    thread = threading.Thread(target=run)
    try:
        thread.start()
        assert inside.wait(30), 'the section never read the clock'
        taken = lock.acquire(blocking=False)
        if taken:
            lock.release()
    finally:
        go.set()
        thread.join(30)
        liveness.set_clock(None)
    assert not thread.is_alive()
    return taken


def test_the_host_manager_holds_its_lock_while_it_marks_hosts_down():
    # Fails if HostManager's lock, or native_lock, excludes nothing.
    manager = fixtures.manager_with([fixtures.report('h1')])
    assert not _tried_while_inside(manager.check_down_hosts, manager._lock)


def test_the_report_lag_holds_its_lock_while_it_hears_a_lag():
    lag = report_lag.ReportLag()
    assert not _tried_while_inside(lambda: lag.hear(1.0), lag._lock)


def test_a_lock_another_thread_holds_is_not_taken():
    # The helper itself: a section that holds nothing is seen as such.
    lock = concurrency.native_lock()
    assert _tried_while_inside(liveness.now, lock)


@pytest.mark.parametrize('make', [
    lambda: fixtures.manager_with(),
    lambda: columns.ColumnStore(),
    lambda: report_lag.ReportLag(),
    lambda: group_commit.GroupCommit(lambda items: items),
    lambda: report_writer.ReportWriter(lambda taken: None,
                                       lambda a, b: True),
    lambda: availability._Outage(),
    lambda: replies._LongWaits(),
], ids=['HostManager', 'ColumnStore', 'ReportLag', 'GroupCommit',
        'ReportWriter', 'availability', 'replies'])
def test_each_owner_guards_its_state_with_a_native_lock(make):
    """An owner whose lock is swapped for a no-op (a ``nullcontext``, a
    plain ``threading`` lock a green thread cannot share with a native
    one) fails here."""
    owner = make()
    assert type(owner._lock) is type(concurrency.native_lock())
