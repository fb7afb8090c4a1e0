"""The runtime's process-wide fixes, checked in a process of their own.

Each check runs a small script in a fresh interpreter: monkey patching
and ``os.fork`` hooks cannot be undone in the test process.
"""

import gc
import os
import subprocess
import sys
import threading
import time
import types

import pytest

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


class _Launchers:
    """Records the launchers ``service.launch`` builds (none forks)."""

    def __init__(self, monkeypatch, calls: list):
        self.built = []
        launchers = self

        class ProcessLauncher:
            def __init__(self, conf, wait_interval=0.01,
                         restart_method='reload'):
                calls.append('launch')
                launchers.built.append(('process', wait_interval))

            def launch_service(self, server, workers=1):
                pass

        def launch(conf, server, workers=1, restart_method='reload'):
            calls.append('launch')
            # oslo.service's own: a ProcessLauncher of its default wait.
            self.built.append(('process' if workers > 1 else 'service',
                               0.01))
        monkeypatch.setattr(service.service, 'ProcessLauncher',
                            ProcessLauncher)
        monkeypatch.setattr(service.service, 'launch', launch)


def test_the_launcher_forks_only_after_renewal_is_set_up(monkeypatch):
    calls = []
    monkeypatch.setattr(concurrency, 'own_log_locks_after_fork',
                        lambda: calls.append('renew'))
    _Launchers(monkeypatch, calls)
    service.launch(types.SimpleNamespace(binary='scheduler-service'),
                   workers=2)
    assert calls == ['renew', 'launch']


def test_the_launcher_of_several_workers_does_not_poll_them_constantly(
        monkeypatch):
    """oslo.service's parent process looks for a dead worker every
    10 ms by default: that is more CPU than an idle worker spends.  A
    dead worker is forked again, and a signal to the service acted on,
    within ``CHILD_WATCH_EVERY`` instead."""
    launchers = _Launchers(monkeypatch, [])
    monkeypatch.setattr(concurrency, 'EXECUTOR', concurrency.EVENTLET)
    service.launch(types.SimpleNamespace(binary='scheduler-service'),
                   workers=4)
    (kind, wait), = launchers.built
    assert kind == 'process' and wait >= 0.1
    # One worker runs in the launching process: nothing to watch.
    service.launch(types.SimpleNamespace(binary='scheduler-service'),
                   workers=1)
    assert launchers.built[1][0] == 'service'


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


def test_a_request_given_its_turn_does_not_yield_at_its_first_safe_point(
        monkeypatch):
    # It waited for the turn (and for the database before): the slice
    # spent meanwhile is not its own.  Yielding there held the turn
    # through a whole trip of the hub, every request behind it waiting.
    slept = []
    monkeypatch.setattr(concurrency, '_patched', True)
    monkeypatch.setattr(concurrency.time, 'sleep', slept.append)
    monkeypatch.setattr(concurrency, '_last_switch',
                        [concurrency.time.monotonic() - 1.0])
    turns = concurrency.Turns(1)
    with turns.turn():
        concurrency.cooperative_yield()
    assert slept == []


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


#: Under eventlet, as scheduler-service runs: a green thread waits on a
#: green lock that native work holds and releases (argv[1] says how the
#: work is run: ``tpool`` as the service once did, or ``run_native``);
#: prints whether the green thread got the lock, what the work raised,
#: and where its log line was written.
NATIVE_WORK_TOUCHES_A_GREEN_LOCK = '''
import sys, threading
from scheduler import concurrency
concurrency.monkey_patch()
import eventlet
from eventlet import tpool
import logging
class Where(logging.Handler):
    def emit(self, record):
        print('written on', threading.current_thread().name, flush=True)

logging.getLogger().addHandler(Where())
LOG = logging.getLogger('work')
lock = threading.Lock()
got = []

native = eventlet.patcher.original('threading')
held, let_go = native.Event(), native.Event()

def waiter():
    got.append(lock.acquire(timeout=3))

def work():
    lock.acquire()
    held.set()
    LOG.warning('logged by the work')
    let_go.wait(30)
    lock.release()

def run_work():
    try:
        if sys.argv[1] == 'tpool':
            tpool.execute(work)
        else:
            concurrency.run_native(work)
        print('work: done')
    except Exception as e:
        print('work:', type(e).__name__)

worker = eventlet.spawn(run_work)
while not held.is_set():  # until the work holds the lock
    eventlet.sleep(0.01)
waiting = eventlet.spawn(waiter)
eventlet.sleep(0)  # the waiter runs until it waits for the lock
let_go.set()
waiting.wait()
worker.wait()
print('green thread got the lock:', got[0])
'''


