"""The inventory's engine (one a process), transactions and retries.

The engine is made on first use from ``[database] connection`` and
shared by every module of ``scheduler.db``.  Each of their functions
opens its own ``transaction()``; one wrapped in a retry decorator here
must not call another wrapped one inside its transaction: the outer
would repeat every retry of the inner, and retry a transaction the
database already rolled back.
"""

import contextlib
import logging as std_logging
import os
import threading
import time
from typing import Callable, Iterator, Sequence, TypeVar

from oslo_config import cfg
from oslo_db import api as oslo_db_api
from oslo_db import exception as db_exc
from oslo_db.sqlalchemy import engines
from oslo_db.sqlalchemy import exc_filters
from oslo_log import log as logging
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy import orm

from scheduler import concurrency
from scheduler import conf
from scheduler.db import availability
from scheduler.db import checkout
from scheduler import exception

CONF = conf.CONF
LOG = logging.getLogger(__name__)

# Bound parameters in one IN (...) list.  Old SQLite builds accept 999
# a statement; this also keeps statements small on the other backends.
_IN_CHUNK = 500

#: Requests served at once where oslo.messaging's options are not
#: registered (its own default, 64).
_UNREGISTERED_SERVED = 64

_LOCK = threading.Lock()
_ENGINE: sa.Engine | None = None
_SESSION_MAKER: orm.sessionmaker | None = None


# Writers that insert-or-update race with their twins in other
# schedulers: on a duplicate key the retry finds the row and updates it.
retry_on_conflict = oslo_db_api.wrap_db_retry(
    max_retries=5, retry_interval=0.1, max_retry_interval=1,
    retry_on_deadlock=True,
    exception_checker=lambda e: isinstance(e, db_exc.DBDuplicateEntry))
retry_on_deadlock = oslo_db_api.wrap_db_retry(
    max_retries=5, retry_interval=0.1, max_retry_interval=1,
    retry_on_deadlock=True)


def connection_budget(conf=None) -> int:
    """The most connections one process (a worker) may hold at once.

    ``[database] max_pool_size + max_overflow``, but never more than the
    requests the worker serves at once (``[DEFAULT]
    executor_thread_pool_size``): a request holds one connection at a
    time, so more could only be opened by a burst and kept.
    """
    conf = conf or CONF
    opts = conf.database
    # SQLAlchemy reads a pool size of 0 and an overflow of -1 as "no
    # limit": the requests served at once are the limit then.
    unlimited = not opts.max_pool_size or (opts.max_overflow or 0) < 0
    wanted = None if unlimited else \
        opts.max_pool_size + (opts.max_overflow or 0)
    try:
        served = conf.executor_thread_pool_size
    except cfg.NoSuchOptError:
        # oslo.messaging's options are not registered (a tool that
        # never serves requests): the pool options alone bound it.
        served = wanted or _UNREGISTERED_SERVED
    return max(1, served if wanted is None else min(wanted, served))


def pool_sizes(budget: int | None = None) -> tuple[int, int]:
    """``(pool_size, max_overflow)`` that stay within ``budget``
    (``connection_budget()`` by default): the configured pool size,
    the rest of the budget as overflow."""
    budget = connection_budget() if budget is None else budget
    pool_size = max(1, min(CONF.database.max_pool_size or budget, budget))
    return pool_size, budget - pool_size


def make_engine(url: str, budget: int | None = None) -> sa.Engine:
    """An engine for ``url`` with the ``[database]`` pool and retry
    options and at most ``budget`` connections (also the migrations').

    PostgreSQL and MySQL go through oslo.db's engine factory, SQLite
    through SQLAlchemy's (``_sqlite_engine``).
    """
    availability.install_log_filter()
    parsed = sa.make_url(url)
    if parsed.get_backend_name() == 'sqlite':
        return _sqlite_engine(parsed, budget)
    opts = CONF.database
    pool_size, overflow = pool_sizes(budget)
    return engines.create_engine(
        # A ping only for a connection that sat idle, not on every
        # checkout (``checkout``).
        checkout.with_plugin(parsed).render_as_string(hide_password=False),
        mysql_sql_mode=opts.mysql_sql_mode,
        mysql_wsrep_sync_wait=opts.mysql_wsrep_sync_wait,
        connection_recycle_time=opts.connection_recycle_time,
        connection_debug=opts.connection_debug,
        connection_trace=opts.connection_trace,
        max_pool_size=pool_size,
        max_overflow=overflow,
        pool_timeout=opts.pool_timeout,
        # No connection at creation: oslo.db retries one only for the
        # errors it recognises (MySQL's, not libpq's "connection to server
        # ... failed"), and a worker making its engine in an outage would
        # wait max_retries x retry_interval inside a request.  The service
        # waits for the database once, at start (``cmd.service._sync_schema``).
        max_retries=0,
        connection_parameters=opts.connection_parameters,
    )


