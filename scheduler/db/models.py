"""The inventory's tables, as SQLAlchemy declarative models.

The migrations in ``scheduler.db.migrations`` create these same tables;
``tests/unit/db/test_migrations.py`` checks that the two never drift.

Portability choices, made once here so that every backend behaves alike:

* every string has an explicit length and every unique key stays far
  below MySQL's 3072-byte index limit with utf8mb4 (4 bytes a character);
* MySQL tables use the binary utf8mb4 collation, so that ``'Node1'`` and
  ``'node1'`` are two hosts there too, as on SQLite and PostgreSQL;
* timestamps are naive UTC; MySQL keeps their microseconds (``fsp=6``)
  so they round-trip unchanged;
* the JSON report is a MEDIUMTEXT on MySQL, whose TEXT stops at 64 KiB.
"""

import datetime
import re

import sqlalchemy as sa
from sqlalchemy.dialects import mysql
from sqlalchemy import orm

from scheduler import exception

MYSQL_TABLE_ARGS = {
    'mysql_engine': 'InnoDB',
    'mysql_charset': 'utf8mb4',
    'mysql_collate': 'utf8mb4_bin',
}

#: Widths of the inventory's uuid and other string columns, and the
#: largest value of its (32-bit) integer columns: PostgreSQL and MySQL
#: refuse more with an untyped database error (``storable``).
UUID_LENGTH = 36
TEXT_LENGTH = 255
MAX_INT = 2 ** 31 - 1
#: Control characters, which PostgreSQL (NUL) and MySQL refuse or
#: mangle, and lone surrogates (a JSON "\ud800"), which UTF-8 cannot
#: encode.
_UNSTORABLE = re.compile(r'[\x00-\x1f\x7f\ud800-\udfff]')


def storable(value, what: str, longest: int = TEXT_LENGTH,
             shortest: int = 1) -> str:
    """``value`` if a string column ``longest`` characters wide can hold
    it, else ``InvalidRequest`` naming ``what``: checked before a write,
    so that one bad value is the caller's error, not a failed write."""
    if (not isinstance(value, str) or not shortest <= len(value) <= longest
            or _UNSTORABLE.search(value)):
        raise exception.InvalidRequest(
            reason='%s %.40r is not %d to %d printable characters'
                   % (what, value, shortest, longest))
    return value


DateTime = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mysql',
                                      'mariadb')
LongText = sa.Text().with_variant(mysql.MEDIUMTEXT(), 'mysql', 'mariadb')


class Base(orm.DeclarativeBase):
    """Base of the inventory's models."""


class Host(Base):
    """The last report of one compute node, keyed by (host, nodename)."""

    __tablename__ = 'hosts'
    __table_args__ = (
        sa.UniqueConstraint('host', 'nodename',
                            name='uniq_hosts0host0nodename'),
        sa.Index('hosts_seq_idx', 'seq'),
        sa.Index('hosts_changed_seq_idx', 'changed_seq'),
        MYSQL_TABLE_ARGS,
    )

    id: orm.Mapped[int] = orm.mapped_column(sa.Integer, primary_key=True,
                                            autoincrement=True)
    host: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    nodename: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    uuid: orm.Mapped[str | None] = orm.mapped_column(sa.String(36))
    # The HostState primitive (obj_to_primitive()) as a JSON document.
    report: orm.Mapped[str] = orm.mapped_column(LongText)
    disabled: orm.Mapped[bool] = orm.mapped_column(sa.Boolean,
                                                   default=False)
    # When the compute produced the report, not when the row was written.
    updated_at: orm.Mapped[datetime.datetime | None] = orm.mapped_column(
        DateTime)
    created_at: orm.Mapped[datetime.datetime | None] = orm.mapped_column(
        DateTime)
    #: The report sequence number of the row's last write (a new report
    #: or only a new time): workers that did not take the report read
    #: the rows written since the highest number they saw.
    seq: orm.Mapped[int] = orm.mapped_column(sa.BigInteger, default=0)
    #: The report sequence number of the last write that changed the
    #: report itself (not only its time).
    changed_seq: orm.Mapped[int] = orm.mapped_column(sa.BigInteger,
                                                     default=0)


class Aggregate(Base):
    """A named group of hosts carrying metadata (e.g. its zone).

    Its hosts (``AggregateHost``) are no relationship: an aggregate may
    hold tens of thousands, read and written as plain rows
    (``scheduler.db.aggregates``), never loaded with it.
    """

    __tablename__ = 'aggregates'
    __table_args__ = (
        sa.UniqueConstraint('uuid', name='uniq_aggregates0uuid'),
        sa.UniqueConstraint('name', name='uniq_aggregates0name'),
        MYSQL_TABLE_ARGS,
    )

    id: orm.Mapped[int] = orm.mapped_column(sa.Integer, primary_key=True,
                                            autoincrement=True)
    uuid: orm.Mapped[str] = orm.mapped_column(sa.String(36))
    name: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    created_at: orm.Mapped[datetime.datetime | None] = orm.mapped_column(
        DateTime)
    updated_at: orm.Mapped[datetime.datetime | None] = orm.mapped_column(
        DateTime)

    metadata_items: orm.Mapped[list['AggregateMetadata']] = orm.relationship(
        cascade='all, delete-orphan', passive_deletes=True,
        lazy='selectin', order_by='AggregateMetadata.key')


