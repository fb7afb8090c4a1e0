"""What the inventory says of each node's usage, as this worker last read it.

``UsageCache`` owns, per node, the ``node_usage`` row last read (or as
this worker's claims changed it) and the claims pending on the node,
made by this worker or any other sharing the inventory, plus the usage
sequence number up to which changes were read and the numbers below it
not seen yet (``SeqGaps``).  It shares the host
manager's lock: its ``read_*`` methods query the inventory without the
lock; everything else is called with the lock held.

A row read without the lock may arrive after a newer one of its node
(another refresh, a claim): ``take`` keeps the newer, row and pending
claims alike.
"""

import dataclasses
import datetime
import time
import typing

from oslo_config import cfg

from scheduler.db import instances
from scheduler.db import usage

CONF = cfg.CONF


class SeqGaps:
    """How far a reader has read a sequence whose numbers may become
    visible out of order, and the numbers below that it has not seen.

    A native sequence (PostgreSQL, MariaDB) hands a number out when a
    transaction writes and shows it when the transaction commits: a
    number taken first may show after higher ones were read.  Each
    number skipped by a read (an open gap) is read again, by number,
    until it shows or is given up (``expiry``).  Most never show: the
    number of a row written again since, or of a transaction rolled
    back.  With no open gap a read is the rows after the mark, as on a
    sequence whose commits show in order (``tracked`` False: SQLite's
    counter row), where no gap is ever opened.
    """

    #: The most open gaps kept, the newest: each is a number every
    #: read asks for (an index probe, and a parameter the client
    #: sends).  Past it the oldest are given up first, as the least
    #: likely to show: a load, or a first read after a quiet stretch,
    #: finds most numbers below its mark long overwritten.
    MOST = 64

    def __init__(self, tracked: bool, expiry: float,
                 clock: typing.Callable[[], float] = time.monotonic):
        #: The highest number read.
        self.high = 0
        self._tracked = tracked
        self._expiry = expiry
        self._clock = clock
        #: Open gap -> when it was first found (``clock``).
        self._open: dict = {}

    def open(self) -> list:
        """The open gaps, ascending, those found over ``expiry`` ago
        given up."""
        if not self._open:
            return []
        given_up = self._clock() - self._expiry
        # Copied first (one step under the GIL): a load may change the
        # gaps while a read, without the lock, gets them.
        for seq, found in list(self._open.items()):
            if found <= given_up:
                self._open.pop(seq, None)
        return sorted(self._open)

    def seen(self, seqs: typing.Iterable) -> None:
        """A read returned rows of numbers ``seqs`` (ascending): the
        rows after ``high`` and those of open gaps.  The numbers it
        skipped between ``high`` and its highest are new gaps."""
        skipped = []
        high = self.high
        for seq in seqs:
            if seq <= high:
                self._open.pop(seq, None)
                continue
            if seq > high + 1 and self._tracked:
                skipped.append((high + 1, seq - 1))
            high = seq
        self.high = high
        if skipped:
            self._skipped(skipped)

    def _skipped(self, ranges: list) -> None:
        """Open the numbers of ``ranges`` (ascending), the newest
        ``MOST`` of them; keep the newest ``MOST`` open gaps."""
        found = self._clock()
        room = self.MOST
        for first, last in reversed(ranges):
            start = max(first, last - room + 1)
            for seq in range(start, last + 1):
                self._open[seq] = found
            room -= last - start + 1
            if room <= 0:
                break
        if len(self._open) > self.MOST:
            for seq in sorted(self._open)[:len(self._open) - self.MOST]:
                self._open.pop(seq, None)


ROW_COLUMNS = usage.USAGE_COLUMNS
_ROW_COLUMNS = frozenset(ROW_COLUMNS)


