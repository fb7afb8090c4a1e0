"""The claim protocol's database side: node usage, claims, reports.

The inventory is the authority on what each node has given out; every
worker and every daemon checks it before telling a caller "placed".
The rules, which doc/architecture.md ("Claims") explains at length:

* A claim is one transaction: a conditional UPDATE of the node's
  ``node_usage`` row that adds the instance's resources to
  ``claimed_*`` only if ``reported + claimed + request <= limit`` for
  every limit the request's filters set (and, for NUMA and PCI claims,
  only if the row's ``generation`` is still the one the worker chose
  from), then the INSERT of the instance's row as *pending*.  Nothing
  is held in memory that a crash could lose.
* Disk is checked twice: against the totals' limit as above, and
  against what the disk really has free, ``reported_disk_least``
  (the compute's ``disk_available_least``, which counts every
  instance its report lists) less ``claimed_disk_gb`` (the pending
  instances, which it does not count yet): ``claimed + request <=
  least + overcommit``, nova's free disk being the smaller of the two.
* A report that lists pending instances moves their usage from
  ``claimed_*`` to ``reported_*`` in one transaction, so no window
  opens in which the node looks emptier than it is.
* Every change of a row takes the next value of the usage sequence
  (``seq``), so that a worker pulls only the rows changed since it last
  looked (``changed_since``).
* Locks are always taken ``node_usage`` row first, then instance rows,
  and usage rows in key order (host, nodename), which keeps claims,
  reports, releases and expiries free of deadlocks between each other.
  A claim of a server group's member takes its group's row before
  them (``_hold_group``): one group a claim, and nothing else waits
  for it.
  A locking read names only the rows it wants (``_locking_read``).

**The invariant.**  At every commit, for every node:

1. ``claimed_*`` is the sum of the node's *pending* placement rows, and
   ``claimed_instances`` their number.
2. Every placement row of the node that is *not* pending is listed by
   the report whose usage is in ``reported_*`` (the newest report
   written), so that usage is in ``reported_*``.

Together: ``reported_* + claimed_*`` is at least the sum of the node's
placement rows (equal when the compute runs exactly the instances
placed there), and the claim's check against it can never let the
rows exceed a limit.  Each writer keeps both, in one transaction:

* a claim adds to ``claimed_*`` and inserts pending rows (1);
* a release, an expiry, a sync or a replaced placement deletes rows,
  giving a pending row's usage back to ``claimed_*`` (1); deleting a
  non-pending row cannot break (2);
* a report newer than the row's sets ``reported_*`` and moves the
  pending rows it lists out of ``claimed_*`` (1, 2).  A non-pending
  row it does *not* list is no longer in ``reported_*``: it goes back
  to pending, status ``unlisted``, its usage back into ``claimed_*``
  (2).  That is a stale report or an instance the compute deleted
  whose ``delete_instance_info`` never reached the inventory (a
  database cut, a worker killed, a connection refused): a later report
  that lists it makes it active again, and the next report (newer
  than the one that unlisted it) that still does not list it drops it,
  so a deleted instance cannot hold its node's capacity beyond two
  reports;
* ``confirm`` changes only a status, and a worker killed in the middle
  of any of these loses its whole transaction.

"Newer" is the compute's clock: a report is taken after what it lists
happened.  A pending placement the compute confirmed
(``update_instance_info``, stamped with the scheduler's clock) is
unlisted by a report taken after the confirmation that lacks it, and
dropped by the next; a claim never confirmed nor listed is left to
expiry (``expire``).

A claim that replaces the instance's placement on the same node (a
resize there, ``resize_claimed``) is settled by no report until the
compute confirmed it (``confirm``; ``sync_host``'s list does not), and
then (``resize_active``) only by a report taken after the
confirmation: an earlier one lists the instance at its old size.
Unconfirmed, it expires like any claim.

Functions return plain dicts, like ``scheduler.db.api``.
"""

import collections
import dataclasses
import datetime
from typing import Iterable, Sequence

from oslo_db import exception as db_exc
from oslo_serialization import jsonutils
from oslo_utils import timeutils
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy import orm

from scheduler.db import engine
from scheduler.db import instances
from scheduler.db import models
from scheduler.db import taken_casts

Key = tuple[str, str]

_USAGE = models.NodeUsage
_INST = models.Instance

#: ``(limit name, reported column, claimed column, request field)``: the
#: resources a claim's conditional UPDATE can check.
_CHECKED = (
    ('memory_mb', 'reported_memory_mb', 'claimed_memory_mb', 'memory_mb'),
    ('vcpu', 'reported_vcpus', 'claimed_vcpus', 'vcpus'),
    ('disk_gb', 'reported_disk_gb', 'claimed_disk_gb', 'disk_gb'),
)


@dataclasses.dataclass
class Placement:
    """What one instance holds (or asks for) on one node."""

    instance_uuid: str
    host: str
    nodename: str
    memory_mb: int
    vcpus: int
    disk_gb: int
    project_id: str | None = None
    user_id: str | None = None
    #: NUMA cells and PCI devices taken, as ``scheduler.resources``'
    #: ``claim_numa`` / ``claim_pci`` return them.
    numa: list = dataclasses.field(default_factory=list)
    pci: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class ClaimRequest(Placement):
    """One instance's claim on one node."""

    #: ``{'memory_mb': ..., 'vcpu': ..., 'disk_gb': ...}``: the most the
    #: node may hold of each; a resource without a limit is not checked.
    limits: dict = dataclasses.field(default_factory=dict)
    #: Only claim if the row is still at this generation (NUMA/PCI).
    generation: int | None = None
    #: The node's last report as the worker saw it, used to create the
    #: node's usage row if no report of it was written yet.
    reported: dict = dataclasses.field(default_factory=dict)
    #: Replace a placement the instance already has (a reschedule or a
    #: move) instead of refusing a pending one.
    replace: bool = False
    #: How far the disk limit lets the node's real free disk
    #: (``disk_available_least``) be overcommitted, in GiB: the
    #: ``disk_gb`` limit less the node's ``local_gb`` (0 at ratio 1.0).
    #: Checked only with a ``disk_gb`` limit, as DiskFilter's usable
    #: disk: total x ratio - (total - free).
    disk_overcommit_gb: float = 0.0
    #: The request's server group whose rule the claim checks (None:
    #: none), its members, and how many of them one host may run
    #: (anti-affinity; 0: all on one host, affinity): another worker
    #: may have placed a member since this one chose (``_hold_group``).
    group_uuid: str | None = None
    group_members: tuple = ()
    group_max: int = 0


class ClaimConflict(Exception):
    """The node no longer has room (or changed under a NUMA/PCI claim),
    or the claim breaks its server group's rule; for affinity,
    ``group_hosts`` are where the group's other members are."""

    def __init__(self, key: Key, group_hosts: Sequence[str] = ()):
        super().__init__('%s/%s' % key)
        self.key = key
        self.group_hosts = list(group_hosts)


class AlreadyPlaced(Exception):
    """The instance is held, pending, on another node."""

    def __init__(self, placement: dict):
        super().__init__(placement['host'])
        self.placement = placement


# --- reading -----------------------------------------------------------------

#: The columns of a ``node_usage`` row as the functions here return it.
USAGE_COLUMNS = (
    'host', 'nodename', 'reported_memory_mb', 'reported_vcpus',
    'reported_disk_gb', 'reported_instances', 'reported_disk_least',
    'reported_at', 'claimed_memory_mb', 'claimed_vcpus', 'claimed_disk_gb',
    'claimed_instances', 'generation', 'seq')