class AggregateHost(Base):
    """Membership of a host (the service host, not a node) in an aggregate."""

    __tablename__ = 'aggregate_hosts'
    __table_args__ = (
        sa.UniqueConstraint('aggregate_id', 'host',
                            name='uniq_aggregate_hosts0aggregate_id0host'),
        MYSQL_TABLE_ARGS,
    )

    id: orm.Mapped[int] = orm.mapped_column(sa.Integer, primary_key=True,
                                            autoincrement=True)
    aggregate_id: orm.Mapped[int] = orm.mapped_column(
        sa.Integer,
        sa.ForeignKey('aggregates.id', ondelete='CASCADE',
                      name='aggregate_hosts_aggregate_id_fkey'))
    host: orm.Mapped[str] = orm.mapped_column(sa.String(255))


class AggregateMetadata(Base):
    """One key/value pair of an aggregate's metadata."""

    __tablename__ = 'aggregate_metadata'
    __table_args__ = (
        sa.UniqueConstraint('aggregate_id', 'key',
                            name='uniq_aggregate_metadata0aggregate_id0key'),
        MYSQL_TABLE_ARGS,
    )

    id: orm.Mapped[int] = orm.mapped_column(sa.Integer, primary_key=True,
                                            autoincrement=True)
    aggregate_id: orm.Mapped[int] = orm.mapped_column(
        sa.Integer,
        sa.ForeignKey('aggregates.id', ondelete='CASCADE',
                      name='aggregate_metadata_aggregate_id_fkey'))
    key: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    value: orm.Mapped[str] = orm.mapped_column(sa.String(255))


class Instance(Base):
    """A placement: the resources an instance holds on a node; its
    ``status`` is one of ``scheduler.db.instances``'."""

    __tablename__ = 'instances'
    __table_args__ = (
        sa.Index('instances_host_idx', 'host'),
        sa.Index('instances_node_pending_idx', 'host', 'nodename',
                 'pending'),
        MYSQL_TABLE_ARGS,
    )

    instance_uuid: orm.Mapped[str] = orm.mapped_column(sa.String(36),
                                                       primary_key=True)
    host: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    nodename: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    project_id: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    user_id: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    memory_mb: orm.Mapped[int] = orm.mapped_column(sa.Integer)
    vcpus: orm.Mapped[int] = orm.mapped_column(sa.Integer)
    disk_gb: orm.Mapped[int] = orm.mapped_column(sa.Integer)
    status: orm.Mapped[str] = orm.mapped_column(sa.String(16))
    #: True while the instance's resources are counted in its node's
    #: ``node_usage.claimed_*``: from the claim until a report of the
    #: compute lists the instance (its usage is then in ``reported_*``).
    pending: orm.Mapped[bool] = orm.mapped_column(sa.Boolean,
                                                  default=False)
    #: NUMA cells and PCI devices the claim took (JSON lists), so that
    #: every worker, and a restarted one, sees them.
    numa: orm.Mapped[str | None] = orm.mapped_column(sa.Text)
    pci: orm.Mapped[str | None] = orm.mapped_column(sa.Text)
    created_at: orm.Mapped[datetime.datetime | None] = orm.mapped_column(
        DateTime)
    updated_at: orm.Mapped[datetime.datetime | None] = orm.mapped_column(
        DateTime)


#: Orders every change of a ``node_usage`` row, so that workers pull
#: only what changed since they last looked.  A native sequence where
#: the backend has one (PostgreSQL, MariaDB): no lock is held on it.
USAGE_SEQUENCE = sa.Sequence('usage_seq', start=1)


