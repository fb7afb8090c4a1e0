"""The inventory's API: plain functions, one transaction each.

Callers get plain dicts and lists of dicts, never ORM rows, so nothing
outside this package holds a session or lazily loads from one.  Every
function opens its own transaction on the one engine of the process
(``get_engine()``), made on first use from ``[database] connection``.

Timestamps are naive UTC datetimes, in and out; an aware datetime
given to ``host_reports_save`` is converted to UTC first.
"""

import contextlib
import os
import threading
from typing import Any, Iterable, Iterator, Sequence

from oslo_db import api as oslo_db_api
from oslo_db import exception as db_exc
from oslo_db.sqlalchemy import engines
from oslo_serialization import jsonutils
from oslo_utils import timeutils
from oslo_utils import uuidutils
import sqlalchemy as sa
from sqlalchemy import orm

from scheduler import conf
from scheduler.db import models
from scheduler import exception

CONF = conf.CONF

CLAIMED = 'claimed'
ACTIVE = 'active'
AVAILABILITY_ZONE_KEY = 'availability_zone'

# Bound parameters in one IN (...) list.  Old SQLite builds accept 999
# a statement; this also keeps statements small on the other backends.
_IN_CHUNK = 500

_LOCK = threading.Lock()
_ENGINE: sa.Engine | None = None
_SESSION_MAKER: orm.sessionmaker | None = None

_UNSET: Any = object()

AggregateIdent = int | str


def _is_duplicate(exc: Exception) -> bool:
    return isinstance(exc, db_exc.DBDuplicateEntry)


# Writers that insert-or-update race with their twins in other
# schedulers: on a duplicate key the retry finds the row and updates it.
_retry_on_conflict = oslo_db_api.wrap_db_retry(
    max_retries=5, retry_interval=0.1, max_retry_interval=1,
    retry_on_deadlock=True, exception_checker=_is_duplicate)
_retry_on_deadlock = oslo_db_api.wrap_db_retry(
    max_retries=5, retry_interval=0.1, max_retry_interval=1,
    retry_on_deadlock=True)


# --- engine and transactions ---------------------------------------------

def make_engine(url: str) -> sa.Engine:
    """An engine for ``url`` with the ``[database]`` pool and retry options.

    Shared with ``scheduler.db.migration`` so that schema changes run with
    the same connection settings as the API.  PostgreSQL and MySQL go
    through oslo.db's engine factory; SQLite gets its own (see
    ``_sqlite_engine``).
    """
    parsed = sa.make_url(url)
    if parsed.get_backend_name() == 'sqlite':
        return _sqlite_engine(parsed)
    opts = CONF.database
    return engines.create_engine(
        url,
        mysql_sql_mode=opts.mysql_sql_mode,
        mysql_wsrep_sync_wait=opts.mysql_wsrep_sync_wait,
        connection_recycle_time=opts.connection_recycle_time,
        connection_debug=opts.connection_debug,
        connection_trace=opts.connection_trace,
        max_pool_size=opts.max_pool_size,
        max_overflow=opts.max_overflow,
        pool_timeout=opts.pool_timeout,
        max_retries=opts.max_retries,
        retry_interval=opts.retry_interval,
        connection_parameters=opts.connection_parameters,
    )


def _sqlite_engine(url: sa.URL) -> sa.Engine:
    """A SQLite engine safe for several processes writing one file.

    oslo.db's engine factory does the SQLite basics, as on the other
    backends: foreign keys on (the aggregate tables rely on ON DELETE
    CASCADE), the synchronous mode, its exception filters (a duplicate
    key is ``DBDuplicateEntry`` everywhere), one shared connection for
    an in-memory database and no pooled connection for a file, so a
    forked worker never inherits one.  Added here:

    * the file's directory is created: the default file lives under
      ``state_path``, which may not exist yet;
    * every transaction takes the write lock at BEGIN (IMMEDIATE).  In
      SQLite's default deferred transactions a reader that then writes
      cannot wait for another writer and fails at once with "database
      is locked"; scheduler workers, the CLI and the simulator's casts
      write concurrently.  With IMMEDIATE they queue on the busy
      timeout, and WAL keeps them from blocking readers.
    """
    in_memory = url.database in (None, '', ':memory:')
    if not in_memory:
        os.makedirs(os.path.dirname(os.path.abspath(url.database)),
                    exist_ok=True)
    engine = engines.create_engine(
        url.render_as_string(hide_password=False), sqlite_fk=True,
        sqlite_synchronous=CONF.database.sqlite_synchronous,
        connection_debug=CONF.database.connection_debug,
        connection_trace=CONF.database.connection_trace)

    @sa.event.listens_for(engine, 'connect')
    def _connect(dbapi_connection, _record):
        cursor = dbapi_connection.cursor()
        cursor.execute('PRAGMA busy_timeout = 30000')
        if not in_memory:
            cursor.execute('PRAGMA journal_mode = WAL')
        cursor.close()

    # oslo.db emits a plain (deferred) BEGIN from a listener of its own:
    # ours replaces it.
    for listener in list(engine.dispatch.begin):
        if getattr(listener, '__name__', '') == '_sqlite_emit_begin':
            sa.event.remove(engine, 'begin', listener)

    @sa.event.listens_for(engine, 'begin')
    def _begin(connection):
        connection.exec_driver_sql('BEGIN IMMEDIATE')

    return engine


