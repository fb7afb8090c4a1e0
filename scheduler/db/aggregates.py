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


@engine.retry_on_deadlock
def aggregate_create(name: str, availability_zone: str | None = None,
                     metadata: dict | None = None,
                     uuid: str | None = None) -> dict:
    """Create an aggregate; its zone is kept as metadata, as nova does."""
    metadata = dict(metadata or {})
    if availability_zone is not None:
        metadata[AVAILABILITY_ZONE_KEY] = availability_zone
    now = timeutils.utcnow()
    with transaction() as session:
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
    with transaction() as session:
        return _aggregate_dict(_find_aggregate(session, ident))


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
            models.Aggregate.name))
        return [_aggregate_dict(agg) for agg in aggs]


@engine.retry_on_deadlock
def aggregate_update(ident: AggregateIdent, name: str | None = None,
                     availability_zone: str | None = _UNSET) -> dict:
    """Rename an aggregate and/or change its zone.

    ``availability_zone`` left out keeps the zone; None removes it.
    """
    with transaction() as session:
        agg = _find_aggregate(session, ident)
        if name is not None and name != agg.name:
            _check_name_free(session, name, owner_id=agg.id)
            agg.name = name
        if availability_zone is not _UNSET:
            _set_metadata(agg, {AVAILABILITY_ZONE_KEY: availability_zone})
        agg.updated_at = timeutils.utcnow()
        _flush(session, agg)
        return _aggregate_dict(agg)


@engine.retry_on_deadlock
def aggregate_metadata_set(ident: AggregateIdent, metadata: dict) -> dict:
    """Set metadata keys; a value of None deletes its key."""
    with transaction() as session:
        agg = _find_aggregate(session, ident)
        _set_metadata(agg, metadata)
        agg.updated_at = timeutils.utcnow()
        _flush(session, agg)
        return _aggregate_dict(agg)


def aggregate_metadata_unset(ident: AggregateIdent,
                             keys: Iterable[str]) -> dict:
    """Delete metadata keys; keys that are not set are ignored."""
    return aggregate_metadata_set(ident, dict.fromkeys(keys))


@engine.retry_on_deadlock
def aggregate_host_add(ident: AggregateIdent, host: str) -> dict:
    """Add a host to an aggregate."""
    with transaction() as session:
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


@engine.retry_on_deadlock
def aggregate_host_remove(ident: AggregateIdent, host: str) -> dict:
    """Remove a host from an aggregate."""
    with transaction() as session:
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