def _native_work(how: str) -> list:
    env = dict(os.environ)
    env.pop(concurrency.NO_PATCH_ENV, None)
    done = subprocess.run(
        [sys.executable, '-c', NATIVE_WORK_TOUCHES_A_GREEN_LOCK, how],
        env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_native_work_that_touches_a_green_lock_fails_loudly():
    """run_native work that holds a green lock a green thread waits on
    raises NativeThreadError when it releases it (the green thread is
    still stranded: such work must not exist, and now cannot go
    unnoticed); its log line is written after the work, by the green
    thread that ran it."""
    lines = _native_work('run_native')
    assert 'work: NativeThreadError' in lines, lines
    # By the green thread that ran the work, not the native one.
    assert any(line.startswith('written on GreenThread') for line in lines), \
        lines


def test_tpool_work_that_touches_a_green_lock_strands_a_green_thread():
    """What run_native is for: the green thread waiting on the lock is
    never woken (until its timeout here; for ever in a ``with lock``),
    and nothing says why."""
    lines = _native_work('tpool')
    assert 'written on tpool_thread_0' in lines, lines
    assert 'work: done' in lines, lines
    assert 'green thread got the lock: False' in lines, lines


#: Under eventlet: native work waits for a green lock that a green
#: thread holds, and the green thread lets it go (argv[1]: ``tpool``, as
#: the service's database batches once did, or ``run_native``).
NATIVE_WORK_WAITS_FOR_A_GREEN_LOCK = '''
import os, sys, threading
from scheduler import concurrency
concurrency.monkey_patch()
import eventlet
from eventlet import tpool
lock = threading.Lock()

def work():
    with lock:
        return 'got the lock'

def run_work():
    try:
        if sys.argv[1] == 'tpool':
            print('work:', tpool.execute(work), flush=True)
        else:
            print('work:', concurrency.run_native(work), flush=True)
    except Exception as e:
        print('work:', type(e).__name__, flush=True)

lock.acquire()
worker = eventlet.spawn(run_work)
eventlet.sleep(0.3)  # the work waits for the lock meanwhile
lock.release()
with eventlet.Timeout(5, False):
    worker.wait()
print('caller went on:', worker.dead, flush=True)
os._exit(0)
'''


def _native_wait(how: str):
    env = dict(os.environ)
    env.pop(concurrency.NO_PATCH_ENV, None)
    done = subprocess.run(
        [sys.executable, '-c', NATIVE_WORK_WAITS_FOR_A_GREEN_LOCK, how],
        env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines(), done.stderr


def test_tpool_work_that_waits_for_a_green_lock_freezes_its_caller():
    """The freeze of issue 29, item 1, reproduced: the green thread
    that lets the lock go wakes the native waiter from the hub, which
    cannot switch to another OS thread's greenlet (``greenlet.error``
    from eventlet's ``semaphore._do_acquire``); the work never ends,
    nor does the green thread that waits for it."""
    lines, errors = _native_wait('tpool')
    assert 'greenlet.error: Cannot switch to a different thread' in errors
    assert '_do_acquire' in errors
    assert 'caller went on: False' in lines, lines


def test_run_native_work_that_waits_for_a_green_lock_fails_loudly():
    """Through ``run_native`` the same work raises NativeThreadError in
    its caller, which goes on."""
    lines, errors = _native_wait('run_native')
    assert 'greenlet.error' not in errors, errors
    assert lines == ['work: NativeThreadError', 'caller went on: True']


def test_turns_are_refused_to_native_work(monkeypatch):
    marks = threading.local()
    monkeypatch.setattr(concurrency, '_native_marks', marks)
    turns = concurrency.Turns(1)
    marks.records = []
    with pytest.raises(concurrency.NativeThreadError):
        with turns.turn():
            pass
    marks.records = None
    with turns.turn():
        pass


def test_run_native_is_a_plain_call_without_eventlet(monkeypatch):
    monkeypatch.setattr(concurrency, '_patched', False)
    assert concurrency.run_native(lambda x: x + 1, 1) == 2


# -- native_lock ------------------------------------------------------

def _holds_until_let_go(lock, held, let_go, order: list, name: str):
    with lock:
        order.append(name + ' holds')
        held.set()
        let_go.wait(30)
        order.append(name + ' lets go')


def test_native_lock_excludes_another_native_thread():
    """Mutual exclusion shown by a choreography, not by timing: while
    one thread holds the lock another cannot take it, and takes it once
    it is let go."""
    lock = concurrency.native_lock()
    held, let_go = threading.Event(), threading.Event()
    order: list = []
    holder = threading.Thread(target=_holds_until_let_go,
                              args=(lock, held, let_go, order, 'holder'))
    holder.start()
    assert held.wait(30)
    taken: list = []
    other = threading.Thread(
        target=lambda: taken.append(lock.acquire(blocking=False)))
    other.start()
    other.join(30)
    assert taken == [False], 'taken while another thread held it'
    let_go.set()
    holder.join(30)
    assert order == ['holder holds', 'holder lets go']

    def take():
        with lock:
            taken.append(True)

    other = threading.Thread(target=take)
    other.start()
    other.join(30)
    assert taken == [False, True]


def test_native_lock_is_reentrant():
    # Owners call their own locked methods from locked methods.
    lock = concurrency.native_lock()
    with lock:
        assert lock.acquire(blocking=False)
        lock.release()


#: Under eventlet: a native thread (``run_blocking`` work) and a green
#: thread of the hub share the lock both ways round.
NATIVE_LOCK_UNDER_EVENTLET = '''
import os, sys
from scheduler import concurrency
concurrency.monkey_patch()
import eventlet
from eventlet import patcher
native = patcher.original('threading')
lock = concurrency.native_lock()
order = []

# 1. A native thread holds it: a green thread cannot take it, and the
# other green threads keep running meanwhile.
held, let_go = native.Event(), native.Event()
def native_holder():
    with lock:
        order.append('native holds')
        held.set()
        let_go.wait(30)
holder = native.Thread(target=native_holder)
holder.start()
held.wait(30)
order.append('green took it: %s' % lock.acquire(blocking=False))
eventlet.spawn(order.append, 'another green thread ran').wait()
let_go.set()
holder.join(30)

# 2. A green thread holds it: a native thread cannot take it, then
# waits for it (natively, beside the hub) and gets it when let go.
tried = native.Event()
def native_taker():
    order.append('native took it: %s' % lock.acquire(blocking=False))
    tried.set()
    with lock:
        order.append('native got it')
with lock:
    taker = native.Thread(target=native_taker)
    taker.start()
    tried.wait(30)
    order.append('green lets go')
taker.join(30)
print('|'.join(order) if not taker.is_alive() else 'native thread stuck',
      flush=True)
os._exit(0)
'''


def test_native_lock_is_shared_by_green_and_native_threads():
    env = dict(os.environ)
    env.pop(concurrency.NO_PATCH_ENV, None)
    done = subprocess.run([sys.executable, '-c', NATIVE_LOCK_UNDER_EVENTLET],
                          env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().split('|') == [
        'native holds', 'green took it: False', 'another green thread ran',
        'native took it: False', 'green lets go', 'native got it']


# -- the garbage collector ----------------------------------------------

#: Python's own thresholds.
GC_DEFAULTS = (700, 10, 10)


@pytest.fixture
def gc_defaults():
    saved = gc.get_threshold()
    gc.set_threshold(*GC_DEFAULTS)
    yield
    gc.set_threshold(*saved)


def assert_collector_tuned() -> None:
    """What ``tune_garbage_collector`` is for, as properties."""
    young, middle, old = gc.get_threshold()
    # A young collection costs what it frees: it stays frequent, so the
    # cycles the RPC libraries leave behind are freed a few at a time.
    assert 0 < young <= 5000
    # A full collection walks every long-lived object (a report and a
    # view per node): it comes at least a thousand times more rarely
    # than with Python's defaults.
    default_full = GC_DEFAULTS[0] * GC_DEFAULTS[1] * GC_DEFAULTS[2]
    assert young * middle * old >= 1000 * default_full


def test_the_collector_is_tuned_for_many_long_lived_objects(gc_defaults):
    concurrency.tune_garbage_collector()
    assert_collector_tuned()


def test_callers_of_a_shared_read_that_failed_read_again():
    """Callers that wait for the next read are not told they are fresh
    when that read failed: one of them reads again (or fails), none goes
    on with what was stored before it came, unread."""
    shared = concurrency.SharedRead()
    first_under_way = threading.Event()
    release_first = threading.Event()
    reads = []

    def read():
        reads.append(len(reads) + 1)
        if len(reads) == 1:
            first_under_way.set()
            release_first.wait(5)
            return 'first'
        if len(reads) == 2:
            raise RuntimeError('inventory unreachable')
        return 'third'

    outcomes = []

    def ask():
        try:
            outcomes.append(shared.run(read))
        except RuntimeError:
            outcomes.append('raised')

    first = threading.Thread(target=ask)
    first.start()
    assert first_under_way.wait(5)
    # Two callers come while the first read is under way: they share
    # the next one.
    waiters = [threading.Thread(target=ask) for _ in range(2)]
    for waiter in waiters:
        waiter.start()
    time.sleep(0.3)
    release_first.set()
    for thread in [first] + waiters:
        thread.join(5)
    assert reads == [1, 2, 3]
    assert sorted(outcomes, key=str) == sorted(['first', 'raised', 'third'],
                                               key=str)
