"""Whether the inventory database answers: outages, told once.

When the database goes away every request, report and periodic task
that touches it fails at once, hundreds a second; an outage is one
state of the process instead of a traceback each:

* ``unavailable(error)`` turns the driver's error into
  ``exception.InventoryUnavailable`` ("retry later") and begins an
  outage;
* ``count(what)`` adds one failed operation of kind ``what`` to the
  outage's tally; the first one logs the outage's one WARNING;
* ``available()``, after every transaction that committed, ends the
  outage with one line giving its length and the tally.

One owner per process (each worker has its own connections); the state
sits behind a native lock never held across I/O or logging, so green
and native threads may both call in.
"""

import logging as std_logging
import sqlite3
import threading
import time
import typing
import weakref

from oslo_db import exception as db_exc
from oslo_log import log as logging
import sqlalchemy as sa

from scheduler import concurrency
from scheduler import exception

LOG = logging.getLogger(__name__)

#: PostgreSQL SQLSTATE classes of a server that is away or full:
#: connection exceptions, operator intervention (shutdown, restart),
#: insufficient resources (too many clients).
_PG_CLASSES = ('08', '57', '53')
#: MySQL/MariaDB client and server error numbers of the same: cannot
#: connect (2002, 2003), server gone away or connection lost (2006,
#: 2013, 2055), too many connections (1040, 1203), server shutdown
#: (1053), unknown host (2005).
_MYSQL_ERRNOS = frozenset((1040, 1053, 1203, 2002, 2003, 2005, 2006, 2013,
                           2055))
#: Where the kinds of ``count`` are listed, the most named in a line.
_MAX_KINDS = 8


def _driver_error_is_outage(error: BaseException) -> bool:
    """Whether a DB-API driver's error means "the server is away"."""
    if isinstance(error, sqlite3.OperationalError):
        text = str(error)
        return 'locked' in text or 'unable to open' in text
    kind = type(error).__name__
    if kind not in ('OperationalError', 'InterfaceError'):
        return False
    pgcode = getattr(error, 'pgcode', False)
    if pgcode is not False:
        # psycopg2: no code at all when the client lost the server.
        return pgcode is None or pgcode[:2] in _PG_CLASSES
    args = getattr(error, 'args', ())
    if args and isinstance(args[0], int):
        return args[0] in _MYSQL_ERRNOS
    return kind == 'InterfaceError'


def is_outage(error: BaseException) -> bool:
    """Whether ``error`` says the database cannot be used right now.

    oslo.db's ``DBConnectionError`` (a connection that failed or was
    lost), SQLAlchemy's errors of a connection it invalidated or of a
    pool with no connection free within ``[database] pool_timeout``,
    and the drivers' errors of a server away or full, wrapped or not.
    A bad statement, a duplicate or a deadlock is not an outage.
    """
    if isinstance(error, exception.InventoryUnavailable):
        return True
    if isinstance(error, db_exc.DBConnectionError):
        return True
    if isinstance(error, sa.exc.TimeoutError):
        return True
    if isinstance(error, (db_exc.DBDuplicateEntry, db_exc.DBDeadlock)):
        return False
    if isinstance(error, sa.exc.DBAPIError):
        return bool(error.connection_invalidated) or \
            _driver_error_is_outage(error.orig)
    if isinstance(error, db_exc.DBError):
        inner = error.inner_exception
        return inner is not None and inner is not error and is_outage(inner)
    return _driver_error_is_outage(error)


class _Outage:
    """This process's view of the database: up, or down since when."""

    def __init__(self):
        self._lock = concurrency.native_lock()
        #: monotonic time the outage began, or None while up.
        self.since: float | None = None
        self.counts: dict = {}
        #: Why the outage began (the first error), until it is logged.
        self.untold: str | None = None
        #: monotonic time the last outage ended.
        self.ended: float | None = None

    def down(self, reason: str, began: float | None = None) -> None:
        """Note a failure of work that began at ``began`` (monotonic;
        None: unknown); begins an outage if there is none.

        Only work that began after the last outage ended begins a new
        one: an operation that met the cut, but whose failure comes in
        just after another found the database back, belongs to the
        outage that ended, whose line is already written.
        """
        with self._lock:
            if self.since is None:
                if (began is not None and self.ended is not None
                        and began <= self.ended):
                    return
                self.since = time.monotonic()
                self.counts = {}
                self.untold = reason

    def count(self, what: str) -> str | None:
        """Count ``what``; the reason to log if the outage is untold."""
        with self._lock:
            if self.since is None:
                return None
            self.counts[what] = self.counts.get(what, 0) + 1
            reason, self.untold = self.untold, None
            return reason

    def up(self, began: float) -> tuple | None:
        """(seconds, counts) of the outage this ends, or None.

        Only work that began after the outage did ends it: a
        transaction that had its connection before the cut may commit
        just after the first failure.
        """
        with self._lock:
            if self.since is None or began <= self.since:
                return None
            self.ended = time.monotonic()
            ended = self.ended - self.since, self.counts
            self.since, self.counts = None, {}
            return ended