def _sqlite_engine(url: sa.URL, budget: int | None) -> sa.Engine:
    """A SQLite engine safe for several processes writing one file.

    SQLAlchemy's ``create_engine`` rather than oslo.db's factory, which
    opens a new connection (and runs its PRAGMAs) for every transaction
    on a file.  Kept from oslo.db: its error translation (a duplicate
    key is ``DBDuplicateEntry``, the claim relies on it), foreign keys
    on (ON DELETE CASCADE), the ``[database]`` synchronous and debug
    options, and a forked child never using its parent's connections.

    Every transaction takes the write lock at BEGIN (IMMEDIATE, as
    SQLAlchemy's pysqlite documentation describes): in a deferred one a
    reader that then writes cannot wait for another writer and fails at
    once with "database is locked".  With IMMEDIATE writers queue on the
    busy timeout, and WAL keeps them from blocking readers.  A
    ``run_read`` connection (``_READ_ONLY``) begins no transaction and
    neither takes nor waits for the lock.  An in-memory database exists
    only as long as its connection: one shared (``StaticPool``).
    """
    in_memory = url.database in (None, '', ':memory:')
    opts = CONF.database
    if in_memory:
        pool = {'poolclass': sa.pool.StaticPool}
    else:
        os.makedirs(os.path.dirname(os.path.abspath(url.database)),
                    exist_ok=True)
        pool_size, overflow = pool_sizes(budget)
        # No ping at checkout: it guards against a server gone away,
        # and a file does not go away.
        pool = {'poolclass': sa.pool.QueuePool, 'pool_size': pool_size,
                'max_overflow': overflow, 'pool_pre_ping': False}
        if opts.pool_timeout is not None:
            pool['pool_timeout'] = opts.pool_timeout
    if opts.connection_debug >= 50:
        # As oslo.db's factory reads the option.
        std_logging.getLogger('sqlalchemy.engine').setLevel(
            std_logging.DEBUG if opts.connection_debug >= 100
            else std_logging.INFO)
    engine = sa.create_engine(
        url, connect_args={'check_same_thread': False}, **pool)
    exc_filters.register_engine(engine)
    synchronous = opts.sqlite_synchronous

    @sa.event.listens_for(engine, 'connect')
    def _connect(dbapi_connection, record):
        record.info['pid'] = os.getpid()
        # The driver's own BEGIN off: ours is emitted in ``_begin``.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute('PRAGMA foreign_keys = ON')
        cursor.execute('PRAGMA busy_timeout = 30000')
        if not synchronous:
            cursor.execute('PRAGMA synchronous = OFF')
        if not in_memory:
            cursor.execute('PRAGMA journal_mode = WAL')
        cursor.close()

    @sa.event.listens_for(engine, 'checkout')
    def _checkout(_dbapi_connection, record, proxy):
        # SQLAlchemy's recipe for pools across fork(): a connection
        # opened by another process is dropped, never used nor closed.
        if record.info.get('pid') != os.getpid():
            record.dbapi_connection = proxy.dbapi_connection = None
            raise sa.exc.DisconnectionError(
                'connection of process %s' % record.info.get('pid'))

    @sa.event.listens_for(engine, 'begin')
    def _begin(connection):
        if not connection.get_execution_options().get(_READ_ONLY):
            connection.exec_driver_sql('BEGIN IMMEDIATE')

    return engine