def _usage_dict(row) -> dict:
    return {name: getattr(row, name) for name in USAGE_COLUMNS}


def _placement_dict(row) -> dict:
    return {
        'instance_uuid': row.instance_uuid, 'host': row.host,
        'nodename': row.nodename, 'memory_mb': row.memory_mb,
        'vcpus': row.vcpus, 'disk_gb': row.disk_gb,
        'project_id': row.project_id, 'user_id': row.user_id,
        'status': row.status, 'pending': bool(row.pending),
        'numa': jsonutils.loads(row.numa) if row.numa else [],
        'pci': jsonutils.loads(row.pci) if row.pci else [],
        'updated_at': row.updated_at,
    }


def usage_get_all() -> list[dict]:
    """Every node's usage row."""
    with engine.transaction() as session:
        return [_usage_dict(r) for r in session.execute(
            sa.select(_USAGE).order_by(_USAGE.id)).scalars()]


def usage_get_nodes(keys: Sequence[Key]) -> list[dict]:
    """The usage rows of the nodes ``keys`` that have one."""
    with engine.transaction() as session:
        return [_usage_dict(row)
                for row in _usage_rows(session, keys).values()]


def _usage_rows(session: orm.Session, keys: Iterable[Key],
                lock: bool = False) -> dict:
    """The usage rows of ``keys`` that exist, by key, in key order;
    with ``lock``, locked in that order, the claims' (the chunks are
    runs of hosts in order, so the whole is in order too)."""
    wanted = set(keys)
    rows = {}
    stmt = _USAGE_ORM_ON_LOCKED if lock else _USAGE_ORM_ON
    for chunk in engine.chunks(sorted({host for host, _node in wanted})):
        for row in session.execute(stmt, {'hosts': chunk}).scalars():
            if (row.host, row.nodename) in wanted:
                rows[(row.host, row.nodename)] = row
    return rows


#: The indexes the locking reads go by on MySQL/MariaDB
#: (``_locking_read``): (host, nodename) of each table.
_USAGE_KEY_INDEX = 'uniq_node_usage0host0nodename'
_INST_NODE_INDEX = 'instances_node_pending_idx'


def _locking_read(stmt: sa.Select, entity, index: str) -> sa.Select:
    """``stmt`` ``FOR UPDATE``, reading ``entity``'s table by ``index``
    on MySQL/MariaDB.

    PostgreSQL locks the rows the query returns, in its ORDER BY.
    InnoDB locks every row it reads, in the order it reads them, and
    under REPEATABLE READ keeps the lock of a row the WHERE then
    rejects: for a host list of a quarter of the table or more its
    optimizer reads the whole table by primary key, which locked every
    node's usage row (every claim waited) in id order (two batches, or
    a batch and a claim, deadlocked), and every placement with the
    gaps between them (every claim's INSERT waited).  Read by the
    index on (host, nodename), it locks only the hosts named, in key
    order.
    """
    return stmt.with_for_update().with_hint(
        entity.__table__, 'FORCE INDEX (%s)' % index, 'mysql')


def changed_since(seq: int, gaps: Sequence[int] = ()) -> list[dict]:
    """Usage rows changed after ``seq``, and those whose number is one
    of ``gaps`` (numbers below ``seq`` not seen yet, see
    ``usage_cache.SeqGaps``), in sequence order.

    Asked before every request: plain rows, no ORM objects.
    """
    params = {'seq': seq, 'gaps': list(gaps)} if gaps else {'seq': seq}

    def read(conn) -> list[dict]:
        if not gaps:
            stmt = _CHANGED_SINCE
        elif conn.dialect.name == 'postgresql':
            # One array parameter, adapted by the driver: an expanding
            # IN costs the client a parameter per gap at every read.
            stmt = _CHANGED_SINCE_OR_ANY
        else:
            stmt = _CHANGED_SINCE_OR_GAPS
        return [dict(zip(USAGE_COLUMNS, row))
                for row in conn.execute(stmt, params)]

    return engine.run_read(read)


#: A ``node_usage`` row's ``USAGE_COLUMNS``.
_SELECT_USAGE = sa.select(*[_USAGE.__table__.c[name]
                            for name in USAGE_COLUMNS])
_SEQ = _USAGE.__table__.c.seq
_AFTER = _SEQ > sa.bindparam('seq', type_=sa.BigInteger)
_CHANGED_SINCE = _SELECT_USAGE.where(_AFTER).order_by(_SEQ)
_CHANGED_SINCE_OR_GAPS = _SELECT_USAGE.where(sa.or_(_AFTER, _SEQ.in_(
    sa.bindparam('gaps', expanding=True, type_=sa.BigInteger)))
).order_by(_SEQ)
_CHANGED_SINCE_OR_ANY = _SELECT_USAGE.where(sa.or_(_AFTER, _SEQ == sa.any_(
    sa.bindparam('gaps', type_=postgresql.ARRAY(sa.BigInteger))))
).order_by(_SEQ)


def pending_claims(keys: Iterable[Key] | None = None) -> list[dict]:
    """Pending placements on the nodes ``keys`` (every node for None).

    Of given nodes (part of the freshness read before a request), read
    outside a transaction (``engine.run_read``): a node's claims come
    from one statement (a host's nodes are in one chunk), which under
    READ COMMITTED reads a snapshot of its own either way.
    """
    if keys is None:
        with engine.transaction() as session:
            return [_placement_dict(r) for r in session.execute(_PENDING)]
    wanted = set(keys)
    hosts = sorted({host for host, _node in wanted})

    def read(conn) -> list[dict]:
        return [_placement_dict(row) for chunk in engine.chunks(hosts)
                for row in conn.execute(_PENDING_ON, {'hosts': chunk})
                if (row.host, row.nodename) in wanted]
    return engine.run_read(read)


# Built once, rows not ORM objects: building the statement, its cache
# key and an object per row cost most of a read of a few claims.
_PENDING = sa.select(_INST.__table__).where(
    _INST.__table__.c.pending.is_(True))
_PENDING_ON = _PENDING.where(_INST.__table__.c.host.in_(
    sa.bindparam('hosts', expanding=True)))


def placements_get(instance_uuids: Sequence[str]) -> dict[str, dict]:
    """The placements of ``instance_uuids`` that exist, by uuid."""
    found = {}
    with engine.transaction() as session:
        for chunk in engine.chunks(sorted(set(instance_uuids))):
            for row in session.execute(sa.select(_INST).where(
                    _INST.instance_uuid.in_(chunk))).scalars():
                found[row.instance_uuid] = _placement_dict(row)
    return found


# --- the sequence ------------------------------------------------------------

def commits_in_seq_order() -> bool:
    """Whether usage rows become visible in sequence order.

    True where the sequence is the counter row (SQLite, and any database
    without native sequences): a transaction bumps it first and holds
    its lock until it commits, so no reader ever sees a number before a
    smaller one.  A native sequence hands numbers out without waiting
    for commits, and a reader must read again the numbers it skipped
    (``usage_cache.SeqGaps``).
    """
    return not engine.get_engine().dialect.supports_sequences


def _next_seq(conn: sa.Connection):
    """An SQL expression for the next usage sequence number.

    Of the counter row: bumped here, its value read by the statement
    that writes it (which needs no statement of its own to read it
    first), until the transaction bumps it again.
    """
    if conn.dialect.supports_sequences:
        return models.USAGE_SEQUENCE.next_value()
    conn.execute(models.BUMP_COUNTER, _ONE_MORE)
    return _COUNTER_VALUE