def _engine_and_maker() -> tuple[sa.Engine, orm.sessionmaker]:
    global _ENGINE, _SESSION_MAKER
    with _LOCK:
        if _ENGINE is None or _SESSION_MAKER is None:
            url = CONF.database.connection
            if not url:
                raise exception.ConfigurationError(
                    reason='[database] connection is not set')
            _ENGINE = make_engine(url)
            _SESSION_MAKER = orm.sessionmaker(bind=_ENGINE,
                                              expire_on_commit=False)
        return _ENGINE, _SESSION_MAKER


def get_engine() -> sa.Engine:
    """The process's engine, made on first use from the configuration."""
    return _engine_and_maker()[0]


def reset_engine(close: bool = True) -> None:
    """Forget the engine; the next call makes a new one from the config.

    Tests call it after changing ``[database] connection``.  A forked
    child calls it with ``close=False``: the pooled connections belong to
    the parent and must be dropped without being closed under its feet.
    """
    global _ENGINE, _SESSION_MAKER
    with _LOCK:
        engine, _ENGINE, _SESSION_MAKER = _ENGINE, None, None
    if engine is not None:
        engine.dispose(close=close)


@contextlib.contextmanager
def _transaction() -> Iterator[orm.Session]:
    """A session in a transaction: committed on success, else rolled back."""
    with _engine_and_maker()[1].begin() as session:
        yield session


def _chunks(items: Sequence, size: int = _IN_CHUNK) -> Iterator[Sequence]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


# --- host reports ----------------------------------------------------------

def _host_dict(row: models.Host) -> dict:
    return {
        'id': row.id,
        'host': row.host,
        'nodename': row.nodename,
        'uuid': row.uuid,
        'report': jsonutils.loads(row.report),
        'disabled': row.disabled,
        'created_at': row.created_at,
        'updated_at': row.updated_at,
    }


def _newest_per_node(reports: Iterable[dict]) -> dict[tuple[str, str], dict]:
    """One row's values per (host, nodename): the newest report wins."""
    now = timeutils.utcnow()
    newest: dict[tuple[str, str], dict] = {}
    for report in reports:
        updated_at = report.get('updated_at')
        values = {
            'host': report['host'],
            'nodename': report['nodename'],
            'uuid': report.get('uuid'),
            'report': jsonutils.dumps(report['report']),
            'disabled': bool(report.get('disabled', False)),
            'updated_at': (timeutils.normalize_time(updated_at)
                           if updated_at is not None else now),
        }
        key = (values['host'], values['nodename'])
        seen = newest.get(key)
        if seen is None or seen['updated_at'] <= values['updated_at']:
            newest[key] = values
    return newest


def _lock_existing_nodes(session: orm.Session, hosts: Sequence[str]
                         ) -> dict[tuple[str, str], sa.Row]:
    """The stored nodes of ``hosts``, by key, locked until commit.

    The lock keeps a concurrent flush from slipping a newer report in
    between this read and our write.
    """
    table = models.Host
    found = {}
    for chunk in _chunks(hosts):
        rows = session.execute(
            sa.select(table.id, table.host, table.nodename,
                      table.created_at, table.updated_at)
            .where(table.host.in_(chunk))
            .with_for_update())
        for row in rows:
            found[(row.host, row.nodename)] = row
    return found