class UsageRow:
    """A cached usage row, read like the store's dict (``row[name]``,
    ``row.get(name)``, ``dict(row)``) but kept in slots: one is held
    per node of the fleet, and slots spare each row a dict of its own.
    Never changed once made; a column the store did not
    give is missing, as in its dict."""

    __slots__ = ROW_COLUMNS

    #: ``row[name]`` is the slot's value, looked up without a Python
    #: call (compose and every report read several).
    __getitem__ = object.__getattribute__

    @classmethod
    def of(cls, row, key: tuple | None = None):
        """``row`` (the store's dict) as a ``UsageRow``, its host and
        node names ``key``'s texts when given (the key the cache holds
        it under); a row with a column this class does not know stays
        as it is."""
        if row is None or isinstance(row, cls) or not _ROW_COLUMNS.issuperset(
                row):
            return row
        new = object.__new__(cls)
        for name, value in row.items():
            object.__setattr__(new, name, value)
        if key is not None and (row.get('host'),
                                row.get('nodename')) == key:
            object.__setattr__(new, 'host', key[0])
            object.__setattr__(new, 'nodename', key[1])
        return new

    def __setattr__(self, name, value):
        raise AttributeError('a cached usage row is not changed')

    def get(self, name: str, default=None):
        if name not in _ROW_COLUMNS:
            return default
        return getattr(self, name, default)

    def keys(self) -> list:
        return [name for name in ROW_COLUMNS if hasattr(self, name)]

    def items(self) -> list:
        return [(name, getattr(self, name)) for name in self.keys()]

    def __eq__(self, other) -> bool:
        if isinstance(other, (UsageRow, dict)):
            return dict(self.items()) == dict(other.items())
        return NotImplemented

    __hash__ = None

    def __repr__(self) -> str:
        return 'UsageRow(%r)' % dict(self.items())


@dataclasses.dataclass
class Claim(usage.Placement):
    """Resources of one placed instance that no report includes yet."""

    claimed_at: float = dataclasses.field(default_factory=time.time)
    status: str = instances.CLAIMED

    @classmethod
    def from_row(cls, row: dict) -> 'Claim':
        return cls(
            row['instance_uuid'], row['host'], row['nodename'],
            row['memory_mb'], row['vcpus'], row['disk_gb'],
            project_id=row.get('project_id'), user_id=row.get('user_id'),
            numa=[tuple(x) for x in row.get('numa') or []],
            pci=[(_pool_key(key), count)
                 for key, count in row.get('pci') or []],
            claimed_at=(timestamp(row['updated_at'])
                        if row.get('updated_at') else time.time()),
            status=row.get('status', instances.CLAIMED))


