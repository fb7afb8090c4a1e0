"""The one place that chooses the concurrency runtime.

Two runtimes, chosen by ``[scheduler] executor`` (or the environment
variable ``SCHEDULER_EXECUTOR``), before anything else of the process
is imported:

* ``eventlet`` (the default, as oslo.service and oslo.messaging still
  expect): the standard library is monkey-patched and RPC calls run in
  green threads;
* ``threading``: no patching, oslo.service's threading backend (its
  process launcher is cotyledon) and oslo.messaging's ``threading``
  executor, where calls run in native threads.

``setup()`` must run before any other module of the process imports
socket, threading or time users: ``scheduler.cmd`` calls it first
thing.  Nothing else in the code base may depend on which runtime won:
shared state is guarded by locks that work in both (``native_lock``).
"""

import collections
import gc
import logging
import os
import time
import warnings

EVENTLET = 'eventlet'
THREADING = 'threading'
RUNTIMES = (EVENTLET, THREADING)

#: The oslo.messaging executor of RPC servers, set by ``setup()``.
EXECUTOR = EVENTLET

# eventlet warns, when first imported (by us or by an oslo library), that
# it is deprecated.  The scheduler runs on it on purpose until oslo's
# threading backend replaces it here; the warning would be noise in every
# log.  Only that one warning is silenced, and only by its text: it is
# attributed to whichever module imports eventlet first (ours or an oslo
# library's), so a filter by module would miss it, and its category,
# eventlet.EventletDeprecationWarning, cannot be named before the very
# import that warns.
warnings.filterwarnings('ignore', message=r'\s*Eventlet is deprecated',
                        category=Warning)

#: Set (to anything) to leave the process unpatched: tests that import
#: console-script modules use it.
NO_PATCH_ENV = 'SCHEDULER_NO_MONKEY_PATCH'
#: Overrides ``[scheduler] executor`` (tools and tests).
EXECUTOR_ENV = 'SCHEDULER_EXECUTOR'

_patched = False
_log_locks_renewed_after_fork = False


def configured_runtime(argv: list | None = None) -> str:
    """The runtime the configuration asks for, read before CONF is.

    Reads ``[scheduler] executor`` from the ``--config-file`` and
    ``--config-dir`` arguments (or the default config files) with a
    private, throw-away ConfigOpts: the real parsing happens later.
    """
    from_env = os.environ.get(EXECUTOR_ENV)
    if from_env:
        return _checked(from_env)
    import sys

    from oslo_config import cfg

    from scheduler.conf import scheduler as scheduler_conf
    argv = sys.argv[1:] if argv is None else argv
    files, dirs = [], []
    for index, arg in enumerate(argv):
        for flag, found in (('--config-file', files),
                            ('--config-dir', dirs)):
            if arg == flag and index + 1 < len(argv):
                found.append(argv[index + 1])
            elif arg.startswith(flag + '='):
                found.append(arg.split('=', 1)[1])
    if not files and not dirs:
        files = cfg.find_config_files(project='scheduler')
    early = cfg.ConfigOpts()
    early.register_opt(scheduler_conf.executor_opt, group='scheduler')
    try:
        early(args=[], project='scheduler', default_config_files=files,
              default_config_dirs=dirs, use_env=False)
        return _checked(early.scheduler.executor)
    except (cfg.Error, OSError):
        # The real parsing reports a broken file with a proper message.
        return EVENTLET


def _checked(name: str) -> str:
    if name not in RUNTIMES:
        raise SystemExit('scheduler: unknown executor %r (choose from %s)'
                         % (name, ', '.join(RUNTIMES)))
    return name


def setup(argv: list | None = None) -> str:
    """Choose and start the runtime (idempotent); returns its name."""
    global EXECUTOR
    if os.environ.get(NO_PATCH_ENV):
        return EXECUTOR
    runtime = configured_runtime(argv)
    if runtime == THREADING:
        from oslo_service import backend
        backend.init_backend(backend.BackendType.THREADING)
        EXECUTOR = THREADING
    else:
        monkey_patch()
        EXECUTOR = EVENTLET
    return runtime


def monkey_patch() -> None:
    """Green the standard library for eventlet (idempotent)."""
    global _patched
    if _patched or os.environ.get(NO_PATCH_ENV):
        return
    import eventlet
    eventlet.monkey_patch()
    _patched = True


def tune_garbage_collector() -> None:
    """Keep the garbage collector's pauses short and full collections rare.

    A scheduler keeps tens of thousands of long-lived objects (a report
    and a view per node): a full collection walks them all (180 ms at
    10,000 hosts).  With Python's defaults one ran every few seconds
    under load (pauses of up to 200 ms, the slowest 5% of requests);
    the generations' thresholds make that once per 250 million
    allocations.

    The young generation stays small (2,000): the libraries under the
    RPC server leave short-lived objects in reference cycles that only
    a collection frees (kombu builds a class per publish, oslo.messaging
    raises an exception per poll; about 200 objects a call), and a
    collection costs what it frees.  At 50,000 each one freed about
    50,000 objects in 33-47 ms, every second under load; at 2,000 the
    pauses are a few milliseconds (10,000 hosts over RabbitMQ, 2,000
    calls: the slowest of one caller 38-45 ms before, 7-13 ms after;
    the p99 with eight callers 57-60 ms before, 31-34 ms after; the
    medians the same).
    """
    gc.set_threshold(2000, 50, 2500)


def native_lock():
    """A re-entrant lock that works from green and native threads alike.

    Work handed to ``run_blocking`` runs in a native thread while green
    threads serve requests; a green lock must not be taken there.  A
    native lock is safe in both as long as its holder never yields:
    keep I/O (database, bus, logging) outside the sections it guards.
    """
    if _patched:
        from eventlet import patcher
        return patcher.original('threading').RLock()
    import threading
    return threading.RLock()


