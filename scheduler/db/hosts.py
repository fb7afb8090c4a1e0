"""The ``hosts`` table: the last report of every compute node.

Functions return plain dicts, never ORM rows (see ``scheduler.db.api``).
Timestamps are naive UTC datetimes, in and out; an aware datetime
given to ``host_reports_save_with_usage`` is converted to UTC first.
"""

import dataclasses
import datetime
import typing
from typing import Iterable, Sequence

from oslo_serialization import jsonutils
from oslo_utils import timeutils
import sqlalchemy as sa
from sqlalchemy import orm

from scheduler.db import engine
from scheduler.db.engine import chunks
from scheduler.db.engine import transaction
from scheduler.db import models
from scheduler.db import usage


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
        'seq': row.seq or 0,
        'changed_seq': row.changed_seq or 0,
    }


def _next_report_seq(session: orm.Session) -> int:
    """The next report sequence number, its row locked until commit.

    Taken in every transaction that writes ``hosts``, before its first
    write of a row there, and held to its commit: writers take turns
    on it, so their rows become visible in sequence order and a reader
    of ``host_reports_changed_since`` misses none.
    """
    return models.take_counter(session.connection(),
                               models.REPORT_COUNTER_ROW)


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


def host_reports_save(reports: list[dict]) -> int | None:
    """``host_reports_save_with_usage`` of reports without usage (the
    CLI's and the tests' setting of the stored reports); the report
    sequence number of the rows (None when nothing was given)."""
    return host_reports_save_with_usage(reports, ()).seq


@dataclasses.dataclass
class ReportsWritten:
    """What ``host_reports_save_with_usage`` wrote: the report sequence
    number of the rows (None when no report was given) and
    ``usage.apply_in``'s ``Applied`` (None when no usage was given)."""

    seq: int | None
    applied: typing.Any = None


@engine.retry_on_conflict
def host_reports_save_with_usage(reports: list[dict],
                                 usage_reports: Sequence) -> ReportsWritten:
    """Store the last report of many nodes, and the usage they carry, in
    one transaction: the one way a report reaches the inventory, from
    the intake (``HostManager._write_taken``) and from the periodic
    flush (``ReportBacklog.write``).

    ``reports`` are dicts with ``host``, ``nodename``, ``uuid``,
    ``report`` (the HostState primitive, stored as JSON), ``disabled``
    and ``updated_at``; a report older than the stored one is skipped,
    so that two schedulers writing the same nodes never put an old
    report back.  Every row written gets the transaction's report
    sequence number as ``seq`` and ``changed_seq``.  ``usage_reports``
    (``usage.NodeReport``) are written as ``usage.apply_reports``
    writes them, and the usage rows and pending placements of their
    nodes are read back in the same transaction (``usage.apply_in``):
    every worker sees the reports and their usage at once.

    The usage first, as every writer of usage locks its rows (and then
    the placement rows); then the report sequence number, held from
    there to the commit, and the hosts rows: their writers queue on
    that number for no longer than the hosts part and the commit.
    """
    newest = _newest_per_node(reports)
    newest_usage = usage.newest_reports(usage_reports)
    if not newest and not newest_usage:
        return ReportsWritten(None)
    with transaction(read_committed=True) as session:
        applied = (usage.apply_in(session, newest_usage, read_back=True)
                   if newest_usage else None)
        seq = _save_in(session, newest) if newest else None
    return ReportsWritten(seq, applied)


def _save_in(session: orm.Session, newest: dict) -> int:
    """Write the rows ``newest`` (``_newest_per_node``) in the caller's
    transaction; their report sequence number.

    On PostgreSQL a changed row is updated, all of them in one
    statement (``engine.update_from_arrays``).  Elsewhere it is deleted
    and inserted again with its id and created_at: a bulk UPDATE is one
    round trip a row with PyMySQL, while DELETE ... IN and a multi-row
    INSERT take a few statements.  In one transaction, nobody sees the
    difference.
    """
    now = timeutils.utcnow()
    seq = _next_report_seq(session)
    for values in newest.values():
        values['seq'] = values['changed_seq'] = seq
    # Locked: a concurrent flush cannot slip a newer report in
    # between this read and the write.
    existing = {
        (row.host, row.nodename): row
        for chunk in chunks(sorted({host for host, _node in newest}))
        for row in session.execute(_STORED_ON, {'hosts': chunk})}
    new_rows, kept_rows = [], []
    for key, values in newest.items():
        stored = existing.get(key)
        if stored is None:
            new_rows.append(dict(values, created_at=now))
        elif (stored.updated_at is None
              or stored.updated_at <= values['updated_at']):
            kept_rows.append(dict(values, id=stored.id,
                                  created_at=stored.created_at))
    conn = session.connection()
    if kept_rows and conn.dialect.name == 'postgresql':
        for chunk in chunks(kept_rows):
            conn.execute(_UPDATE_FROM_ARRAYS,
                         engine.update_from_arrays_params(
                             [dict(row, _id=row['id']) for row in chunk],
                             _WRITTEN))
        kept_rows = []
    for chunk in chunks(sorted(row['id'] for row in kept_rows)):
        conn.execute(sa.delete(models.Host).where(
            models.Host.id.in_(chunk)))
    # Rows that keep their id go back first: a new row inserted in
    # the same statement could otherwise be given one of the ids
    # just freed (SQLite reuses the highest), and the kept row
    # would then collide with it.
    if kept_rows:
        conn.execute(sa.insert(models.Host), kept_rows)
    if new_rows:
        conn.execute(sa.insert(models.Host), new_rows)
    return seq