def _execute_numbered(conn: sa.Connection, stmt: sa.Executable,
                      rows: list) -> None:
    """Run ``stmt`` for ``rows`` in one execution, each row writing the
    next usage sequence number, in order."""
    if conn.dialect.supports_sequences:
        conn.execute(stmt.values(seq=models.USAGE_SEQUENCE.next_value()),
                     rows)
        return
    first = models.take_counter(conn, models.USAGE_COUNTER_ROW,
                                len(rows)) - len(rows) + 1
    conn.execute(stmt, [dict(row, seq=first + n)
                        for n, row in enumerate(rows)])


_ONE_MORE = {'counter': models.USAGE_COUNTER_ROW, 'count': 1}
_COUNTER_VALUE = sa.select(models.UsageCounter.__table__.c.value).where(
    models.UsageCounter.__table__.c.id == models.USAGE_COUNTER_ROW
).scalar_subquery()


# --- claims ------------------------------------------------------------------

class _NoUsageRow(Exception):
    """The node has no usage row yet (see ``_create_usage_row``)."""

    def __init__(self, request: ClaimRequest):
        super().__init__('%s/%s' % (request.host, request.nodename))
        self.request = request


class _NoGroupLock(Exception):
    """The request's server group has no lock row yet
    (``_create_group_lock``)."""

    def __init__(self, group_uuid: str):
        super().__init__(group_uuid)
        self.group_uuid = group_uuid


_GROUP = models.ServerGroupLock
_LOCK_GROUP = sa.update(_GROUP).where(
    _GROUP.group_uuid == sa.bindparam('group')).values(
        locked_at=sa.bindparam('now'))
_MEMBER_HOSTS = sa.select(_INST.host).where(_INST.instance_uuid.in_(
    sa.bindparam('uuids', expanding=True)))
#: How long a group's lock row outlives its last claim: any time is
#: safe (a row is deleted only while no claim holds it, and a claim
#: that finds none makes it again), this only bounds the table.
GROUP_LOCK_KEPT = datetime.timedelta(hours=1)


def _hold_group(conn: sa.Connection, requests: Sequence[ClaimRequest],
                now: datetime.datetime) -> None:
    """Lock the requests' server group, then raise ``ClaimConflict``
    if their placements would break its rule, given where its other
    members are placed.

    The claims of a group's members take its row one at a time, each
    before any other lock of its transaction (the lock order: group,
    usage rows, placements), so each waits for the last one's commit
    and reads its placements; on InnoDB's REPEATABLE READ this read
    makes the transaction's read view, after that commit.
    """
    first = requests[0]
    if conn.execute(_LOCK_GROUP, {'group': first.group_uuid,
                                  'now': now}).rowcount != 1:
        raise _NoGroupLock(first.group_uuid)
    own = {r.instance_uuid for r in requests}
    others = sorted(set(first.group_members) - own)
    placed = [host for chunk in engine.chunks(others)
              for host in conn.execute(_MEMBER_HOSTS,
                                       {'uuids': list(chunk)}).scalars()]
    if not first.group_max:
        hosts = set(placed)
        for r in requests:
            if hosts - {r.host}:
                raise ClaimConflict((r.host, r.nodename), sorted(hosts))
            hosts.add(r.host)
        return
    on_host = collections.Counter(placed + [r.host for r in requests])
    for r in requests:
        if on_host[r.host] > first.group_max:
            raise ClaimConflict((r.host, r.nodename))


def _create_group_lock(group_uuid: str) -> None:
    """Make a server group's lock row, in a transaction of its own (as
    ``_create_usage_row``), and drop the rows unused for
    ``GROUP_LOCK_KEPT``; a concurrent maker's row serves as well."""
    now = timeutils.utcnow()
    try:
        with engine.transaction(read_committed=True) as session:
            session.execute(sa.delete(_GROUP).where(
                _GROUP.locked_at < now - GROUP_LOCK_KEPT))
            session.execute(sa.insert(_GROUP).values(
                group_uuid=group_uuid, locked_at=now))
    except db_exc.DBDuplicateEntry:
        pass


def _refused(conn: sa.Connection, request: ClaimRequest) -> Exception:
    """Why the claim UPDATE of ``request``'s node changed no row."""
    if conn.execute(sa.select(_USAGE.id).where(
            _USAGE.host == request.host,
            _USAGE.nodename == request.nodename)).first() is None:
        return _NoUsageRow(request)
    return ClaimConflict((request.host, request.nodename))


def _create_usage_row(claim: ClaimRequest) -> None:
    """Create the node's row from the worker's view of its last report.

    A node that reported but whose report no worker has written yet has
    no row; the first claim on it writes one, in a transaction of its
    own: on MySQL/MariaDB a deadlock between two such inserts rolls
    back the whole transaction, savepoints included.  Two workers doing
    it at once: the loser's INSERT fails on the unique key, and it goes
    on with the winner's row.
    """
    rep = claim.reported
    try:
        with engine.get_engine().begin() as conn:
            conn.execute(sa.insert(_USAGE).values(
                host=claim.host, nodename=claim.nodename,
                reported_memory_mb=rep.get('memory_mb_used', 0),
                reported_vcpus=rep.get('vcpus_used', 0),
                reported_disk_gb=rep.get('local_gb_used', 0),
                reported_instances=rep.get('num_instances', 0),
                reported_disk_least=rep.get('disk_available_least'),
                reported_at=_naive(rep.get('updated_at')),
                generation=0, seq=_next_seq(conn)))
    except db_exc.DBDuplicateEntry:
        pass


def _naive(value: datetime.datetime | None) -> datetime.datetime | None:
    return None if value is None else timeutils.normalize_time(value)


def _take(conn: sa.Connection, claims: Sequence[Placement], sign: int = 1,
          check: bool = True, bumped: bool = False) -> dict | None:
    """Add (or with ``sign=-1`` give back) claims' usage on their node.

    ``claims`` are on one node.  With ``check``, the UPDATE only happens
    if all of them fit under the smallest limit any of them sets (a
    disk limit also keeps the pending disk within the node's reported
    ``disk_available_least``), and, when the first one names a
    generation, if the row is still at it.
    ``bumped``: the caller took the usage sequence number for its
    whole transaction (``_next_seq``), else the next one is.  Returns
    None when nothing was updated; else, for a checked claim, the row
    as updated (read back where the database cannot return it from the
    UPDATE), and an empty dict for an unchecked change.
    """
    first = claims[0]
    params, limited, generation = _take_params(claims, check, sign)
    native_seq = conn.dialect.supports_sequences
    if not (native_seq or bumped):
        _next_seq(conn)
    returning = check and conn.dialect.update_returning
    stmt = _take_statement(limited, generation, native_seq, returning)
    if returning:
        row = conn.execute(stmt, params).first()
        return None if row is None else dict(zip(USAGE_COLUMNS, row))
    if conn.execute(stmt, params).rowcount != 1:
        return None
    return _usage_row(conn, first.host, first.nodename) if check else {}


def _take_params(claims: Sequence[Placement], check: bool,
                 sign: int = 1) -> tuple[dict, tuple, bool]:
    """``_take_statement``'s parameters for ``claims`` (on one node),
    the limits it checks and whether it checks the generation."""
    first = claims[0]
    params = {'k_host': first.host, 'k_node': first.nodename,
              'add_instances': sign * len(claims)}
    for _name, _rep, _claimed, field in _CHECKED:
        params['add_' + field] = sign * sum(getattr(c, field)
                                            for c in claims)
    limited = []
    if check:
        for limit_name, _rep, _claimed, _field in _CHECKED:
            limits = [c.limits[limit_name] for c in claims
                      if c.limits.get(limit_name) is not None]
            if limits:
                limited.append(limit_name)
                params['limit_' + limit_name] = min(limits)
        if 'disk_gb' in limited:
            params['disk_overcommit'] = min(
                c.disk_overcommit_gb for c in claims
                if c.limits.get('disk_gb') is not None)
        if first.generation is not None:
            params['k_generation'] = first.generation
    return params, tuple(limited), 'k_generation' in params