def _engine_and_maker() -> tuple[sa.Engine, orm.sessionmaker]:
    """The process's engine (the worker's whole connection budget), and
    its session maker."""
    global _ENGINE, _SESSION_MAKER
    with _LOCK:
        if _ENGINE is None or _SESSION_MAKER is None:
            url = CONF.database.connection
            if not url:
                raise exception.ConfigurationError(
                    reason='[database] connection is not set')
            _ENGINE = make_engine(url, connection_budget())
            _SESSION_MAKER = orm.sessionmaker(bind=_ENGINE,
                                              expire_on_commit=False)
        return _ENGINE, _SESSION_MAKER


def get_engine() -> sa.Engine:
    """The process's engine, made on first use from the configuration."""
    return _engine_and_maker()[0]


def reset_engine(close: bool = True) -> None:
    """Forget the engine; the next call makes a new one from the config.

    A forked child calls it with ``close=False``: the pooled connections
    belong to the parent and must be dropped without being closed.
    """
    global _ENGINE, _SESSION_MAKER, _SQLITE_WRITER
    with _LOCK:
        engine, _ENGINE, _SESSION_MAKER = _ENGINE, None, None
        # The parent's may be held by a thread the child does not have.
        _SQLITE_WRITER = None
    if engine is not None:
        engine.dispose(close=close)


@contextlib.contextmanager
def transaction(read_committed: bool = False) -> Iterator[orm.Session]:
    """A session in a transaction: committed on success, else rolled back
    (outages as ``_watched``).

    ``read_committed``: at READ COMMITTED on MySQL/MariaDB too, as on
    PostgreSQL (SQLite writes a transaction at a time), for a writer
    that creates rows its locking read did not find (a report write,
    ``usage.apply_in``).  Under InnoDB's REPEATABLE READ that read
    locks the gap where each missing row would go; gap locks do not
    exclude each other, so two writers of new nodes that fall in the
    same gap (a fleet's first reports, taken by several workers) both
    held it, and each one's INSERT waited for the other's: a deadlock.
    At READ COMMITTED a read locks only the rows it finds.
    """
    with _watched(), _engine_and_maker()[1].begin() as session:
        if read_committed and session.get_bind().dialect.name == 'mysql':
            # Before the transaction's first statement: it applies to
            # this transaction only, so nothing is reset at check-in.
            session.execute(_READ_COMMITTED)
        yield session


_READ_COMMITTED = sa.text('SET TRANSACTION ISOLATION LEVEL READ COMMITTED')


@contextlib.contextmanager
def _watched() -> Iterator[None]:
    """The database away (``availability.is_outage``) raises
    ``InventoryUnavailable``; work that succeeds ends an outage."""
    began = time.monotonic()
    try:
        yield
    except Exception as e:
        if availability.is_outage(e):
            raise availability.unavailable(e, began) from e
        raise
    availability.available(began)


_T = TypeVar('_T')


def run_in_transaction(work: Callable[[sa.Connection], _T]) -> _T:
    """``work(conn)`` in a transaction on a Core connection (the claim):
    committed if it returns, rolled back if it raises."""
    return _on_connection(work, True)


def run_read(work: Callable[[sa.Connection], _T]) -> _T:
    """``work(conn)`` on a connection outside any explicit transaction
    (for the freshness read on every request)."""
    return _on_connection(work, False)


def run_autocommit(work: Callable[[sa.Connection], _T]) -> _T:
    """``work(conn)`` with each statement committing on its own
    (PostgreSQL's autocommit), for a claim that is one statement."""
    return _on_connection(work, False, autocommit=True)


def statements_commit_alone() -> bool:
    """Whether ``run_autocommit`` may be used: one statement can change
    several tables (PostgreSQL's data-modifying WITH)."""
    return get_engine().dialect.name == 'postgresql'


def _on_connection(work, write: bool, autocommit: bool = False):
    """``work(conn)`` (outages as ``_watched``), once more on a fresh
    connection if the first, handed out without a ping (``checkout``),
    had been dropped by the server.

    Running the work again is safe for every caller of ``run_*``: a
    read; a claim, whose second try finds its own placement if the
    first did commit; a confirmation, which sets what is set already.
    """
    with _watched():
        try:
            return _run_on_connection(work, write, autocommit)
        except _Stale as stale:
            LOG.debug('Connection dropped by the server (%s); trying '
                      'again on a new one', stale)
            return _run_on_connection(work, write, autocommit, first=False)