class UsageCache:
    """Usage rows and pending claims of every node, for one worker."""

    def __init__(self, store):
        #: The usage store (``scheduler.db.usage``).
        self._store = store
        #: key -> the node's usage row as last read (or as we changed it).
        self.rows: dict = {}
        #: key -> {instance uuid: Claim} pending on the node (no entry:
        #: none).
        self.pending: dict = {}
        #: How far the usage sequence was read (made on first use: it
        #: asks the store whether its commits show in order).
        self._seq: SeqGaps | None = None

    @property
    def high_water(self) -> int:
        """The highest usage sequence number read."""
        return self._gaps().high

    def _gaps(self) -> SeqGaps:
        if self._seq is None:
            # A gap is given up after the claim expiry
            # (``service_down_time``).  A writer's transaction holds its
            # number until it commits, and nothing in the inventory
            # bounds how long (PostgreSQL sets no lock or statement
            # timeout by default; MariaDB's lock wait timeout bounds
            # each wait, not the transaction).  The writers are short
            # transactions that wait only for each other's row locks:
            # one still open after the claim expiry is stuck as long as
            # a claim whose build never came, which the inventory gives
            # up too.  A gap kept costs each read a number to look up,
            # not rows; more than ``SeqGaps.MOST`` of them give the
            # oldest up sooner.
            self._seq = SeqGaps(not self._store.commits_in_seq_order(),
                                CONF.scheduler.service_down_time)
        return self._seq

    # -- reading the inventory (without the lock) -------------------------

    def read_changed(self) -> list:
        """Rows changed since the last look, in sequence order: those
        after the highest number read and those of its open gaps."""
        gaps = self._gaps()
        return self._store.changed_since(gaps.high, gaps.open())

    def read_nodes(self, keys: set) -> list:
        """The usage rows of nodes ``keys``."""
        # Every row when most nodes are wanted (a fleet's first flush);
        # else only theirs: a flush writes a batch at a time, and reading
        # every row per batch made loading a large fleet quadratic.
        if len(keys) > 50 and 2 * len(keys) > len(self.rows):
            return [row for row in self._store.usage_get_all()
                    if row_key(row) in keys]
        return self._store.usage_get_nodes(sorted(keys))

    # -- changing the cache (with the lock held) --------------------------

    def changed(self, rows: list) -> list:
        """The keys of ``rows`` (from ``read_changed``) this cache does
        not hold yet; moves the mark past all of them."""
        changed = [row_key(row) for row in rows if self._is_new(row)]
        # Rows this worker already holds (its own claims) move the mark
        # too, or every request would read them again.
        self._gaps().seen([row['seq'] for row in rows])
        return changed

    def loaded(self, rows: list) -> None:
        """``rows`` are every usage row (a load): the mark moves past
        them, the numbers below it that none has open."""
        self._gaps().seen(sorted(row['seq'] for row in rows))

    def _is_new(self, row: dict) -> bool:
        known = self.rows.get(row_key(row))
        return known is None or (known['generation'], known['seq']) != (
            row['generation'], row['seq'])

    def take(self, rows: list, pending: list, keys: list) -> list:
        """Make ``rows`` and ``pending`` what is known of nodes ``keys``;
        return the keys taken.

        A node whose cached row is newer than the one read keeps what
        it has, its row and pending claims alike (a claim moves both).
        """
        # The caller's key objects, to hold the rows under (and share
        # their texts) rather than a new pair per row read.
        wanted = {key: key for key in keys}
        older = set()
        for row in rows:
            key = wanted.get(row_key(row))
            if key is None:
                continue
            if not _row_newer(row, self.rows.get(key)):
                older.add(key)
                continue
            # The mark is not moved: rows read by node leave the
            # numbers of other nodes' rows below theirs unread.
            self.rows[key] = UsageRow.of(row, key)
        keys = [key for key in keys if key not in older]
        fresh: dict = {}
        for row in pending:
            key = row_key(row)
            if key not in older:
                fresh.setdefault(key, {})[row['instance_uuid']] = \
                    Claim.from_row(row)
        # A node with nothing pending has no entry: an empty one per
        # node would cost a dict each across a whole fleet.
        for key in keys:
            claims = fresh.get(key)
            if claims:
                self.pending[key] = claims
            else:
                self.pending.pop(key, None)
        return keys

    def claimed(self, key, claims: list, after: dict | None,
                requests: list) -> tuple:
        """This worker's ``claims`` on node ``key`` are in the inventory,
        whose row of the node became ``after``.

        Returns whether the cached row is now ``after`` itself (these
        claims were its only change), and the nodes other placements of
        a replaced instance were pending on (their usage was given
        back).
        """
        pending = self.pending.setdefault(key, {})
        moved_from = set()
        for claim, request in zip(claims, requests):
            pending[claim.instance_uuid] = claim
            if request.replace:
                moved_from.update(
                    other for other, held in self.pending.items()
                    if other != key and claim.instance_uuid in held)
        after = UsageRow.of(after, key)
        known = _usage_after_claim(self.rows.get(key), after, requests)
        if known is not None:
            self.rows[key] = known = UsageRow.of(known, key)
        return known is after, moved_from

    def confirmed(self, keys: typing.Iterable, instance_uuids: list) -> None:
        """The inventory marked ``instance_uuids`` built (active) on
        nodes ``keys``: so are their pending claims here.  Their usage
        and the node's row are unchanged."""
        built = set(instance_uuids)
        for key in keys:
            held = self.pending.get(key, {})
            for uuid in built.intersection(held):
                status = instances.CONFIRMED.get(held[uuid].status)
                if status is not None:
                    held[uuid] = dataclasses.replace(held[uuid],
                                                     status=status)

    def forget(self, key) -> None:
        self.rows.pop(key, None)
        self.pending.pop(key, None)

    def usage_changed(self, key, view) -> bool:
        """Whether the report ``view`` says more than the node's usage
        row has."""
        row = self.rows.get(key)
        if row is None:
            return True
        pending = self.pending.get(key)
        if pending:
            listed = set(view.instance_uuids)
            # A placement the report lists stops pending; a built one it
            # does not list is unlisted, then dropped by a newer report
            # that still does not list it.
            # An unconfirmed resize on its own node stays pending.
            if any(claim.status not in instances.UNCONFIRMED
                   or uuid in listed
                   and claim.status != instances.RESIZE_CLAIMED
                   for uuid, claim in pending.items()):
                return True
        return (row['reported_memory_mb'], row['reported_vcpus'],
                row['reported_disk_gb'], row['reported_instances'],
                row.get('reported_disk_least')) != (
            view.memory_mb_used, view.vcpus_used, view.local_gb_used,
            view.num_instances, view.disk_available_least)

    def overdue(self, reports: dict, expiry: float) -> tuple:
        """Claims the compute kept reporting without for over ``expiry``
        seconds: their uuids and the keys of their nodes."""
        candidates, keys = [], set()
        for key, claims in self.pending.items():
            report = reports.get(key)
            if report is None:
                continue
            for claim in claims.values():
                if (claim.status in instances.UNCONFIRMED
                        and report.received_at - claim.claimed_at
                        > expiry):
                    candidates.append(claim.instance_uuid)
                    keys.add(key)
        return candidates, keys