_TAKE_STATEMENTS: dict = {}


def _take_statement(limited: tuple, generation: bool, native_seq: bool,
                    returning: bool) -> sa.Update:
    """``_take``'s UPDATE, built once per shape with bound parameters:
    building the expression anew for every claim cost more than running
    it."""
    key = (limited, generation, native_seq, returning)
    stmt = _TAKE_STATEMENTS.get(key)
    if stmt is not None:
        return stmt
    stmt = sa.update(_USAGE).where(_USAGE.host == sa.bindparam('k_host'),
                                   _USAGE.nodename == sa.bindparam('k_node'))
    values = {}
    for limit_name, reported, claimed, field in _CHECKED:
        added = sa.bindparam('add_' + field, type_=sa.Integer)
        values[claimed] = getattr(_USAGE, claimed) + added
        if limit_name in limited:
            stmt = stmt.where(
                getattr(_USAGE, reported) + getattr(_USAGE, claimed) + added
                <= sa.bindparam('limit_' + limit_name, type_=sa.Float))
        if limit_name == 'disk_gb' and limit_name in limited:
            # Real free disk: the compute's measure counts the instances
            # it reported, not the pending ones.
            stmt = stmt.where(sa.or_(
                _USAGE.reported_disk_least.is_(None),
                _USAGE.claimed_disk_gb + added
                <= _USAGE.reported_disk_least + sa.bindparam(
                    'disk_overcommit', type_=sa.Float)))
    if generation:
        stmt = stmt.where(_USAGE.generation == sa.bindparam('k_generation'))
    values['claimed_instances'] = _USAGE.claimed_instances + sa.bindparam(
        'add_instances', type_=sa.Integer)
    values['generation'] = _USAGE.generation + 1
    values['seq'] = (models.USAGE_SEQUENCE.next_value() if native_seq
                     else _COUNTER_VALUE)
    stmt = stmt.values(**values)
    if returning:
        table = _USAGE.__table__
        stmt = stmt.returning(*[table.c[name] for name in USAGE_COLUMNS])
    _TAKE_STATEMENTS[key] = stmt
    return stmt


def claim(request: ClaimRequest, replace: bool = False) -> dict:
    """Claim ``request`` on its node, or raise ``ClaimConflict``
    (``claim_many`` for one instance)."""
    if replace:
        request = dataclasses.replace(request, replace=True)
    return claim_many([request])[0]


@engine.retry_on_conflict
def claim_many(requests: Sequence[ClaimRequest]) -> list[dict]:
    """Claim every one of ``requests`` or none, or raise ``ClaimConflict``.

    One transaction for the whole request however many instances it
    has: each node's usage row is updated only if the instances placed
    there still fit under their limits (and generation), nodes in key
    order so that two workers lock them in the same order; then the
    pending placements are written.  A placement an instance already
    has is replaced when its request says ``replace`` (a reschedule or
    a move; a pending one gives its usage back in the same
    transaction), and otherwise refused with ``AlreadyPlaced`` if it is
    pending.  A request with a server group to check waits for the
    group's earlier claims first (``_hold_group``).  Returns the
    placements, in order, each with its node's usage row after the
    claim under ``'usage'``.
    """
    # Nearly every instance is new: its INSERT is the whole check, and
    # the placements it may already have are looked for only when the
    # INSERT finds one (or the request replaces them).
    look_first = any(r.replace for r in requests)
    # A try a missing node row, one for a missing group row.
    for _attempt in range(len(requests) + 1):
        try:
            return _claim_many(requests, look_first)
        except _NoUsageRow as e:
            _create_usage_row(e.request)
        except _NoGroupLock as e:
            _create_group_lock(e.group_uuid)
        except db_exc.DBDuplicateEntry:
            if look_first:
                raise
            look_first = True
    return _claim_many(requests, True)


def _claim_many(requests: Sequence[ClaimRequest],
                look_first: bool) -> list[dict]:
    now = timeutils.utcnow()
    by_node: dict = {}
    for request in requests:
        by_node.setdefault((request.host, request.nodename),
                           []).append(request)
    # The taken cast these instances come from (if its row was written)
    # must still be this worker's: checked and renewed in this
    # transaction.  The row keeps them until their builds are sent.
    taken = taken_casts.current()
    settles = [r.instance_uuid for r in requests
               if taken is not None and r.instance_uuid in
               taken.instance_uuids]
    # One request, one server group: its members' claims take turns.
    grouped = requests[0].group_uuid is not None
    if (not look_first and not settles and not grouped
            and len(requests) <= _ONE_STATEMENT_MOST
            and engine.statements_commit_alone()):
        return _claim_in_one_statement(requests, by_node, now)

    def claim_in(conn) -> list[dict]:
        # The UPDATEs first: on nodes that have their row (nearly
        # always) they are the whole check, one round trip per node.
        # One sequence number for the transaction where it costs a
        # statement (SQLite's counter row); a native sequence is read in
        # the UPDATE itself.
        if grouped:
            _hold_group(conn, requests, now)
        if not conn.dialect.supports_sequences:
            _next_seq(conn)
        after = {}
        for key in sorted(by_node):
            after[key] = _take(conn, by_node[key], bumped=True)
            if after[key] is None:
                raise _refused(conn, by_node[key][0])
        resized: set = set()
        if look_first:
            given_back, resized = _replace_earlier(conn, requests)
            for key in given_back & set(after):
                after[key] = _usage_row(conn, *key)
        rows = [_pending_values(request, now) for request in requests]
        for row in rows:
            if row['instance_uuid'] in resized:
                row['status'] = instances.RESIZE_CLAIMED
        conn.execute(_INSERT_PENDING, rows)
        if settles:
            taken_casts.renew_in(conn, taken)
        return [dict(row, numa=request.numa, pci=request.pci,
                     usage=after[(request.host, request.nodename)])
                for row, request in zip(rows, requests)]

    return engine.run_in_transaction(claim_in)


#: The most instances a one-statement claim takes (its statement is
#: built once per shape); a larger request claims in a transaction.
_ONE_STATEMENT_MOST = 16

_ONE_STATEMENTS: dict = {}