_HOSTS_TABLE = models.Host.__table__
#: The columns a changed row's write sets.
_WRITTEN = ('uuid', 'report', 'disabled', 'updated_at', 'seq',
            'changed_seq')
_UPDATE_FROM_ARRAYS = engine.update_from_arrays(_HOSTS_TABLE, _WRITTEN)
# Built once: building it, its cache key and its IN list each time cost
# more than its round trip.
_STORED_ON = sa.select(*[_HOSTS_TABLE.c[name] for name in (
    'id', 'host', 'nodename', 'created_at', 'updated_at')]).where(
        _HOSTS_TABLE.c.host.in_(sa.bindparam('hosts', expanding=True))
).with_for_update()


@engine.retry_on_deadlock
def host_reports_touch(keys: list, when: datetime.datetime) -> int:
    """Give the stored reports of nodes ``keys`` (``(host, nodename)``)
    the time ``when``: they reported again with nothing new.  A row
    already newer keeps its time.  The rows touched get the
    transaction's report sequence number as ``seq`` (not as
    ``changed_seq``); returns it."""
    table = models.Host
    with transaction() as session:
        seq = _next_report_seq(session)
        for chunk in chunks(sorted(keys)):
            session.execute(sa.update(table).where(
                *_nodes(chunk), table.updated_at < when).values(
                    updated_at=when, seq=seq))
    return seq


def _nodes(chunk: Sequence[tuple[str, str]]) -> tuple:
    """The WHERE clauses of nodes ``chunk``: the host list lets every
    backend use the (host, nodename) index; the pairs pick the nodes."""
    return (models.Host.host.in_(sorted({host for host, _node in chunk})),
            sa.tuple_(models.Host.host, models.Host.nodename).in_(chunk))


def host_reports_get_all() -> list[dict]:
    """Every stored node with its report decoded, by (host, nodename)."""
    with transaction() as session:
        rows = session.scalars(sa.select(models.Host).order_by(
            models.Host.host, models.Host.nodename))
        return [_host_dict(row) for row in rows]


_CHANGED_SINCE_NAMES = ('host', 'nodename', 'seq', 'changed_seq',
                        'updated_at', 'disabled')
_CHANGED_SINCE = sa.select(
    *[models.Host.__table__.c[name] for name in _CHANGED_SINCE_NAMES]
).where(models.Host.changed_seq > sa.bindparam('seq', type_=sa.BigInteger)
        ).order_by(models.Host.changed_seq)


def host_reports_changed_since(changed_seq: int) -> list[dict]:
    """The nodes whose report itself (not only its time) was written
    after report sequence ``changed_seq``, in ``changed_seq`` order,
    without their reports: ``host``, ``nodename``, ``seq``,
    ``changed_seq``, ``updated_at`` and ``disabled``.

    Run by every worker before every request: one probe of the
    ``changed_seq`` index, which finds nothing while only times change.
    """
    rows = engine.run_read(lambda conn: conn.execute(
        _CHANGED_SINCE, {'seq': changed_seq}).all())
    return [dict(zip(_CHANGED_SINCE_NAMES, row)) for row in rows]


def host_report_times(keys: Sequence[tuple[str, str]]) -> list[dict]:
    """The stored times of nodes ``keys`` (``(host, nodename)``):
    ``host``, ``nodename`` and ``updated_at`` of each stored one, no
    report.

    Read now and then by every worker for the nodes whose time it
    holds is getting old (``HostManager.refresh_reports``): by the
    (host, nodename) index, so a worker pays for the nodes it asks
    about, not for every time the deployment renewed.
    """
    table = models.Host
    with transaction() as session:
        return [{'host': host, 'nodename': nodename, 'updated_at': updated}
                for chunk in chunks(sorted(set(keys)))
                for host, nodename, updated in session.execute(sa.select(
                    table.host, table.nodename, table.updated_at).where(
                        *_nodes(chunk)))]


def host_reports_get(keys: Sequence[tuple[str, str]]) -> list[dict]:
    """The stored nodes ``keys`` (``(host, nodename)``) with their
    reports decoded, as ``host_reports_get_all`` gives them.

    Part of the freshness read before a request: outside a transaction
    (``engine.run_read``), one round trip a chunk on PostgreSQL; each
    statement reads a snapshot of its own either way (READ
    COMMITTED)."""
    wanted = set(keys)
    hosts = sorted({host for host, _node in wanted})

    def read(conn) -> list[dict]:
        found = []
        with orm.Session(bind=conn) as session:
            for chunk in chunks(hosts):
                for row in session.scalars(sa.select(models.Host).where(
                        models.Host.host.in_(chunk))):
                    if (row.host, row.nodename) in wanted:
                        found.append(_host_dict(row))
        return found
    return engine.run_read(read)


def report_seq() -> int:
    """The highest report sequence number handed out."""
    with transaction() as session:
        return session.execute(sa.select(models.UsageCounter.value).where(
            models.UsageCounter.id == models.REPORT_COUNTER_ROW)
        ).scalar() or 0


@engine.retry_on_deadlock
def host_delete(host: str, nodename: str | None = None) -> int:
    """Forget a host's nodes (or one of them); returns how many went."""
    stmt = sa.delete(models.Host).where(models.Host.host == host)
    if nodename is not None:
        stmt = stmt.where(models.Host.nodename == nodename)
    with transaction() as session:
        return session.execute(stmt).rowcount