def _usage_after_claim(known: dict | None, after: dict | None,
                       requests: list) -> dict | None:
    """The cached usage row of a node this worker just claimed on.

    The row the claim's transaction read back is taken as is when this
    claim was its only change since the cached one (the generation
    moved by one): the next request then has nothing to reload.
    A cached row as new as ``after`` or newer (a refresh read it after
    the claim committed and cached it first) already counts these
    claims: it is kept.  Otherwise (another worker claimed there
    meanwhile) the claims are added to the cached row, marked stale, so
    that the next refresh reads the node's claims again.
    """
    if (known is not None and after is not None
            and known['seq'] >= after['seq']):
        return known
    if (known is not None and after is not None
            and known['generation'] >= 0
            and after['generation'] == known['generation'] + 1):
        return after
    if known is None:
        return None
    # The claim's own write is the newest the cache knows of: a row read
    # before it (an older seq) must not replace this one.
    seq = known['seq'] if after is None else max(known['seq'], after['seq'])
    return dict(known, generation=-1, seq=seq,
                claimed_memory_mb=known['claimed_memory_mb']
                + sum(r.memory_mb for r in requests),
                claimed_vcpus=known['claimed_vcpus']
                + sum(r.vcpus for r in requests),
                claimed_disk_gb=known['claimed_disk_gb']
                + sum(r.disk_gb for r in requests),
                claimed_instances=known['claimed_instances']
                + len(requests))


def _row_newer(row: dict, known: dict | None) -> bool:
    """Whether usage ``row`` is as new as the cached ``known`` or newer.

    Told by the usage sequence: every write of a row gives it the next
    number, after the writes before it on that row (a row's writes take
    its lock in turn), and a node deleted and made again gets a new
    one, where its generation starts over.
    """
    return known is None or row['seq'] >= known['seq']


def row_key(row: dict) -> tuple:
    return (row['host'], row['nodename'])


def _pool_key(key) -> tuple:
    """A PCI pool key read back from JSON (lists) as the filter makes it."""
    vendor, product, numa_node, tags = key
    return (vendor, product, numa_node, tuple(tuple(t) for t in tags))


def timestamp(value: datetime.datetime) -> float:
    """Seconds since the epoch of a (naive UTC or aware) datetime."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=datetime.timezone.utc)
    return value.timestamp()