def _claim_in_one_statement(requests: Sequence[ClaimRequest],
                            by_node: dict,
                            now: datetime.datetime) -> list[dict]:
    """``claim_in``'s work as one statement that commits as it returns
    (PostgreSQL).

    The nodes' conditional UPDATE and the pending rows' INSERT are one
    statement (a data-modifying WITH): it holds the nodes' row locks
    only while the server runs it, never across a round trip to a
    worker that may be busy with other requests, and it is one round
    trip instead of three and one a node (BEGIN, an UPDATE a node,
    INSERT, COMMIT).  All or nothing as the transaction is: the INSERT
    inserts only if every node's room was taken, and a duplicate
    instance fails the whole statement (the caller then looks for
    earlier placements).  One node, nearly every request, takes the
    plain conditional UPDATE (``_one_node_statement``); several, the
    statement that locks them in key order first and updates none
    unless all fit (``_nodes_statement``), which costs the server more.
    """
    rows = [_pending_values(request, now) for request in requests]
    params = {'%s_%d' % (name, i): value
              for i, row in enumerate(rows) for name, value in row.items()}
    keys = sorted(by_node)
    if len(keys) == 1:
        taken, limited, generation = _take_params(requests, True)
        params.update(taken)
        stmt = _one_node_statement(limited, generation, len(rows))
    else:
        for n, key in enumerate(keys):
            node = dict.fromkeys(_WANT_COLUMNS)
            node.update(_take_params(by_node[key], True)[0])
            params.update({'%s_%d' % (name, n): value
                           for name, value in node.items()})
        stmt = _nodes_statement(len(keys), len(rows))

    def claim_in(conn) -> list[dict]:
        found = conn.execute(stmt, params).all()
        if len(keys) == 1:
            if not found:
                raise _refused(conn, requests[0])
            after = {keys[0]: found[0]}
        else:
            by_key = {(row[0], row[1]): row for row in found}
            for key in keys:
                if by_key[key][2] is None:
                    raise _NoUsageRow(by_node[key][0])
            for key in keys:
                if not by_key[key][3]:
                    raise ClaimConflict(key)
            after = {key: by_key[key][4:] for key in keys}
        after = {key: dict(zip(USAGE_COLUMNS, row))
                 for key, row in after.items()}
        return [dict(row, numa=request.numa, pci=request.pci,
                     usage=after[(request.host, request.nodename)])
                for row, request in zip(rows, requests)]

    return engine.run_autocommit(claim_in)


def _placed(count: int, only_if) -> sa.CTE:
    """The INSERT of ``count`` pending rows, their values bound as
    ``<column>_<i>``, each row's SELECT narrowed by ``only_if``."""
    table = _INST.__table__
    selects = [only_if(sa.select(*[
        sa.bindparam('%s_%d' % (column.name, i), type_=column.type)
        for column in table.columns])) for i in range(count)]
    source = selects[0] if count == 1 else sa.union_all(*selects)
    return sa.insert(table).from_select(
        [column.name for column in table.columns], source).cte('placed')


def _one_node_statement(limited: tuple, generation: bool,
                        count: int) -> sa.Select:
    """``_claim_in_one_statement``'s statement for ``count`` instances
    on one node, built once per shape: ``WITH taken AS (UPDATE
    node_usage ... RETURNING ...), placed AS (INSERT INTO instances
    SELECT ... FROM taken) SELECT ... FROM taken``."""
    key = (limited, generation, count)
    stmt = _ONE_STATEMENTS.get(key)
    if stmt is None:
        taken = _take_statement(limited, generation, True, True).cte(
            'taken')
        stmt = sa.select(*[taken.c[name] for name in USAGE_COLUMNS]
                         ).add_cte(_placed(count, lambda select:
                                           select.select_from(taken)))
        _ONE_STATEMENTS[key] = stmt
    return stmt


#: Each node's part of ``_nodes_statement``: ``_take_params``' names,
#: the limits it leaves out (NULL) not checked.
_WANT_COLUMNS = dict(
    [('k_host', sa.String), ('k_node', sa.String)]
    + [('add_' + field, sa.Integer) for _l, _r, _c, field in _CHECKED]
    + [('add_instances', sa.Integer)]
    + [('limit_' + name, sa.Float) for name, _r, _c, _f in _CHECKED]
    + [('disk_overcommit', sa.Float), ('k_generation', sa.Integer)])


def _nodes_statement(nodes: int, count: int) -> sa.Select:
    """``_claim_in_one_statement``'s statement for ``count`` instances
    on ``nodes`` nodes, built once per shape::

        WITH want AS (SELECT <node 0's params> UNION ALL ...),
        locked AS (SELECT node_usage.*, want.* FROM node_usage JOIN want
                   ORDER BY host, nodename FOR UPDATE OF node_usage),
        taken AS (UPDATE node_usage ... FROM locked WHERE id = locked.id
                  AND (every node fits) RETURNING ...),
        placed AS (INSERT INTO instances SELECT <instance params>
                   WHERE (SELECT count(*) FROM taken) = <nodes>)
        SELECT host, node, locked.id, fits, taken.* FROM want
          LEFT JOIN locked LEFT JOIN taken

    Each node's check reads its row as locked (the latest committed),
    so that no node is updated unless all fit, and two such claims lock
    alike.  A node's params are bound as ``<name>_<n>``.
    """
    key = (nodes, count)
    stmt = _ONE_STATEMENTS.get(key)
    if stmt is not None:
        return stmt
    usage = _USAGE.__table__
    selects = [sa.select(*[
        sa.cast(sa.bindparam('%s_%d' % (name, n)), type_).label(name)
        for name, type_ in _WANT_COLUMNS.items()]) for n in range(nodes)]
    want = (selects[0] if nodes == 1 else sa.union_all(*selects)).cte('want')
    locked = sa.select(usage, want).join_from(usage, want, sa.and_(
        usage.c.host == want.c.k_host, usage.c.nodename == want.c.k_node)
    ).order_by(usage.c.host, usage.c.nodename).with_for_update(
        of=usage).cte('locked')
    row = locked.c
    checks = [sa.or_(row.k_generation.is_(None),
                     row.generation == row.k_generation)]
    for limit_name, reported, claimed, field in _CHECKED:
        limit = row['limit_' + limit_name]
        checks.append(sa.or_(limit.is_(None), row[reported] + row[claimed]
                             + row['add_' + field] <= limit))
    # Real free disk: the compute's measure counts the instances it
    # reported, not the pending ones.
    checks.append(sa.or_(
        row.limit_disk_gb.is_(None), row.reported_disk_least.is_(None),
        row.claimed_disk_gb + row.add_disk_gb
        <= row.reported_disk_least + row.disk_overcommit))
    fits = sa.and_(*checks)
    all_fit = sa.select(sa.func.count().filter(fits) == nodes).select_from(
        locked).correlate(None).scalar_subquery()
    values = {claimed: usage.c[claimed] + row['add_' + field]
              for _l, _r, claimed, field in _CHECKED}
    values.update(claimed_instances=usage.c.claimed_instances
                  + row.add_instances,
                  generation=usage.c.generation + 1,
                  seq=models.USAGE_SEQUENCE.next_value())
    taken = sa.update(usage).where(usage.c.id == row.id, all_fit).values(
        **values).returning(*[usage.c[name] for name in USAGE_COLUMNS]
                            ).cte('taken')
    all_taken = sa.select(sa.func.count()).select_from(taken).correlate(
        None).scalar_subquery() == nodes
    placed = _placed(count, lambda select: select.where(all_taken))
    nodes_found = want.outerjoin(locked, sa.and_(
        row.k_host == want.c.k_host, row.k_node == want.c.k_node))
    nodes_found = nodes_found.outerjoin(taken, sa.and_(
        taken.c.host == want.c.k_host, taken.c.nodename == want.c.k_node))
    stmt = sa.select(want.c.k_host, want.c.k_node, row.id, fits,
                     *[taken.c[name] for name in USAGE_COLUMNS]
                     ).select_from(nodes_found).add_cte(placed)
    _ONE_STATEMENTS[key] = stmt
    return stmt