class Turns:
    """Requests take turns: at most ``size`` hold one at a time, the
    others wait in the order they came.

    A holder that has had its turn for ``_SLICE`` and sees others
    waiting gives it up at its next safe point (``Turn.pass_if_due``)
    and queues again behind them, so that a long request (many
    instances) does not hold short ones up; a request shorter than the
    slice never hands over.  Built on the runtime's ``threading``
    (green under eventlet): make it after ``setup()``, and take turns
    only in threads that serve requests, never in ``run_blocking``
    work.
    """

    def __init__(self, size: int):
        import threading
        self._lock_type = threading.Lock
        self._lock = threading.Lock()
        self._free = size
        #: One closed gate per waiting request, first come first.
        self._waiting: collections.deque = collections.deque()

    def turn(self) -> 'Turn':
        """``with turns.turn() as turn:`` (waits for it)."""
        return Turn(self)

    def _acquire(self) -> None:
        with self._lock:
            if self._free and not self._waiting:
                self._free -= 1
                return
            gate = self._lock_type()
            gate.acquire()
            self._waiting.append(gate)
        try:
            # Opened by ``_release``, which hands this request the turn
            # it gives up: only the request whose turn it is wakes.
            gate.acquire()
        except BaseException:
            with self._lock:
                handed = gate not in self._waiting
                if not handed:
                    self._waiting.remove(gate)
            if handed:
                self._release()
            raise

    def _release(self) -> None:
        with self._lock:
            if self._waiting:
                self._waiting.popleft().release()
            else:
                self._free += 1

    def others_wait(self) -> bool:
        return bool(self._waiting)


class Turn:
    """One request's turn (``Turns.turn``)."""

    def __init__(self, turns: Turns):
        self._turns = turns
        self._since = 0.0

    def __enter__(self) -> 'Turn':
        self._turns._acquire()
        self._since = time.monotonic()
        return self

    def __exit__(self, *exc) -> None:
        self._turns._release()

    def pass_if_due(self) -> None:
        """At a safe point: let the requests waiting go first if this
        one had its turn for ``_SLICE``; come back after them."""
        if self._turns.others_wait() and \
                time.monotonic() - self._since >= _SLICE:
            self._turns._release()
            self._turns._acquire()
            self._since = time.monotonic()


def run_blocking(func, *args, **kwargs):
    """Run ``func`` in a native thread, so the event loop keeps serving.

    For long blocking work (database batches) in a monkey-patched
    process; without eventlet it is a plain call.
    """
    if not _patched:
        return func(*args, **kwargs)
    from eventlet import tpool
    return tpool.execute(func, *args, **kwargs)


#: How long a green thread may keep the CPU between two safe points
#: before ``cooperative_yield`` hands it over.
_SLICE = 0.005
_last_switch = [0.0]


def cooperative_yield() -> None:
    """Let other requests and reports run: a safe point in a long loop.

    Under eventlet, ``time.sleep(0)`` switches green threads, so one
    long request (many instances, many hosts) cannot hold every other
    caller and every compute report behind it; it does so once the
    CPU was held for ``_SLICE``, not at every safe point (each switch
    costs a trip through the hub).  Native threads need nothing: the
    interpreter switches them every few milliseconds by itself, and a
    ``sleep(0)`` there is a system call that may give the core away.
    """
    if not _patched:
        return
    now = time.monotonic()
    if now - _last_switch[0] >= _SLICE:
        time.sleep(0)
        _last_switch[0] = time.monotonic()


def slice_begins() -> None:
    """Count the CPU slice of ``cooperative_yield`` from now.

    Call it where a green thread has just got the CPU: an RPC call
    starts in a green thread of its own (``rpc.Dispatcher``).  The
    slice otherwise ran from the last cooperative switch of any green
    thread, so a new request often found it spent and gave the CPU
    away at its first safe point, before it had done anything: three
    requests in four of a caller sending one request after the other
    (tools/bench/bench_select.py), each a trip through the hub, and a
    wait behind whatever else was ready.  A long request still yields
    once it held the CPU for ``_SLICE``, counted from the latest of its
    own last yield and the start of the calls served meanwhile.
    """
    if _patched:
        _last_switch[0] = time.monotonic()


def own_log_locks_after_fork() -> None:
    """Give each process the launcher forks its own logging locks.

    Under eventlet, oslo.log makes every log handler's lock a pipe that
    holds one token byte (so that green and native threads can share
    it), and nothing renews it in a forked child: the parent and all
    its workers shared one lock.  A worker killed while it wrote a log
    line (kill -9, the OOM killer) took the token with it, and every
    process of the service then blocked at its next log line: the other
    workers stopped answering, and the parent neither restarted the
    worker nor handled SIGTERM.  Call it before the launcher forks.
    """
    global _log_locks_renewed_after_fork
    if _patched and not _log_locks_renewed_after_fork:
        os.register_at_fork(after_in_child=_renew_log_locks)
        _log_locks_renewed_after_fork = True


def _renew_log_locks() -> None:
    """In a forked child: a new lock for every handler of every logger.

    A handler makes its own kind of lock (oslo.log's pipe under
    eventlet); the inherited one is dropped, which closes this
    process's copy of the pipe and leaves the parent's alone.
    """
    loggers = [logging.getLogger()] + [
        logger for logger in logging.Logger.manager.loggerDict.values()
        if isinstance(logger, logging.Logger)]
    renewed: set = set()
    for logger in loggers:
        for handler in logger.handlers:
            if id(handler) not in renewed:
                renewed.add(id(handler))
                handler.createLock()