_OUTAGE = _Outage()


def describe(error: BaseException) -> str:
    """The error's type and first line, without the SQL text."""
    inner = getattr(error, 'orig', None) or getattr(
        error, 'inner_exception', None) or error
    if not isinstance(inner, BaseException):
        inner = error
    text = str(inner).strip().splitlines()
    return '%s: %s' % (type(inner).__name__, text[0] if text else '')


def unavailable(error: BaseException, began: float | None = None
                ) -> exception.InventoryUnavailable:
    """The typed error for ``error`` (an outage, see ``is_outage``), met
    by work that began at ``began`` (``time.monotonic()``, when known).

    Begins an outage if there is none, unless that work began before the
    last outage ended (see ``_Outage.down``); the caller raises the
    result ``from error``, and whoever catches it ``count``s it.
    """
    if isinstance(error, exception.InventoryUnavailable):
        return error
    reason = describe(error)
    _OUTAGE.down(reason, began)
    return exception.InventoryUnavailable(reason=reason)


def count(what: str) -> None:
    """One more ``what`` failed (or was put off) during this outage.

    The first of an outage logs its one WARNING: what failed and why.
    """
    reason = _OUTAGE.count(what)
    if reason is not None:
        LOG.warning('Inventory database unavailable: %(what)s failed '
                    '(%(reason)s). Requests fail with InventoryUnavailable '
                    '(retry later) and what computes send is kept until '
                    'it is back; one line will say when.',
                    {'what': what, 'reason': reason})


#: ``weakref.WeakMethod``s called once an outage ends (``when_back``),
#: under ``_WHEN_BACK_LOCK``.
_WHEN_BACK: list = []
_WHEN_BACK_LOCK = concurrency.native_lock()


def when_back(method: typing.Callable[[], None]) -> None:
    """Call bound ``method`` in a thread of its own each time an outage
    ends, for as long as its object lives: what was kept for later
    need not wait for its periodic task."""
    with _WHEN_BACK_LOCK:
        _WHEN_BACK.append(weakref.WeakMethod(method))


def _run_when_back() -> None:
    with _WHEN_BACK_LOCK:
        methods = [ref() for ref in _WHEN_BACK]
        _WHEN_BACK[:] = [ref for ref, method in zip(_WHEN_BACK, methods)
                         if method is not None]
    for method in methods:
        if method is not None:
            # The runtime's thread (green under eventlet): the caller
            # is the transaction that found the database back.
            threading.Thread(target=_call_when_back, args=(method,),
                             name='inventory-back', daemon=True).start()


def _call_when_back(method: typing.Callable[[], None]) -> None:
    try:
        method()
    except Exception:  # its periodic task tries again
        LOG.exception('Could not apply what was kept during the '
                      'database outage; the periodic task will retry')


def available(began: float) -> None:
    """A transaction that began at ``began`` (``time.monotonic()``)
    committed: end the outage, if any, with one line.

    Cheap when there is none (one attribute read, no lock).
    """
    if _OUTAGE.since is None:
        return
    ended = _OUTAGE.up(began)
    if ended is None:
        return
    seconds, counts = ended
    kinds = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    tally = ', '.join('%s: %d' % kv for kv in kinds[:_MAX_KINDS]) or \
        'nothing'
    if len(kinds) > _MAX_KINDS:
        tally += ' and %d other kind(s)' % (len(kinds) - _MAX_KINDS)
    LOG.warning('Inventory database is back after %(seconds).1f s; '
                '%(total)d operation(s) failed or were put off meanwhile '
                '(%(tally)s)',
                {'seconds': seconds, 'total': sum(counts.values()),
                 'tally': tally})
    _run_when_back()


class LostConnectionFilter(std_logging.Filter):
    """Drops the pool's ERROR traceback for the failed rollback of a
    connection the server lost (once per connection): the outage's own
    line says it already."""

    #: Loggers of SQLAlchemy's pools (each class logs on its own).
    LOGGERS = ('sqlalchemy.pool.impl.QueuePool',
               'sqlalchemy.pool.impl.NullPool',
               'sqlalchemy.pool.impl.StaticPool',
               'sqlalchemy.pool.impl.SingletonThreadPool',
               'sqlalchemy.pool.base')

    def filter(self, record: std_logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return error is None or not is_outage(error)


_filter = LostConnectionFilter()


def install_log_filter() -> None:
    """Attach ``LostConnectionFilter`` to the pools' loggers (idempotent)."""
    for name in LostConnectionFilter.LOGGERS:
        logger = std_logging.getLogger(name)
        if _filter not in logger.filters:
            logger.addFilter(_filter)