def _replace_earlier(conn: sa.Connection,
                     requests: Sequence[ClaimRequest]) -> tuple[set, set]:
    """Drop the placements the instances already have, or refuse;
    returns the nodes that got pending usage back, and the instances
    whose placement was on the node they now claim (a resize there).

    A plain read first: locking a row that does not exist would take a
    gap lock on MySQL/MariaDB, and two claims inserting into the same
    gap deadlock.  A concurrent insert of the same uuid fails on the
    primary key instead, and the retry finds its row.
    """
    wanted = {r.instance_uuid: r for r in requests}
    found = []
    for chunk in engine.chunks(sorted(wanted)):
        found.extend(conn.execute(sa.select(_INST.instance_uuid).where(
            _INST.instance_uuid.in_(chunk))).scalars())
    given_back, resized = set(), set()
    for uuid in sorted(found):
        old = conn.execute(sa.select(_INST.__table__).where(
            _INST.instance_uuid == uuid).with_for_update()).first()
        if old is None:
            continue
        if old.pending and not wanted[uuid].replace:
            raise AlreadyPlaced(_placement_dict(old))
        if old.pending:
            _take(conn, [_as_request(old)], sign=-1, check=False)
            given_back.add((old.host, old.nodename))
        if (old.host, old.nodename) == (wanted[uuid].host,
                                        wanted[uuid].nodename):
            resized.add(uuid)
        conn.execute(sa.delete(_INST).where(_INST.instance_uuid == uuid))
    return given_back, resized


_INSERT_PENDING = sa.insert(_INST.__table__).values(
    {column.name: sa.bindparam(column.name)
     for column in _INST.__table__.columns})


def _pending_values(request: ClaimRequest,
                    now: datetime.datetime) -> dict:
    """The ``instances`` row of a new pending placement."""
    return {
        'instance_uuid': request.instance_uuid, 'host': request.host,
        'nodename': request.nodename, 'project_id': request.project_id,
        'user_id': request.user_id, 'memory_mb': request.memory_mb,
        'vcpus': request.vcpus, 'disk_gb': request.disk_gb,
        'status': instances.CLAIMED, 'pending': True,
        'numa': jsonutils.dumps(request.numa) if request.numa else None,
        'pci': jsonutils.dumps(request.pci) if request.pci else None,
        'created_at': now, 'updated_at': now}


def _usage_row(conn: sa.Connection, host: str, nodename: str) -> dict:
    """The node's usage row as this transaction left it: the claiming
    worker's cache takes it as is when no other change came between."""
    return dict(zip(USAGE_COLUMNS, conn.execute(_SELECT_USAGE.where(
        _USAGE.host == host, _USAGE.nodename == nodename)).one()))


def _as_request(row) -> ClaimRequest:
    return ClaimRequest(row.instance_uuid, row.host, row.nodename,
                        row.memory_mb, row.vcpus, row.disk_gb)


def _drop(session: orm.Session, uuids: Sequence[str],
          only_pending_older_than: datetime.datetime | None = None,
          host: str | None = None,
          owners: dict | None = None) -> list[dict]:
    """Delete placements, giving pending usage back; returns the dropped.

    With ``host`` only placements on that host go; with ``owners``
    (uuid -> hosts that may drop it) only each on one of its hosts.
    Usage rows are locked before instance rows, as everywhere here.
    """
    if not uuids:
        return []
    rows = []
    for chunk in engine.chunks(sorted(set(uuids))):
        stmt = sa.select(_INST).where(_INST.instance_uuid.in_(chunk))
        if host is not None:
            stmt = stmt.where(_INST.host == host)
        if only_pending_older_than is not None:
            stmt = stmt.where(_INST.pending.is_(True),
                              _INST.status.in_(instances.UNCONFIRMED),
                              _INST.updated_at < only_pending_older_than)
        rows.extend(session.execute(stmt).scalars())
    if owners is not None:
        rows = [r for r in rows if r.host in owners.get(r.instance_uuid, ())]
    # The usage rows of every row read, pending or not: one read as
    # active may be pending by the time it is locked below (a report
    # unlisted it meanwhile), and giving its usage back must not lock
    # a usage row after an instance row: a report's transaction locks
    # them the other way round, and the two deadlocked after every
    # database outage.
    _usage_rows(session, [(r.host, r.nodename) for r in rows], lock=True)
    dropped = []
    for row in rows:
        try:
            session.refresh(row, with_for_update=True)
        except sa.exc.InvalidRequestError:
            # Gone since it was read: another worker dropped it first
            # (every worker hears of a deletion, and each releases it).
            session.expunge(row)
            continue
        if (only_pending_older_than is not None
                and not (row.pending
                         and row.status in instances.UNCONFIRMED)):
            continue
        if row.pending:
            _take(session.connection(), [_as_request(row)], sign=-1,
                  check=False)
        dropped.append(_placement_dict(row))
        session.delete(row)
    session.flush()
    return dropped


@engine.retry_on_deadlock
def release(instance_uuids: Sequence[str],
            host: str | None = None) -> list[dict]:
    """Drop placements (a request rolled back, an instance deleted).

    With ``host``, only placements on that host go: a compute speaks for
    its own instances, never for another host's.
    """
    with engine.transaction() as session:
        return _drop(session, instance_uuids, host=host)


@engine.retry_on_deadlock
def release_on_hosts(uuids_by_host: dict) -> list[dict]:
    """``release`` of each host's instances (host -> uuids), in one
    transaction; a placement on another host stays."""
    owners: dict = {}
    for host, uuids in uuids_by_host.items():
        for uuid in uuids:
            owners.setdefault(uuid, set()).add(host)
    with engine.transaction() as session:
        return _drop(session, list(owners), owners=owners)


@engine.retry_on_deadlock
def expire(instance_uuids: Sequence[str],
           claimed_before: datetime.datetime) -> list[dict]:
    """Drop the claims among ``instance_uuids`` nobody confirmed in time.

    Only claims still pending, never seen by their compute and made
    before ``claimed_before`` go.  Every worker may call this for the
    same claims; the row lock makes exactly one of them get each
    expired claim back, and only that one reports it.
    """
    with engine.transaction() as session:
        return _drop(session, instance_uuids,
                     only_pending_older_than=timeutils.normalize_time(
                         claimed_before))


# --- reports -----------------------------------------------------------------

@dataclasses.dataclass
class NodeReport:
    """What a report says of a node's usage, for ``apply_reports``."""

    host: str
    nodename: str
    memory_mb_used: int
    vcpus_used: int
    local_gb_used: int
    num_instances: int
    updated_at: datetime.datetime
    instance_uuids: frozenset
    #: The report's ``disk_available_least`` (None: not measured).
    disk_available_least: int | None = None

    @property
    def key(self) -> Key:
        return (self.host, self.nodename)


def _report_values(report: NodeReport) -> dict:
    return {'reported_memory_mb': report.memory_mb_used,
            'reported_vcpus': report.vcpus_used,
            'reported_disk_gb': report.local_gb_used,
            'reported_instances': report.num_instances,
            'reported_disk_least': report.disk_available_least,
            'reported_at': timeutils.normalize_time(report.updated_at)}


@engine.retry_on_conflict
def apply_reports(reports: Sequence[NodeReport]) -> list[str]:
    """Write reports' usage; pending instances they list stop pending.

    A report older than the one a row holds is skipped (several workers
    write the same reports; an old one must not come back).  A placement
    a written report no longer lists goes back to pending, or, already
    unlisted by an older report, is dropped (the module's invariant).
    Returns the uuids of the placements the reports confirmed.
    """
    newest = newest_reports(reports)
    if not newest:
        return []
    with engine.transaction(read_committed=True) as session:
        return apply_in(session, newest).confirmed


def newest_reports(reports: Sequence[NodeReport]) -> dict:
    """The newest of ``reports`` of each node, by key."""
    newest: dict[Key, NodeReport] = {}
    for report in reports:
        seen = newest.get(report.key)
        if seen is None or seen.updated_at <= report.updated_at:
            newest[report.key] = report
    return newest


