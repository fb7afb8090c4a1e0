"""The runtime's process-wide fixes, checked in a process of their own.

Each check runs a small script in a fresh interpreter: monkey patching
and ``os.fork`` hooks cannot be undone in the test process.
"""

import os
import subprocess
import sys
import threading
import time

from scheduler import concurrency
from scheduler import service

#: oslo.log set up under eventlet as scheduler-service does it; a
#: forked child dies with SIGKILL while it holds the log handler's lock
#: (a worker killed in the middle of a log line); then the parent tries
#: to take that lock.
WORKER_KILLED_MID_LINE = '''
import os, signal, sys
from scheduler import concurrency
concurrency.monkey_patch()
import logging
from oslo_config import cfg
from oslo_log import log
log.register_options(cfg.CONF)
cfg.CONF([], project='scheduler-test')
log.setup(cfg.CONF, 'scheduler-test')
handler = logging.getLogger().handlers[0]
if sys.argv[1] == 'renew':
    concurrency.own_log_locks_after_fork()
pid = os.fork()
if pid == 0:
    handler.lock.acquire()
    os.kill(os.getpid(), signal.SIGKILL)
os.waitpid(pid, 0)
free = handler.lock.acquire(blocking=False)
print(type(handler.lock).__name__, free, flush=True)
# Without the lock, exiting (logging.shutdown) would wait for ever.
os._exit(0)
'''


def _parent_after_killed_child(mode: str) -> list:
    env = dict(os.environ)
    env.pop(concurrency.NO_PATCH_ENV, None)
    done = subprocess.run(
        [sys.executable, '-c', WORKER_KILLED_MID_LINE, mode], env=env,
        capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_a_worker_killed_mid_log_line_blocks_no_other_process():
    """Each forked worker logs under its own lock.

    oslo.log's pipe lock was shared by the parent and every worker: a
    worker killed with SIGKILL while writing a line froze them all
    (the parent then ignored SIGTERM).
    """
    assert _parent_after_killed_child('renew') == ['_ReallyPipeMutex',
                                                   'True']


def test_without_renewal_the_lock_is_shared_across_fork():
    """What the fix is for: oslo.log alone leaves the lock shared.

    When this fails, oslo.log renews its locks in forked children and
    ``own_log_locks_after_fork`` may go.
    """
    assert _parent_after_killed_child('keep') == ['_ReallyPipeMutex',
                                                  'False']


def test_the_launcher_forks_only_after_renewal_is_set_up(monkeypatch):
    calls = []
    monkeypatch.setattr(concurrency, 'own_log_locks_after_fork',
                        lambda: calls.append('renew'))
    monkeypatch.setattr(service.service, 'launch',
                        lambda *args, **kwargs: calls.append('launch'))
    service.launch(object(), workers=2)
    assert calls == ['renew', 'launch']


def _yields(monkeypatch, since_last_switch: float,
            slice_begins: bool) -> int:
    """How often a first safe point gives the CPU away under eventlet,
    ``since_last_switch`` seconds after another green thread's yield."""
    slept = []
    monkeypatch.setattr(concurrency, '_patched', True)
    monkeypatch.setattr(concurrency.time, 'sleep', slept.append)
    monkeypatch.setattr(concurrency, '_last_switch',
                        [concurrency.time.monotonic() - since_last_switch])
    if slice_begins:
        concurrency.slice_begins()
    concurrency.cooperative_yield()
    return len(slept)


def test_a_new_call_does_not_yield_at_its_first_safe_point(monkeypatch):
    # The slice another green thread used up is not the new call's.
    assert _yields(monkeypatch, 1.0, slice_begins=True) == 0


def test_a_green_thread_that_held_the_cpu_for_its_slice_yields(monkeypatch):
    assert _yields(monkeypatch, concurrency._SLICE, slice_begins=False) == 1


def test_slice_begins_does_nothing_without_eventlet(monkeypatch):
    monkeypatch.setattr(concurrency, '_patched', False)
    monkeypatch.setattr(concurrency, '_last_switch', [0.0])
    concurrency.slice_begins()
    assert concurrency._last_switch == [0.0]


def _queue_behind(turns, name: str, order: list) -> threading.Thread:
    """A thread that takes a turn, notes ``name``, and gives it back;
    returned once it waits."""
    def take():
        with turns.turn():
            order.append(name)

    waiting = len(turns._waiting)
    thread = threading.Thread(target=take)
    thread.start()
    deadline = time.monotonic() + 10
    while len(turns._waiting) == waiting:
        assert time.monotonic() < deadline, '%s never queued' % name
        time.sleep(0.001)
    return thread


def test_turns_are_taken_in_the_order_requests_came():
    turns = concurrency.Turns(1)
    order: list = []
    with turns.turn():
        threads = [_queue_behind(turns, name, order)
                   for name in ('first', 'second', 'third')]
    for thread in threads:
        thread.join(10)
    assert order == ['first', 'second', 'third']


def test_a_long_turn_lets_the_waiting_go_first_then_comes_back():
    turns = concurrency.Turns(1)
    order: list = []
    with turns.turn() as turn:
        order.append('long, first instance')
        short = _queue_behind(turns, 'short', order)
        # Within its slice a request keeps its turn.
        turn._since = time.monotonic()
        turn.pass_if_due()
        assert order == ['long, first instance']
        turn._since -= concurrency._SLICE
        turn.pass_if_due()
        order.append('long, second instance')
    short.join(10)
    assert order == ['long, first instance', 'short',
                     'long, second instance']


def test_no_one_waiting_no_turn_given_up():
    turns = concurrency.Turns(1)
    with turns.turn() as turn:
        turn._since -= 10 * concurrency._SLICE
        turn.pass_if_due()
        assert turns._free == 0 and not turns._waiting
    assert turns._free == 1
