"""The aggregate tables: aggregates, their hosts and their metadata.

An aggregate is named by ``AggregateIdent``: its id, uuid or name.  Its
availability zone is kept as metadata (``AVAILABILITY_ZONE_KEY``), as
nova keeps it.  Functions return plain dicts, never ORM rows.
"""

from typing import Any, Iterable

from oslo_db import exception as db_exc
from oslo_utils import timeutils
from oslo_utils import uuidutils
import sqlalchemy as sa
from sqlalchemy import orm

from scheduler.db import engine
from scheduler.db.engine import transaction
from scheduler.db import models
from scheduler import exception

AVAILABILITY_ZONE_KEY = 'availability_zone'

AggregateIdent = int | str

_UNSET: Any = object()


_HOSTS = models.AggregateHost.__table__


def _aggregate_dict(agg: models.Aggregate, hosts: list[str]) -> dict:
    metadata = {item.key: item.value for item in agg.metadata_items}
    return {
        'id': agg.id,
        'uuid': agg.uuid,
        'name': agg.name,
        'hosts': hosts,
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


def _changed(session: orm.Session, agg: models.Aggregate,
             hosts: list[str] | None = None) -> dict:
    """``agg`` changed: stamped, flushed; as returned (with ``hosts``, or
    those read)."""
    agg.updated_at = timeutils.utcnow()
    _flush(session, agg)
    return _aggregate_dict(agg, _hosts_of(session, agg) if hosts is None
                           else hosts)


def _set_metadata(agg: models.Aggregate, metadata: dict) -> None:
    """Set keys in place (a value of None removes the key).

    Existing rows are updated rather than replaced: the unit of work
    inserts before it deletes, so replacing a key would collide with
    its own unique constraint.
    """
    items = {item.key: item for item in agg.metadata_items}
    for key, value in metadata.items():
        models.storable(key, 'metadata key')
        if value is not None:
            models.storable(str(value), 'metadata value', shortest=0)
        item = items.get(key)
        if value is None:
            if item is not None:
                agg.metadata_items.remove(item)
        elif item is not None:
            item.value = str(value)
        else:
            agg.metadata_items.append(
                models.AggregateMetadata(key=key, value=str(value)))


def _hosts_by_aggregate(session: orm.Session,
                        ids: Iterable[int] | None = None) -> dict:
    """Aggregate id -> its hosts, sorted: of aggregates ``ids``, or of
    every aggregate.

    Read as plain strings, never as an ORM row per host: a zone of
    50,000 hosts read (or written) as rows made over a million
    short-lived objects, and a service that took reports meanwhile kept
    the memory they had been made in (the allocator cannot move the
    long-lived objects made between them).
    """
    query = sa.select(_HOSTS.c.aggregate_id, _HOSTS.c.host)
    if ids is None:
        found: dict = {}
        rows = session.execute(query)
    else:
        ids = sorted(set(ids))
        found = {agg_id: [] for agg_id in ids}
        rows = (row for chunk in engine.chunks(ids) for row in
                session.execute(query.where(_HOSTS.c.aggregate_id.in_(chunk))))
    for agg_id, host in rows:
        found.setdefault(agg_id, []).append(host)
    for hosts in found.values():
        hosts.sort()   # here: a server's collation may order otherwise
    return found


def _hosts_of(session: orm.Session, agg: models.Aggregate) -> list[str]:
    return _hosts_by_aggregate(session, [agg.id])[agg.id]


def _set_hosts(session: orm.Session, agg: models.Aggregate,
               hosts: Iterable[str]) -> list[str]:
    """Make the membership exactly ``hosts``, keeping the rows that stay
    (written a chunk of hosts a statement); returns it, sorted."""
    wanted = set(hosts)
    have = set(_hosts_of(session, agg))
    gone = sorted(have - wanted)
    new = sorted(wanted - have)
    for chunk in engine.chunks(gone):
        session.execute(sa.delete(_HOSTS).where(
            _HOSTS.c.aggregate_id == agg.id, _HOSTS.c.host.in_(chunk)))
    for chunk in engine.chunks(new):
        session.execute(sa.insert(_HOSTS), [
            {'aggregate_id': agg.id, 'host': host} for host in chunk])
    return sorted(wanted)


@engine.retry_on_deadlock
def aggregate_create(name: str, availability_zone: str | None = None,
                     metadata: dict | None = None,
                     uuid: str | None = None) -> dict:
    """Create an aggregate; its zone is kept as metadata, as nova does."""
    metadata = dict(metadata or {})
    if availability_zone is not None:
        metadata[AVAILABILITY_ZONE_KEY] = availability_zone
    now = timeutils.utcnow()
    models.storable(name, 'aggregate name')
    if uuid:
        models.storable(uuid, 'aggregate uuid', models.UUID_LENGTH)
    with transaction() as session:
        _check_name_free(session, name)
        agg = models.Aggregate(uuid=uuid or uuidutils.generate_uuid(),
                               name=name, created_at=now, updated_at=now,
                               metadata_items=[])
        _set_metadata(agg, metadata)
        session.add(agg)
        _flush(session, agg)
        return _aggregate_dict(agg, [])


def aggregate_get(ident: AggregateIdent) -> dict:
    """One aggregate by id, uuid or name."""
    with transaction() as session:
        agg = _find_aggregate(session, ident)
        return _aggregate_dict(agg, _hosts_of(session, agg))


def aggregates_stamp() -> tuple:
    """A cheap marker that changes whenever any aggregate changes.

    ``(count, newest updated_at, highest id)``: every aggregate write
    bumps ``updated_at``, a delete lowers the count.  Schedulers compare
    it before re-reading every aggregate and its hosts.
    """
    with transaction() as session:
        row = session.execute(sa.select(
            sa.func.count(models.Aggregate.id),
            sa.func.max(models.Aggregate.updated_at),
            sa.func.max(models.Aggregate.id))).one()
        return tuple(row)


def aggregate_get_all() -> list[dict]:
    """Every aggregate, by name."""
    with transaction() as session:
        aggs = session.scalars(sa.select(models.Aggregate).order_by(
            models.Aggregate.name)).all()
        hosts = _hosts_by_aggregate(session)
        return [_aggregate_dict(agg, hosts.get(agg.id, [])) for agg in aggs]


@engine.retry_on_deadlock
def aggregate_update(ident: AggregateIdent, name: str | None = None,
                     availability_zone: str | None = _UNSET) -> dict:
    """Rename an aggregate and/or change its zone.

    ``availability_zone`` left out keeps the zone; None removes it.
    """
    with transaction() as session:
        agg = _find_aggregate(session, ident)
        if name is not None and name != agg.name:
            models.storable(name, 'aggregate name')
            _check_name_free(session, name, owner_id=agg.id)
            agg.name = name
        if availability_zone is not _UNSET:
            _set_metadata(agg, {AVAILABILITY_ZONE_KEY: availability_zone})
        return _changed(session, agg)


@engine.retry_on_deadlock
def aggregate_metadata_set(ident: AggregateIdent, metadata: dict) -> dict:
    """Set metadata keys; a value of None deletes its key."""
    with transaction() as session:
        agg = _find_aggregate(session, ident)
        _set_metadata(agg, metadata)
        return _changed(session, agg)


def aggregate_metadata_unset(ident: AggregateIdent,
                             keys: Iterable[str]) -> dict:
    """Delete metadata keys; keys that are not set are ignored."""
    return aggregate_metadata_set(ident, dict.fromkeys(keys))


@engine.retry_on_deadlock
def aggregate_host_add(ident: AggregateIdent, host: str) -> dict:
    """Add a host to an aggregate."""
    models.storable(host, 'host')
    with transaction() as session:
        agg = _find_aggregate(session, ident)
        hosts = _hosts_of(session, agg)
        if host in hosts:
            raise exception.AggregateHostExists(host=host, aggregate=ident)
        try:
            session.execute(sa.insert(_HOSTS).values(aggregate_id=agg.id,
                                                     host=host))
        except db_exc.DBDuplicateEntry as exc:
            raise exception.AggregateHostExists(
                host=host, aggregate=ident) from exc
        return _changed(session, agg, sorted(hosts + [host]))


@engine.retry_on_deadlock
def aggregate_host_remove(ident: AggregateIdent, host: str) -> dict:
    """Remove a host from an aggregate."""
    with transaction() as session:
        agg = _find_aggregate(session, ident)
        if not session.execute(sa.delete(_HOSTS).where(
                _HOSTS.c.aggregate_id == agg.id,
                _HOSTS.c.host == host)).rowcount:
            raise exception.AggregateHostNotFound(host=host, aggregate=ident)
        return _changed(session, agg)


@engine.retry_on_deadlock
def aggregate_delete(ident: AggregateIdent) -> None:
    """Delete an aggregate; the database cascades to its hosts and metadata."""
    with transaction() as session:
        for clause in _lookup_clauses(ident):
            if session.execute(sa.delete(models.Aggregate).where(clause)
                               ).rowcount:
                return
    raise exception.AggregateNotFound(aggregate=ident)


@engine.retry_on_conflict
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
    with transaction() as session:
        row = None
        if uuid:
            row = session.scalars(sa.select(models.Aggregate).where(
                models.Aggregate.uuid == uuid)).first()
        if row is None:
            row = session.scalars(sa.select(models.Aggregate).where(
                models.Aggregate.name == name)).first()
        if row is None:
            row = models.Aggregate(uuid=uuid or uuidutils.generate_uuid(),
                                   created_at=now, metadata_items=[])
            session.add(row)
        else:
            _check_name_free(session, name, owner_id=row.id)
            if uuid:
                row.uuid = uuid
        row.name = name
        row.updated_at = now
        session.flush()   # a new row's id, for its hosts
        hosts = _set_hosts(session, row, agg.get('hosts') or ())
        changes = dict.fromkeys(item.key for item in row.metadata_items)
        changes.update(metadata)
        _set_metadata(row, changes)
        session.flush()
        return _aggregate_dict(row, hosts)