@dataclasses.dataclass
class Applied:
    """What ``apply_in`` wrote: the uuids of the placements the reports
    confirmed and, read back, the nodes' usage rows and pending
    placements as they are at its commit (None when not read back)."""

    confirmed: list
    rows: list | None = None
    pending: list | None = None


def apply_in(session: orm.Session, newest: dict,
             read_back: bool = False) -> Applied:
    """``apply_reports`` of reports ``newest`` (``newest_reports``) in
    the caller's transaction, which it begins with the locks of the
    nodes' usage rows (before their placement rows, as every writer of
    usage); a READ COMMITTED one (``engine.transaction``), as it
    creates the rows it does not find.  ``read_back``: the usage rows
    and pending placements of those nodes too, as this transaction
    leaves them: they stay locked until it ends, so no other writer
    changes them before the commit.
    """
    confirmed: list = []
    rows = _usage_rows(session, newest, lock=True)
    hosts = sorted({host for host, _node in newest})
    pending: dict[Key, list] = {}
    settled: dict[Key, list] = {}
    table = _INST.__table__
    for chunk in engine.chunks(hosts):
        for inst in session.execute(
                _PENDING_ORM_ON_LOCKED, {'hosts': chunk}
        ).scalars():
            pending.setdefault((inst.host, inst.nodename),
                               []).append(inst)
        # Not locked: a non-pending row changes only by its deletion
        # (or replacement), which the conditional UPDATE below sees.
        for inst in session.execute(_SETTLED_ON, {'hosts': chunk}):
            settled.setdefault((inst.host, inst.nodename),
                               []).append(inst)
    new_rows, changed = [], []
    #: Placement rows that stop pending (confirmed) or go (dropped).
    gone_by: set = set()
    unlisted_any = False
    for key, report in sorted(newest.items()):
        values = _report_values(report)
        row = rows.get(key)
        if row is None:
            new_rows.append(dict(host=report.host,
                                 nodename=report.nodename,
                                 generation=0, **values))
            continue
        if (row.reported_at is not None
                and row.reported_at > values['reported_at']):
            continue
        listed_uuids = report.instance_uuids
        listed = [i for i in pending.get(key, ())
                  if i.instance_uuid in listed_uuids
                  and _settled_by(i, values['reported_at'])]
        gone = [i for i in pending.get(key, ())
                if i.status == instances.UNLISTED
                and i.instance_uuid not in listed_uuids
                and i.updated_at is not None
                and i.updated_at < values['reported_at']]
        unlisted = [i for i in settled.get(key, ())
                    if i.instance_uuid not in listed_uuids]
        # Built (update_instance_info) before this report was taken,
        # yet not in it: unlisted too (its usage is already pending).
        missing = [i for i in pending.get(key, ())
                   if i.status in (instances.ACTIVE,
                                   instances.RESIZE_ACTIVE)
                   and i.instance_uuid not in listed_uuids
                   and i.updated_at is not None
                   and i.updated_at < values['reported_at']]
        for inst in missing:
            inst.status = instances.UNLISTED
            inst.updated_at = values['reported_at']
        if not (listed or gone or unlisted) and all(
                getattr(row, name) == value
                for name, value in values.items()
                if name != 'reported_at'):
            # Nothing to tell the other workers (no sequence number,
            # no generation), but the time is the row's: a report
            # taken before this one, written after it, is older.
            if (row.reported_at is None
                    or row.reported_at < values['reported_at']):
                row.reported_at = values['reported_at']
            continue
        change = dict.fromkeys(('memory_mb', 'vcpus', 'disk_gb',
                                'instances'), 0)
        for inst in listed + gone:
            _count(change, inst, -1)
            gone_by.add(inst.instance_uuid)
            if inst in gone:
                session.delete(inst)
                continue
            # Written below, all in one statement.
            confirmed.append(inst.instance_uuid)
        for inst in unlisted:
            if _unlist(session, inst, values['reported_at']):
                unlisted_any = True
                _count(change, inst, 1)
        for field in ('memory_mb', 'vcpus', 'disk_gb', 'instances'):
            values['claimed_' + field] = (
                getattr(row, 'claimed_' + field) + change[field])
        changed.append(dict(values, _id=row.id))
    session.flush()
    conn = session.connection()
    for chunk in engine.chunks(confirmed):
        # Locked above (pending rows of these hosts): a statement per
        # chunk, not per instance, for the reason of
        # ``_update_usage_rows``.
        session.execute(sa.update(table).where(
            table.c.instance_uuid.in_(chunk)).values(
                pending=False, status=instances.ACTIVE))
    written = None
    if changed:
        written = _update_usage_rows(conn, changed,
                                     returning=read_back and not new_rows)
    if new_rows:
        # A service's first flush writes every node: one statement.
        _execute_numbered(conn, sa.insert(_USAGE), new_rows)
    session.flush()
    if not read_back:
        return Applied(confirmed)
    if written is not None or not changed and not new_rows:
        # Every row is one locked above, as this transaction left it,
        # or one the update returned.
        ids = {row['_id'] for row in changed}
        usage_rows = (written or []) + [
            _usage_dict(row) for row in rows.values() if row.id not in ids]
    else:
        usage_rows = [found for chunk in engine.chunks(hosts)
                      for found in map(dict, _rows_of(conn.execute(
                          _USAGE_ON, {'hosts': chunk})))
                      if (found['host'], found['nodename']) in newest]
    if unlisted_any:
        # Rows made pending again: read them whole.
        still = [_placement_dict(inst) for chunk in engine.chunks(hosts)
                 for inst in conn.execute(_PENDING_ON, {'hosts': chunk})
                 if (inst.host, inst.nodename) in newest]
    else:
        still = [_placement_dict(inst) for key in newest
                 for inst in pending.get(key, ())
                 if inst.instance_uuid not in gone_by]
    return Applied(confirmed, usage_rows, still)


def _rows_of(result) -> Iterable[dict]:
    return (dict(zip(USAGE_COLUMNS, row)) for row in result)


def _update_usage_rows(conn: sa.Connection, changed: list,
                       returning: bool = False) -> list | None:
    """Write the reported usage of existing rows (``_id``: the row's id,
    and the ``_REPORTED`` columns) a batch a statement, not a statement
    a row: the rows stay locked until the transaction ends and claims on
    those nodes wait, while under eventlet every statement is a round
    trip during which the worker serves other requests.

    On PostgreSQL ``UPDATE ... FROM unnest(arrays)``
    (``engine.update_from_arrays``), which with ``returning`` returns
    the rows written (``USAGE_COLUMNS``); None elsewhere.
    """
    if conn.dialect.name == 'postgresql':
        stmt = _UPDATE_FROM_ARRAYS_RETURNING if returning else \
            _UPDATE_FROM_ARRAYS
        written = []
        for chunk in engine.chunks(changed):
            result = conn.execute(stmt, engine.update_from_arrays_params(
                chunk, _REPORTED))
            if returning:
                written.extend(_rows_of(result))
        return written if returning else None
    table = _USAGE.__table__
    _execute_numbered(conn, sa.update(table).where(
        table.c.id == sa.bindparam('_id')).values(
            generation=table.c.generation + 1), changed)
    return None


#: What a report's write sets: ``_report_values`` and the claimed totals.
_REPORTED = USAGE_COLUMNS[2:-2]