@_retry_on_conflict
def host_reports_save(reports: list[dict]) -> None:
    """Store the last report of many nodes at once.

    Each dict has ``host``, ``nodename``, ``uuid``, ``report`` (the
    HostState primitive, stored as JSON), ``disabled`` and
    ``updated_at``.  Built for the periodic flush of every node's report
    in one call: the stored keys are read once, then the rows are
    written in bulk.  A report older than the stored one is skipped, so
    that two schedulers flushing the same nodes never put an old report
    back.

    A changed row is deleted and inserted again with its id and
    created_at, rather than updated: a bulk UPDATE is one round trip a
    row with psycopg2 and PyMySQL (10,000 rows took 6-7 s), while
    DELETE ... IN and a multi-row INSERT take a few statements on every
    backend.  In one transaction, nobody sees the difference.
    """
    newest = _newest_per_node(reports)
    if not newest:
        return
    now = timeutils.utcnow()
    with _transaction() as session:
        existing = _lock_existing_nodes(
            session, sorted({host for host, _node in newest}))
        new_rows, kept_rows = [], []
        for key, values in newest.items():
            stored = existing.get(key)
            if stored is None:
                new_rows.append(dict(values, created_at=now))
            elif (stored.updated_at is None
                  or stored.updated_at <= values['updated_at']):
                kept_rows.append(dict(values, id=stored.id,
                                      created_at=stored.created_at))
        replaced = sorted(row['id'] for row in kept_rows)
        for chunk in _chunks(replaced):
            session.execute(sa.delete(models.Host).where(
                models.Host.id.in_(chunk)))
        # Rows that keep their id go back first: a new row inserted in
        # the same statement could otherwise be given one of the ids
        # just freed (SQLite reuses the highest), and the kept row
        # would then collide with it.
        if kept_rows:
            session.execute(sa.insert(models.Host), kept_rows)
        if new_rows:
            session.execute(sa.insert(models.Host), new_rows)


def host_reports_get_all() -> list[dict]:
    """Every stored node with its report decoded, by (host, nodename)."""
    with _transaction() as session:
        rows = session.scalars(sa.select(models.Host).order_by(
            models.Host.host, models.Host.nodename))
        return [_host_dict(row) for row in rows]


@_retry_on_deadlock
def host_delete(host: str, nodename: str | None = None) -> int:
    """Forget a host's nodes (or one of them); returns how many went."""
    stmt = sa.delete(models.Host).where(models.Host.host == host)
    if nodename is not None:
        stmt = stmt.where(models.Host.nodename == nodename)
    with _transaction() as session:
        return session.execute(stmt).rowcount


# --- aggregates ------------------------------------------------------------

def _aggregate_dict(agg: models.Aggregate) -> dict:
    metadata = {item.key: item.value for item in agg.metadata_items}
    return {
        'id': agg.id,
        'uuid': agg.uuid,
        'name': agg.name,
        'hosts': sorted(item.host for item in agg.hosts),
        'metadata': metadata,
        'availability_zone': metadata.get(AVAILABILITY_ZONE_KEY),
        'created_at': agg.created_at,
        'updated_at': agg.updated_at,
    }


def _lookup_clauses(ident: AggregateIdent) -> list:
    """Where to look for ``ident``, most specific first.

    An int is an id.  A string is a uuid when it looks like one, else a
    name; a string of digits naming no aggregate is tried as an id, as
    command lines pass every argument as a string.
    """
    if isinstance(ident, bool):
        return []
    if isinstance(ident, int):
        return [models.Aggregate.id == ident]
    ident = str(ident)
    clauses = []
    if uuidutils.is_uuid_like(ident):
        clauses.append(models.Aggregate.uuid == ident)
    clauses.append(models.Aggregate.name == ident)
    if ident.isdigit():
        clauses.append(models.Aggregate.id == int(ident))
    return clauses


def _find_aggregate(session: orm.Session,
                    ident: AggregateIdent) -> models.Aggregate:
    for clause in _lookup_clauses(ident):
        agg = session.scalars(sa.select(models.Aggregate).where(clause)
                              ).first()
        if agg is not None:
            return agg
    raise exception.AggregateNotFound(aggregate=ident)


def _check_name_free(session: orm.Session, name: str,
                     owner_id: int | None = None) -> None:
    """Raise AggregateNameExists unless ``name`` is free or ``owner_id``'s."""
    other = session.scalar(sa.select(models.Aggregate.id).where(
        models.Aggregate.name == name))
    if other is not None and other != owner_id:
        raise exception.AggregateNameExists(name=name)


