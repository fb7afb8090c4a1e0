"""Report turns: which workers of a service consume the report queues
(``scheduler.report_consumers``, ``[scheduler] report_workers``).

Each ``Turns`` object opens its files on its own, as a worker process
does, so two of them in one process contend for the locks as two
workers would.  The release by the kernel of a killed holder's lock is
checked with a real process killed by SIGKILL.
"""

import datetime
import os
import signal
import subprocess
import sys
import threading

import pytest

from scheduler import report_consumers
from scheduler import report_lag
from scheduler.resources import liveness


def _turns(tmp_path, slots=1, name='sched@host-a'):
    turns = report_consumers.Turns(str(tmp_path / 'turns'), name, slots)
    turns.prepare()
    return turns


def test_one_turn_goes_to_one_worker_until_it_lets_go(tmp_path):
    first, second = _turns(tmp_path), _turns(tmp_path)
    assert first.take() and first.held and first.slot == 0
    assert not second.take() and not second.held
    # Taking again changes nothing for the holder.
    assert first.take() and first.slot == 0
    first.release()
    assert not first.held
    assert second.take() and second.slot == 0
    second.release()


def test_as_many_consumers_as_turns(tmp_path):
    workers = [_turns(tmp_path, slots=2) for _ in range(4)]
    took = [turns.take() for turns in workers]
    assert took == [True, True, False, False]
    assert {workers[0].slot, workers[1].slot} == {0, 1}
    freed = workers[0].slot
    workers[0].release()
    assert workers[3].take() and workers[3].slot == freed
    assert not workers[2].take()
    for turns in workers:
        turns.release()


def test_services_sharing_a_state_directory_have_their_own_turns(
        tmp_path):
    mine = _turns(tmp_path, name=report_consumers.service_name('s', 'a'))
    theirs = _turns(tmp_path, name=report_consumers.service_name('s', 'b'))
    assert mine.take() and theirs.take()
    mine.release()
    theirs.release()


def test_a_service_name_is_one_file_name():
    name = report_consumers.service_name('sched/x', '../host name')
    assert '/' not in name and ' ' not in name


HOLDER = r'''
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
print('held', flush=True)
time.sleep(120)
'''


def test_the_turn_of_a_worker_killed_by_sigkill_is_free(tmp_path):
    turns = _turns(tmp_path)
    holder = subprocess.Popen([sys.executable, '-c', HOLDER,
                               turns.path(0)], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout.readline().strip() == 'held'
        assert not turns.take()
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(10)
        assert turns.take()
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(10)
        holder.stdout.close()
        turns.release()


def test_a_forked_child_does_not_hold_the_turn_after_exec(tmp_path):
    """The lock file is not inherited: a program the worker runs does
    not keep its turn after the worker ends."""
    turns = _turns(tmp_path)
    assert turns.take()
    fd = turns._fd
    assert not os.get_inheritable(fd)
    turns.release()


def test_a_directory_that_cannot_be_made_is_an_oserror(tmp_path):
    blocker = tmp_path / 'file'
    blocker.write_text('')
    turns = report_consumers.Turns(str(blocker / 'turns'), 'x', 1)
    with pytest.raises(OSError):
        turns.prepare()


def test_no_turn_at_all_is_refused(tmp_path):
    with pytest.raises(ValueError):
        report_consumers.Turns(str(tmp_path), 'x', 0)


def test_the_others_hear_the_lag_the_holders_publish(tmp_path,
                                                     monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(liveness, 'clock', lambda: clock[0])
    holders = [_turns(tmp_path, slots=2) for _ in range(2)]
    other = _turns(tmp_path, slots=2)
    assert other.heard(stale_after=60)[0] is None
    for turns in holders:
        assert turns.take()
    holders[0].publish_lag(12.5)
    holders[1].publish_lag(3.0)
    assert other.heard(stale_after=60)[0] == 12.5
    # A shorter figure over a longer one leaves nothing of the longer.
    holders[0].publish_lag(0.25)
    assert other.heard(stale_after=60)[0] == 3.0
    clock[0] += 61
    assert other.heard(stale_after=60)[0] is None
    for turns in holders:
        turns.release()


def test_the_others_hear_when_the_holders_last_heard(tmp_path, monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(liveness, 'clock', lambda: clock[0])
    holders = [_turns(tmp_path, slots=2) for _ in range(2)]
    other = _turns(tmp_path, slots=2)
    assert other.heard(stale_after=60) == (None, None)
    for turns in holders:
        assert turns.take()
    holders[0].publish_lag(1.0, heard_at=990.0)
    holders[1].publish_lag(2.0, heard_at=995.5)
    assert other.heard(stale_after=60) == (2.0, 995.5)
    # A holder that says nothing of it.
    holders[1].publish_lag(2.0)
    assert other.heard(stale_after=60) == (2.0, 990.0)
    clock[0] += 61
    assert other.heard(stale_after=60) == (None, None)
    for turns in holders:
        turns.release()


def test_a_record_of_an_older_holder_says_no_hearing_time(tmp_path,
                                                          monkeypatch):
    monkeypatch.setattr(liveness, 'clock', lambda: 1000.0)
    other = _turns(tmp_path)
    with open(other.path(0), 'w') as f:
        f.write('%20.3f %20.3f\n' % (3.0, 999.0))
    assert other.heard(stale_after=60) == (3.0, None)
    assert other.heard(stale_after=60)[0] == 3.0


def test_a_worker_without_reports_takes_the_lag_it_heard(monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(liveness, 'clock', lambda: clock[0])
    lag = report_lag.ReportLag()
    assert lag.current(stale_after=60) == 0.0
    lag.hear(20.0)
    assert lag.current(stale_after=60) == 20.0
    clock[0] += 61
    assert lag.current(stale_after=60) == 0.0
    # Its own figure comes first while it takes reports.
    lag.hear(20.0)
    lag.note(datetime.datetime.fromtimestamp(clock[0] - 2.0,
                                             datetime.timezone.utc))
    assert lag.current(stale_after=60) == pytest.approx(2.0, abs=0.01)


def test_take_and_release_from_threads_at_once(tmp_path):
    """The timer (a green or native thread) and ``stop()`` may meet:
    the turn is released once, the file descriptor closed once."""
    turns = _turns(tmp_path)
    assert turns.take()
    errors = []

    def release():
        try:
            turns.release()
        except Exception as e:  # pragma: no cover - the failure
            errors.append(e)
    threads = [threading.Thread(target=release) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert not errors and not turns.held