_UPDATE_FROM_ARRAYS = engine.update_from_arrays(
    _USAGE.__table__, _REPORTED,
    generation=_USAGE.__table__.c.generation + 1,
    seq=models.USAGE_SEQUENCE.next_value())
_UPDATE_FROM_ARRAYS_RETURNING = _UPDATE_FROM_ARRAYS.returning(
    *[_USAGE.__table__.c[name] for name in USAGE_COLUMNS])

# Built once (see ``_PENDING``).
_HOSTS = sa.bindparam('hosts', expanding=True)
_PENDING_ORM_ON = sa.select(_INST).where(_INST.host.in_(_HOSTS),
                                         _INST.pending.is_(True))
_PENDING_ORM_ON_LOCKED = _locking_read(_PENDING_ORM_ON, _INST,
                                       _INST_NODE_INDEX)
_SETTLED_ON = sa.select(
    *[_INST.__table__.c[name] for name in (
        'instance_uuid', 'host', 'nodename', 'memory_mb', 'vcpus',
        'disk_gb')]).where(_INST.__table__.c.host.in_(_HOSTS),
                           _INST.__table__.c.pending.is_(False))
_USAGE_ON = _SELECT_USAGE.where(_USAGE.__table__.c.host.in_(_HOSTS))
_USAGE_ORM_ON = sa.select(_USAGE).where(_USAGE.host.in_(_HOSTS)).order_by(
    _USAGE.host, _USAGE.nodename)
_USAGE_ORM_ON_LOCKED = _locking_read(_USAGE_ORM_ON, _USAGE, _USAGE_KEY_INDEX)


def _count(change: dict, inst, sign: int) -> None:
    """Add (``sign=1``) or take away one placement's usage in ``change``."""
    change['memory_mb'] += sign * inst.memory_mb
    change['vcpus'] += sign * inst.vcpus
    change['disk_gb'] += sign * inst.disk_gb
    change['instances'] += sign


def _settled_by(inst, reported_at: datetime.datetime) -> bool:
    """Whether a report taken at ``reported_at`` that lists the pending
    placement ``inst`` counts its usage: a resize on its own node only
    once confirmed, by a report taken after the confirmation (before
    it, the report may count the old size)."""
    if inst.status == instances.RESIZE_CLAIMED:
        return False
    return inst.status != instances.RESIZE_ACTIVE or (
        inst.updated_at is not None and inst.updated_at < reported_at)


def _unlist(session: orm.Session, inst, reported_at) -> bool:
    """Make a non-pending placement the node's report no longer lists
    pending again (``unlisted`` since ``reported_at``); False if it was
    deleted or replaced meanwhile."""
    table = _INST.__table__
    return session.execute(sa.update(table).where(
        table.c.instance_uuid == inst.instance_uuid,
        table.c.host == inst.host, table.c.nodename == inst.nodename,
        table.c.pending.is_(False)).values(
            pending=True, status=instances.UNLISTED,
            updated_at=reported_at)).rowcount == 1


def confirm(host: str, instance_uuids: Iterable[str],
            resizes: bool = True) -> int:
    """A compute says these instances run on ``host``: mark them active.

    Their usage stays counted as pending until a report lists them: the
    compute's next report is what moves it into ``reported_*``.
    ``resizes``: resize claims on their own node too (not for a list
    of what runs, which has the instance from before its resize).
    """
    return confirm_many([(host, instance_uuids)], resizes)[0]


#: A confirmed claim's new status (``instances.CONFIRMED``).
_CONFIRMED_STATUS = sa.case(instances.CONFIRMED, value=_INST.status)
#: ``confirm_many``'s statement where a statement commits alone, built
#: once: building it anew for every build cost a quarter of its CPU.
_ACTIVATE = sa.update(_INST.__table__).where(
    sa.tuple_(_INST.instance_uuid, _INST.host).in_(
        sa.bindparam('wanted', expanding=True)),
    _INST.status.in_(sa.bindparam('statuses', expanding=True))).values(
        status=_CONFIRMED_STATUS, updated_at=sa.bindparam('now')).returning(
            _INST.instance_uuid, _INST.host)


def confirm_many(builds: Sequence[tuple[str, Iterable[str]]],
                 resizes: bool = True) -> list[int]:
    """``confirm`` for several computes' news at once: ``builds`` is
    ``(host, instance_uuids)`` pairs; returns, for each, how many of its
    claims it marked active.  A claim is marked only by the host it was
    placed on.

    Where a statement commits alone (PostgreSQL): one ``UPDATE ... WHERE
    (instance_uuid, host) IN (...) AND status IN (...) RETURNING``,
    in no transaction, so the rows are not held locked across the round
    trips of a worker busy with other requests; setting what is set
    already changes nothing, so it may run again.  On SQLite, which
    writes a transaction at a time with an fsync at each commit, one
    transaction; elsewhere one transaction a compute.
    """
    builds = [(host, sorted(set(uuids))) for host, uuids in builds]
    wanted = sorted({(uuid, host) for host, uuids in builds
                     for uuid in uuids})
    if not wanted:
        return [0] * len(builds)
    table = _INST.__table__
    statuses = list(instances.UNCONFIRMED) if resizes else [
        instances.CLAIMED]
    if engine.statements_commit_alone():
        def activate_all(conn) -> set:
            marked = set()
            now = timeutils.utcnow()
            for chunk in engine.chunks(wanted):
                marked.update(tuple(row) for row in conn.execute(
                    _ACTIVATE, {'wanted': chunk, 'now': now,
                                'statuses': statuses}))
            return marked

        marked = engine.run_autocommit(activate_all)
        return [len({(uuid, host) for uuid in uuids} & marked)
                for host, uuids in builds]

    def activate(session: orm.Session, host: str, uuids: list) -> int:
        return sum(session.execute(sa.update(table).where(
            table.c.instance_uuid.in_(chunk), table.c.host == host,
            table.c.status.in_(statuses)).values(
                status=_CONFIRMED_STATUS, updated_at=timeutils.utcnow())
        ).rowcount for chunk in engine.chunks(uuids))

    if engine.get_engine().dialect.name == 'sqlite':
        with engine.transaction() as session:
            return [activate(session, host, uuids) for host, uuids in builds]
    counts = []
    for host, uuids in builds:
        with engine.transaction() as session:
            counts.append(activate(session, host, uuids))
    return counts


@engine.retry_on_deadlock
def sync_host(host: str, instance_uuids: Iterable[str]) -> list[dict]:
    """Align ``host``'s placements with the compute's complete list.

    Placements the compute no longer has go, only those a report
    counts (not pending): the list carries no time, and may have been
    taken before the build a confirmation announced (served later, or
    by a slower worker); dropping a pending one would give the room of
    an instance that runs to another claim.  Reports, by their time,
    unlist and drop the pending ones.  Listed claims become active
    (not resize claims: the list has the instance at its old size).
    Returns the dropped placements.
    """
    listed = set(instance_uuids)
    with engine.transaction() as session:
        gone = [uuid for uuid in session.execute(
            sa.select(_INST.instance_uuid).where(
                _INST.host == host, _INST.pending.is_(False))).scalars()
                if uuid not in listed]
        dropped = _drop(session, gone, host=host)
    confirm(host, listed, resizes=False)
    return dropped


def delete_nodes(host: str, nodename: str | None = None) -> int:
    """Forget a host's usage rows (with ``scheduler.db.api.host_delete``)."""
    stmt = sa.delete(_USAGE).where(_USAGE.host == host)
    if nodename is not None:
        stmt = stmt.where(_USAGE.nodename == nodename)
    with engine.transaction() as session:
        return session.execute(stmt).rowcount