def _flush(session: orm.Session, agg: models.Aggregate) -> None:
    """Flush, telling a lost race on the name from other duplicates."""
    try:
        session.flush()
    except db_exc.DBDuplicateEntry as exc:
        if 'name' in exc.columns:
            raise exception.AggregateNameExists(name=agg.name) from exc
        raise


def _set_metadata(agg: models.Aggregate, metadata: dict) -> None:
    """Set keys in place (a value of None removes the key).

    Existing rows are updated rather than replaced: the unit of work
    inserts before it deletes, so replacing a key would collide with
    its own unique constraint.
    """
    items = {item.key: item for item in agg.metadata_items}
    for key, value in metadata.items():
        item = items.get(key)
        if value is None:
            if item is not None:
                agg.metadata_items.remove(item)
        elif item is not None:
            item.value = str(value)
        else:
            agg.metadata_items.append(
                models.AggregateMetadata(key=key, value=str(value)))


def _set_hosts(agg: models.Aggregate, hosts: Iterable[str]) -> None:
    """Make the membership exactly ``hosts``, keeping the rows that stay."""
    wanted = set(hosts)
    for item in list(agg.hosts):
        if item.host in wanted:
            wanted.discard(item.host)
        else:
            agg.hosts.remove(item)
    for host in sorted(wanted):
        agg.hosts.append(models.AggregateHost(host=host))


@_retry_on_deadlock
def aggregate_create(name: str, availability_zone: str | None = None,
                     metadata: dict | None = None,
                     uuid: str | None = None) -> dict:
    """Create an aggregate; its zone is kept as metadata, as nova does."""
    metadata = dict(metadata or {})
    if availability_zone is not None:
        metadata[AVAILABILITY_ZONE_KEY] = availability_zone
    now = timeutils.utcnow()
    with _transaction() as session:
        _check_name_free(session, name)
        agg = models.Aggregate(uuid=uuid or uuidutils.generate_uuid(),
                               name=name, created_at=now, updated_at=now,
                               hosts=[], metadata_items=[])
        _set_metadata(agg, metadata)
        session.add(agg)
        _flush(session, agg)
        return _aggregate_dict(agg)


def aggregate_get(ident: AggregateIdent) -> dict:
    """One aggregate by id, uuid or name."""
    with _transaction() as session:
        return _aggregate_dict(_find_aggregate(session, ident))


def aggregates_stamp() -> tuple:
    """A cheap marker that changes whenever any aggregate changes.

    ``(count, newest updated_at, highest id)``: every aggregate write
    bumps ``updated_at``, a delete lowers the count.  Schedulers compare
    it before re-reading every aggregate and its hosts.
    """
    with _transaction() as session:
        row = session.execute(sa.select(
            sa.func.count(models.Aggregate.id),
            sa.func.max(models.Aggregate.updated_at),
            sa.func.max(models.Aggregate.id))).one()
        return tuple(row)


def aggregate_get_all() -> list[dict]:
    """Every aggregate, by name."""
    with _transaction() as session:
        aggs = session.scalars(sa.select(models.Aggregate).order_by(
            models.Aggregate.name))
        return [_aggregate_dict(agg) for agg in aggs]


@_retry_on_deadlock
def aggregate_update(ident: AggregateIdent, name: str | None = None,
                     availability_zone: str | None = _UNSET) -> dict:
    """Rename an aggregate and/or change its zone.

    ``availability_zone`` left out keeps the zone; None removes it.
    """
    with _transaction() as session:
        agg = _find_aggregate(session, ident)
        if name is not None and name != agg.name:
            _check_name_free(session, name, owner_id=agg.id)
            agg.name = name
        if availability_zone is not _UNSET:
            _set_metadata(agg, {AVAILABILITY_ZONE_KEY: availability_zone})
        agg.updated_at = timeutils.utcnow()
        _flush(session, agg)
        return _aggregate_dict(agg)


@_retry_on_deadlock
def aggregate_metadata_set(ident: AggregateIdent, metadata: dict) -> dict:
    """Set metadata keys; a value of None deletes its key."""
    with _transaction() as session:
        agg = _find_aggregate(session, ident)
        _set_metadata(agg, metadata)
        agg.updated_at = timeutils.utcnow()
        _flush(session, agg)
        return _aggregate_dict(agg)


