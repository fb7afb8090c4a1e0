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

Under eventlet the process has one native thread that runs Python code
of ours or of a library: the hub's.  ``run_native`` is the only way to
run work on another one, and it takes leaf work only (see there); the
rest of the code base keeps to green threads.
"""

import collections
import gc
import logging
import os
import sys
import time
import traceback
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
#: The OS thread that runs the hub (and every green thread), once
#: patched.
_hub_thread_ident: int | None = None


def configured_runtime(argv: list | None = None) -> str:
    """The runtime the configuration asks for, read before CONF is.

    Reads ``[scheduler] executor`` from the ``--config-file`` and
    ``--config-dir`` arguments (or the default config files) with a
    private, throw-away ConfigOpts: the real parsing happens later.
    """
    from_env = os.environ.get(EXECUTOR_ENV)
    if from_env:
        return _checked(from_env)
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
    global _native_marks
    import eventlet
    eventlet.monkey_patch()
    from eventlet import patcher
    _native_marks = patcher.original('threading').local()
    _green_psycopg2()
    _patched = True


def _green_psycopg2() -> None:
    """Make psycopg2 yield to other green threads while it waits.

    Without it a query blocks every green thread of the process until
    the server answers; native threads, the other way out, must not
    touch green locks (``run_native``).  psycopg2's wait callback waits
    through the hub instead.  Nothing to do without psycopg2.
    """
    try:
        import psycopg2
        from psycopg2 import extensions
    except ImportError:
        return
    from eventlet import hubs

    def wait(connection) -> None:
        while True:
            state = connection.poll()
            if state == extensions.POLL_OK:
                return
            if state == extensions.POLL_READ:
                hubs.trampoline(connection.fileno(), read=True)
            elif state == extensions.POLL_WRITE:
                hubs.trampoline(connection.fileno(), write=True)
            else:
                raise psycopg2.OperationalError(
                    'unexpected state from poll(): %r' % (state,))

    extensions.set_wait_callback(wait)


def tune_garbage_collector() -> None:
    """Keep the garbage collector's pauses short and full collections rare.

    A scheduler keeps tens of thousands of long-lived objects (a report
    and a view per node): a full collection walks them all, a pause
    every request in flight waits out; the older generations' thresholds
    make full collections very rare.

    The young generation stays small: the libraries under the RPC
    server leave short-lived objects in reference cycles that only a
    collection frees (kombu builds a class per publish, oslo.messaging
    raises an exception per poll), and a collection costs what it
    frees, so many small collections pause requests less than a few
    large ones.  The figures behind both choices are in
    doc/performance.md ("Pauses of the garbage collector", "Ad hoc
    measurements").
    """
    gc.set_threshold(2000, 50, 2500)


def native_lock():
    """A re-entrant lock for state shared by the threads that serve
    requests, in either runtime.

    Under eventlet it is a native lock, which a green thread may hold
    as long as it never yields inside: keep I/O (database, bus,
    logging) outside the sections it guards.
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
    only in threads that serve requests: ``run_native`` work is refused
    (``NativeThreadError``).
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
        refuse_native_thread('Turns')
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
        refuse_native_thread('Turns')
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
        # The turn's CPU slice starts now: a request that waited for
        # its turn (or for the database before it) found the slice
        # spent and gave the CPU away at its first safe point, holding
        # the turn through a whole trip of the hub, while every request
        # behind it waited.
        slice_begins()
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
            slice_begins()


class SharedRead:
    """Callers that come while a read is under way share the next one.

    ``run(read)`` returns once a ``read`` begun after the caller came
    has ended: the first caller to find none under way leads it, the
    others wait and return None together, so a burst of requests reads
    twice, not once each, and each sees what was stored before it
    came.  A read that raises counts for its leader only.  The event
    is the runtime's (green under eventlet).
    """

    def __init__(self):
        self._lock = native_lock()
        #: The read under way (set when it ends), or None.
        self.under_way = None
        #: Reads begun, and the last one ended, by number (one at a
        #: time: they end in the order they begin).
        self._begun = self._done = 0

    def run(self, read):
        import threading
        with self._lock:
            arrived = self._begun
        while True:
            with self._lock:
                if self._done > arrived:
                    return None
                event = self.under_way
                if event is None:
                    event = self.under_way = threading.Event()
                    self._begun += 1
                    mine = self._begun
                    break
            event.wait()
        done = False
        try:
            result = read()
            done = True
            return result
        finally:
            with self._lock:
                self.under_way = None
                # A failed read tells its waiters nothing: one of them
                # leads the next.
                if done:
                    self._done = mine
            event.set()


class NativeThreadError(RuntimeError):
    """Code that may only run in a green thread ran on a native one."""


#: Marks the native threads ``run_native`` runs work on (under
#: eventlet): ``threading.local`` of the original module, so that it
#: tells native threads apart, not green ones.
_native_marks = None


def thread_stacks(threads: list) -> str:
    """What each of ``threads`` is doing, for a log: name and stack.

    A native thread's stack comes from ``sys._current_frames()``; a
    green thread (a ``threading.Thread`` under eventlet) is not an OS
    thread and shows its frame if its greenlet is found, else its name
    only.
    """
    frames = sys._current_frames()
    parts = []
    for thread in threads:
        frame = frames.get(thread.ident)
        if frame is None and _patched:
            frame = _green_frame(thread.ident)
        stack = ''.join(traceback.format_stack(frame)) if frame is not None \
            else '  (no stack available)\n'
        parts.append('%s:\n%s' % (thread.name, stack))
    return ''.join(parts)


def _green_frame(ident):
    """The current frame of the greenlet whose id is ``ident``, if any."""
    import greenlet
    for obj in gc.get_objects():
        if isinstance(obj, greenlet.greenlet) and id(obj) == ident:
            return obj.gr_frame
    return None


def in_native_thread() -> bool:
    """Whether this is a native thread ``run_native`` gave work to."""
    return _native_marks is not None and \
        getattr(_native_marks, 'records', None) is not None


def refuse_native_thread(what: str) -> None:
    """Raise ``NativeThreadError`` in ``run_native`` work.

    For the runtime's own primitives (green under eventlet): a native
    thread that waited on one, or woke a green thread from one, froze
    the process (``greenlet.error: Cannot switch to a different
    thread``, then nothing more, not even SIGTERM).  Refused loudly
    instead.
    """
    if in_native_thread():
        raise NativeThreadError(
            '%s may not be used on a native thread (run_native work)'
            % what)


def run_native(func, *args, **kwargs):
    """Run ``func(*args, **kwargs)`` on a native thread; the only way
    onto one in this code base.

    Under eventlet everything shared in the process is green (the
    monkey-patched locks of SQLAlchemy's pool, of oslo.messaging, of
    the inventory's engine, ``Turns``) and a native thread must touch
    none of them: waiting on a green lock, or releasing one a green
    thread waits on, switches between OS threads, which greenlets
    cannot do, and the process froze.  So the work handed here must
    be a leaf: a C call or computation on its arguments that lets the
    GIL go (``memory.trim``), never the database, the bus or shared
    objects.  What is enforced here:

    * the native thread has no event hub (``_NoHub``): a green
      primitive that would switch there (waiting on a green lock,
      releasing one a green thread waits on, a green sleep or socket,
      psycopg2's wait callback) raises ``NativeThreadError`` in the
      work instead of freezing the process;
    * the runtime's primitives of this code base refuse to be used
      there at all (``refuse_native_thread``);
    * log records the work emits are not written from the native
      thread (a handler's lock, and the logging module's own, may be
      green): they are kept and handed to their loggers by the calling
      green thread once the work is done.

    Database work needs no native thread: under eventlet the drivers
    yield while they wait (PyMySQL through green sockets, psycopg2
    through the wait callback ``monkey_patch`` installs; SQLite works
    in the process).  Without eventlet this is a plain call.
    """
    if not _patched or in_native_thread():
        return func(*args, **kwargs)
    from eventlet import hubs
    from eventlet import tpool
    _defer_native_log_records()

    def marked():
        _native_marks.records = records
        hubs.use_hub(_NoHub)
        try:
            return func(*args, **kwargs)
        finally:
            _native_marks.records = None

    records: list = []
    try:
        return tpool.execute(marked)
    finally:
        _replay(records)


class _NoHub:
    """The event hub of ``run_native``'s threads: there is none.

    eventlet makes a hub for a thread the first time one of its green
    primitives needs to switch there; a native thread given one would
    switch to green threads of another OS thread, which greenlets
    cannot do.  Made instead, this refuses.
    """

    def __init__(self):
        raise NativeThreadError(
            'a green primitive (lock, event, sleep, socket) would switch '
            'on a native thread: run_native work must not touch the '
            'shared objects of green threads')


class _NativeRecords(logging.Filter):
    """Keeps the records of ``run_native`` work from every handler."""

    def filter(self, record):
        records = getattr(_native_marks, 'records', None)
        if records is None:
            return True
        if not any(kept is record for kept in records):
            records.append(record)
        return False


_NATIVE_RECORDS = _NativeRecords()


def _defer_native_log_records() -> None:
    """Put ``_NATIVE_RECORDS`` on every handler (they may change with
    a reload), and make the logging module's own lock native.

    A logger takes that lock the first time it is asked about a level,
    from whichever thread asks; oslo.log's set-up makes it green.  A
    native one is safe for both runtimes: its holders never yield.
    Swapped from a green thread, which no other holds it across.
    """
    from eventlet import patcher
    native_rlock = patcher.original('threading').RLock
    if not isinstance(logging._lock, type(native_rlock())):
        logging._lock = native_rlock()
    for handler in _handlers():
        if _NATIVE_RECORDS not in handler.filters:
            handler.addFilter(_NATIVE_RECORDS)


def _handlers() -> list:
    """Every handler of every logger, once each."""
    loggers = [logging.getLogger()] + [
        logger for logger in logging.Logger.manager.loggerDict.values()
        if isinstance(logger, logging.Logger)]
    return list({id(handler): handler for logger in loggers
                 for handler in logger.handlers}.values())


def _replay(records: list) -> None:
    for record in records:
        logger = logging.getLogger(record.name)
        if logger.isEnabledFor(record.levelno):
            logger.handle(record)


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
    slice otherwise runs from the last cooperative switch of any green
    thread, so a new request would often find it spent and give the
    CPU away at its first safe point, before it had done anything.  A
    long request still yields once it held the CPU for ``_SLICE``.
    """
    if _patched:
        _last_switch[0] = time.monotonic()


def own_log_locks_after_fork() -> None:
    """Give each process the launcher forks its own logging locks.

    Under eventlet, oslo.log makes every log handler's lock a pipe that
    holds one token byte (so that green and native threads can share
    it), and nothing renews it in a forked child: a worker killed while
    it wrote a log line would take the token with it, and every process
    of the service would block at its next log line.  Call it before
    the launcher forks.
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
    for handler in _handlers():
        handler.createLock()