class NodeUsage(Base):
    """What a node has given out: the authority every claim checks
    (``scheduler.db.usage`` states the rules).

    ``reported_*`` are the usage of the compute's last report written
    here; ``claimed_*`` the sum of the pending claims (instances placed
    but not yet in a report).  ``generation`` counts changes
    (compare-and-swap for claims the UPDATE cannot check, NUMA and PCI),
    ``seq`` orders them across the whole table.
    """

    __tablename__ = 'node_usage'
    __table_args__ = (
        sa.UniqueConstraint('host', 'nodename',
                            name='uniq_node_usage0host0nodename'),
        sa.Index('node_usage_seq_idx', 'seq'),
        MYSQL_TABLE_ARGS,
    )

    id: orm.Mapped[int] = orm.mapped_column(sa.Integer, primary_key=True,
                                            autoincrement=True)
    host: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    nodename: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    reported_memory_mb: orm.Mapped[int] = orm.mapped_column(
        sa.Integer, default=0)
    reported_vcpus: orm.Mapped[int] = orm.mapped_column(sa.Integer,
                                                        default=0)
    reported_disk_gb: orm.Mapped[int] = orm.mapped_column(sa.Integer,
                                                          default=0)
    reported_instances: orm.Mapped[int] = orm.mapped_column(sa.Integer,
                                                            default=0)
    #: The ``disk_available_least`` of that report (GiB the disk can
    #: really still give, which already counts the reported
    #: instances); None when the compute does not measure it.  A
    #: claim's disk check keeps ``claimed_disk_gb`` within it.
    reported_disk_least: orm.Mapped[int | None] = orm.mapped_column(
        sa.Integer, nullable=True)
    #: The compute's timestamp of the report behind ``reported_*``.
    reported_at: orm.Mapped[datetime.datetime | None] = orm.mapped_column(
        DateTime)
    claimed_memory_mb: orm.Mapped[int] = orm.mapped_column(sa.Integer,
                                                           default=0)
    claimed_vcpus: orm.Mapped[int] = orm.mapped_column(sa.Integer,
                                                       default=0)
    claimed_disk_gb: orm.Mapped[int] = orm.mapped_column(sa.Integer,
                                                         default=0)
    claimed_instances: orm.Mapped[int] = orm.mapped_column(sa.Integer,
                                                           default=0)
    generation: orm.Mapped[int] = orm.mapped_column(sa.BigInteger,
                                                    default=0)
    seq: orm.Mapped[int] = orm.mapped_column(sa.BigInteger, default=0)


USAGE_COUNTER_ROW = 1
REPORT_COUNTER_ROW = 2


class UsageCounter(Base):
    """Counters kept in rows.

    Row ``USAGE_COUNTER_ROW``: the usage sequence on backends without
    sequences (SQLite serialises writers, so it is no bottleneck
    there).  Row ``REPORT_COUNTER_ROW``: the report sequence
    (``hosts.seq``) on every backend: a writer holds it until it
    commits, so report rows become visible in sequence order and a
    reader needs no look-back; only report flushes take it.
    """

    __tablename__ = 'usage_counter'
    __table_args__ = (MYSQL_TABLE_ARGS,)

    id: orm.Mapped[int] = orm.mapped_column(sa.Integer, primary_key=True)
    value: orm.Mapped[int] = orm.mapped_column(sa.BigInteger, default=0)


_COUNTERS = UsageCounter.__table__
#: Adds ``count`` to counter row ``counter``.
BUMP_COUNTER = sa.update(_COUNTERS).where(
    _COUNTERS.c.id == sa.bindparam('counter')).values(
        value=_COUNTERS.c.value + sa.bindparam('count', type_=sa.BigInteger))
_COUNTER_VALUE = sa.select(_COUNTERS.c.value).where(
    _COUNTERS.c.id == sa.bindparam('counter'))


def take_counter(conn: sa.Connection, counter: int, count: int = 1) -> int:
    """Add ``count`` to counter row ``counter``, which stays locked until
    the transaction ends; its new value."""
    params = {'counter': counter, 'count': count}
    if conn.dialect.update_returning:
        return conn.execute(BUMP_COUNTER.returning(_COUNTERS.c.value),
                            params).scalar()
    conn.execute(BUMP_COUNTER, params)
    return conn.execute(_COUNTER_VALUE, params).scalar()


class TakenCast(Base):
    """A ``schedule_run_instance`` cast a worker took off the bus and
    has not finished with (``scheduler.db.taken_casts``).

    oslo.messaging acknowledges a cast before serving it, so the broker
    cannot hand it to another worker if this one dies: this row can.
    ``token`` changes each time a worker takes the row over, and the
    claim that renews the row checks it (the claiming worker still
    owns the cast).
    """

    __tablename__ = 'taken_casts'
    __table_args__ = (
        sa.Index('taken_casts_taken_at_idx', 'taken_at'),
        MYSQL_TABLE_ARGS,
    )

    id: orm.Mapped[str] = orm.mapped_column(sa.String(36), primary_key=True)
    token: orm.Mapped[str] = orm.mapped_column(sa.String(36))
    #: The instances of the cast not claimed yet (a JSON list).
    instance_uuids: orm.Mapped[str] = orm.mapped_column(LongText)
    #: The cast as it came: its context, sender and serialized arguments
    #: (a JSON document), to serve it again as a fresh cast.
    message: orm.Mapped[str] = orm.mapped_column(LongText)
    #: The worker that holds it (``host:pid:random``), for the logs.
    taken_by: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    taken_at: orm.Mapped[datetime.datetime] = orm.mapped_column(DateTime)


class ServerGroupLock(Base):
    """A server group's lock: the claims of its members take this row
    first, one at a time (``scheduler.db.usage._hold_group``), so each
    sees where the others put their members.

    Made by the group's first claim; a row unused for
    ``usage.GROUP_LOCK_KEPT`` is dropped when another is made, as
    nothing tells the scheduler a group was deleted.
    """

    __tablename__ = 'server_group_locks'
    __table_args__ = (MYSQL_TABLE_ARGS,)

    group_uuid: orm.Mapped[str] = orm.mapped_column(sa.String(36),
                                                    primary_key=True)
    locked_at: orm.Mapped[datetime.datetime] = orm.mapped_column(DateTime)