def aggregate_metadata_unset(ident: AggregateIdent,
                             keys: Iterable[str]) -> dict:
    """Delete metadata keys; keys that are not set are ignored."""
    return aggregate_metadata_set(ident, dict.fromkeys(keys))


@_retry_on_deadlock
def aggregate_host_add(ident: AggregateIdent, host: str) -> dict:
    """Add a host to an aggregate."""
    with _transaction() as session:
        agg = _find_aggregate(session, ident)
        if any(item.host == host for item in agg.hosts):
            raise exception.AggregateHostExists(host=host, aggregate=ident)
        agg.hosts.append(models.AggregateHost(host=host))
        agg.updated_at = timeutils.utcnow()
        try:
            session.flush()
        except db_exc.DBDuplicateEntry as exc:
            raise exception.AggregateHostExists(
                host=host, aggregate=ident) from exc
        return _aggregate_dict(agg)


@_retry_on_deadlock
def aggregate_host_remove(ident: AggregateIdent, host: str) -> dict:
    """Remove a host from an aggregate."""
    with _transaction() as session:
        agg = _find_aggregate(session, ident)
        for item in agg.hosts:
            if item.host == host:
                agg.hosts.remove(item)
                break
        else:
            raise exception.AggregateHostNotFound(host=host, aggregate=ident)
        agg.updated_at = timeutils.utcnow()
        session.flush()
        return _aggregate_dict(agg)


@_retry_on_deadlock
def aggregate_delete(ident: AggregateIdent) -> None:
    """Delete an aggregate; the database cascades to its hosts and metadata."""
    with _transaction() as session:
        for clause in _lookup_clauses(ident):
            if session.execute(sa.delete(models.Aggregate).where(clause)
                               ).rowcount:
                return
    raise exception.AggregateNotFound(aggregate=ident)


@_retry_on_conflict
def aggregate_upsert(agg: dict) -> dict:
    """Make the aggregate exactly ``agg``, creating it if needed.

    For aggregates owned by another service that casts its changes:
    ``agg`` has ``name`` and optionally ``uuid``, ``hosts``, ``metadata``
    and ``availability_zone`` (the shape ``aggregate_get`` returns).  The
    stored aggregate is found by uuid, else by name; its name, uuid, hosts
    and metadata are replaced.  Raises AggregateNameExists when the name
    belongs to another aggregate with a different uuid.
    """
    name = agg['name']
    uuid = agg.get('uuid')
    metadata = dict(agg.get('metadata') or {})
    if agg.get('availability_zone') is not None:
        metadata[AVAILABILITY_ZONE_KEY] = agg['availability_zone']
    now = timeutils.utcnow()
    with _transaction() as session:
        row = None
        if uuid:
            row = session.scalars(sa.select(models.Aggregate).where(
                models.Aggregate.uuid == uuid)).first()
        if row is None:
            row = session.scalars(sa.select(models.Aggregate).where(
                models.Aggregate.name == name)).first()
        if row is None:
            row = models.Aggregate(uuid=uuid or uuidutils.generate_uuid(),
                                   created_at=now, hosts=[],
                                   metadata_items=[])
            session.add(row)
        else:
            _check_name_free(session, name, owner_id=row.id)
            if uuid:
                row.uuid = uuid
        row.name = name
        row.updated_at = now
        _set_hosts(row, agg.get('hosts') or ())
        changes = dict.fromkeys(item.key for item in row.metadata_items)
        changes.update(metadata)
        _set_metadata(row, changes)
        session.flush()
        return _aggregate_dict(row)


# --- instances (claims and placements) ---------------------------------

def _instance_dict(row: models.Instance) -> dict:
    return {
        'instance_uuid': row.instance_uuid,
        'host': row.host,
        'nodename': row.nodename,
        'project_id': row.project_id,
        'user_id': row.user_id,
        'memory_mb': row.memory_mb,
        'vcpus': row.vcpus,
        'disk_gb': row.disk_gb,
        'status': row.status,
        'pending': bool(row.pending),
        'created_at': row.created_at,
        'updated_at': row.updated_at,
    }


def instance_get_all(host: str | None = None) -> list[dict]:
    """Every placement (or those on ``host``), by host, node and uuid."""
    stmt = sa.select(models.Instance).order_by(
        models.Instance.host, models.Instance.nodename,
        models.Instance.instance_uuid)
    if host is not None:
        stmt = stmt.where(models.Instance.host == host)
    with _transaction() as session:
        return [_instance_dict(row) for row in session.scalars(stmt)]