class _Stale(Exception):
    """The connection of a first try had been dropped by the server."""


def _run_on_connection(work, write: bool, autocommit: bool,
                       first: bool = True):
    """``_on_connection``'s one try; ``_Stale`` on a first try whose
    unpinged connection the server had dropped."""
    eng = get_engine()
    unchecked = False
    try:
        if autocommit or (not write and eng.dialect.name == 'postgresql'):
            # A read needs no BEGIN nor the pool's ROLLBACK.
            with eng.connect() as conn:
                unchecked = checkout.unchecked(conn)
                return _autocommitting(conn, work)
        if not write:
            with eng.connect() as conn:
                return work(conn.execution_options(**{_READ_ONLY: True}))
        if eng.dialect.name == 'sqlite':
            with _sqlite_writer().turn(), eng.begin() as conn:
                return work(conn)
        with eng.begin() as conn:
            unchecked = checkout.unchecked(conn)
            return work(conn)
    except Exception as e:
        if first and unchecked and checkout.is_stale(e):
            raise _Stale(str(e)) from e
        raise


def _autocommitting(conn: sa.Connection, work):
    """``work(conn)`` with psycopg2's connection in autocommit, set back
    before the connection returns to the pool.

    On the driver's connection, not SQLAlchemy's ``isolation_level``:
    that sends a ``SET default_transaction_isolation`` round trip when
    set and another when the pool resets it.  The driver's flag is the
    client's: SQLAlchemy's ROLLBACKs in autocommit reach no server.
    """
    driver = conn.connection.driver_connection
    driver.autocommit = True
    try:
        return work(conn)
    finally:
        if not driver.closed:
            driver.autocommit = False


#: The execution option of ``run_read``'s connections (see
#: ``_sqlite_engine``).
_READ_ONLY = 'scheduler_read_only'

#: ``_sqlite_writer``'s turns, made on first use.
_SQLITE_WRITER = None


def _sqlite_writer():
    """What this process's claim transactions on SQLite queue on.

    Another transaction's ``BEGIN IMMEDIATE`` waits in SQLite's busy
    handler, which sleeps ever longer between tries: queued here
    (``concurrency.Turns``), the next claim of this process starts as
    soon as the last commits.  Other processes still meet in the busy
    handler.
    """
    global _SQLITE_WRITER
    if _SQLITE_WRITER is None:
        with _LOCK:
            if _SQLITE_WRITER is None:
                _SQLITE_WRITER = concurrency.Turns(1)
    return _SQLITE_WRITER


def chunks(items: Sequence, size: int = _IN_CHUNK) -> Iterator[Sequence]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


def update_from_arrays(table: sa.Table, names: Sequence[str],
                       **values) -> sa.Update:
    """PostgreSQL's ``UPDATE table ... FROM unnest(arrays)``: the rows
    of ``table`` whose id is in array ``_id`` get the ``names`` columns
    from arrays of those names (and ``values``), all in one statement
    (``update_from_arrays_params``): psycopg2 sends an executemany as a
    statement a row, while the rows stay locked until the transaction
    ends.  One array parameter a column, adapted by the driver, so the
    statement's text does not depend on the rows and is compiled once.
    """
    columns = [('_id', table.c.id.type)] + [(name, table.c[name].type)
                                            for name in names]
    # Each array typed (the dialect renders the cast): an array of NULLs
    # alone (a column nobody set in the batch) would otherwise be text.
    rows = sa.func.unnest(*[
        sa.bindparam(name, type_=postgresql.ARRAY(type_))
        for name, type_ in columns]).table_valued(
            *[sa.column(name, type_) for name, type_ in columns],
            name='given').render_derived(name='given')
    return (sa.update(table).where(table.c.id == rows.c._id)
            .values({name: rows.c[name] for name in names})
            .values(**values))


def update_from_arrays_params(rows: Sequence[dict],
                              names: Sequence[str]) -> dict:
    """The parameters of an ``update_from_arrays`` statement of columns
    ``names`` for ``rows`` (each with its ``_id``)."""
    return {name: [row[name] for row in rows]
            for name in ('_id',) + tuple(names)}
