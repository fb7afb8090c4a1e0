"""Hosts as columns: the filter scheduler's vectorised fast path.

Walking every ``HostView`` per filter and per weigher costs Python work
per host; the same tests over numpy arrays cost a few machine
instructions per host.  This module keeps, next to the views, one array
per number the in-tree filters and weighers read and integer codes for
categorical values (zones, supported instance types), and runs the
filter walk and the weighing over them, with exactly the decisions of
the per-host path (``filters.HostFilterHandler`` then
``weights.HostWeightHandler``):

* the per-host arithmetic, operation for operation, in float64 (every
  integer a report carries is exact there): masks and weights are
  equal to the bit;
* the handler's filter walk (counts per filter, log lines);
* the per-host stable sort (ties keep the candidates' order), found by
  partial selection: only the best few hosts are ever sorted.

The plugins' vector forms (``filter_columns``, ``weigh_columns``,
``column_multipliers``) are described in doc/authoring-guide.md; one
counts only when defined by the class of the per-host methods it stands
for, or a subclass (``vector_form``), so that a subclass overriding
``passes`` alone runs per host, as its author wrote it.  A plugin
without one runs per host on the survivors only.

For each later instance of a request, an in-tree vector form
(``_reusable``: it answers for a host from that host's columns and the
request alone) is asked only about the node the previous instance was
placed on; its other answers are kept from the previous instance
(``_Memo``).  A filter or weigher whose answers also depend on the
request's earlier instances says so with ``_row_local_for(spec_obj)``.  An
out-of-tree vector form is asked about every candidate each time.
Weights are kept only while every weigher that counts is row-local
and the candidates are the previous instance's: then the claimed
node's total alone is computed again when no weigher's lowest or
highest raw weight moved (``_total_after``), and the previous ranking
reused with that node moved (``_moved``); otherwise every candidate is
weighed again.

Consistency: ``ColumnStore`` is told by the HostManager of every view it
composes or drops (``HostManager.watch_views``).  A request works on a
``Snapshot``: the store's arrays as they were when it began (the store
writes a change into copies while a snapshot reads them), so that
reports arriving while it runs change nothing for it, as the per-host
path keeps the views it started with.
"""

import logging
import math
import typing

import numpy as np

from scheduler import concurrency
from scheduler.filters import base as filters_base
from scheduler.resources import aggregates as aggregates_res
from scheduler.resources import compute
from scheduler.weights import base as weights_base

#: Derived float64 columns: what the resource filters and weighers
#: compare, computed per row when the row changes (by the functions the
#: per-host forms call, so equal to the bit) instead of in array
#: operations for every request.
DERIVED = ('free_ram_mb', 'free_disk_mb', 'usable_ram_mb', 'usable_vcpus',
           'usable_disk_mb')
#: float64 columns.  ``disk_available_least`` is NaN when not reported;
#: ratios are the effective ones (aggregate overrides applied).
NUMBERS = ('memory_mb', 'memory_mb_used', 'local_gb', 'local_gb_used',
           'disk_available_least', 'vcpus', 'vcpus_used', 'ram_ratio',
           'cpu_ratio', 'disk_ratio', 'num_instances', 'num_io_ops',
           'failed_builds', 'hypervisor_version', 'received_at',
           'pci_free') + DERIVED
#: Boolean columns.
FLAGS = ('disabled', 'forced_down')
#: Categorical columns: int32 codes of interned values.
#: ``aggregate_set``: the number of the host's attached aggregates
#: (views with the same aggregates share it, ``HostView.set_aggregates``),
#: so that a filter judging aggregate metadata finds the few distinct
#: sets without walking every view.
CODES = ('zones', 'supported', 'host', 'aggregate_set')


def _row(view, interners: dict) -> tuple:
    """What the columns hold for ``view``: values in NUMBERS, FLAGS,
    CODES order, the codes interned (under the store's lock)."""
    least = view.disk_available_least
    return ((view.memory_mb, view.memory_mb_used, view.local_gb,
             view.local_gb_used, np.nan if least is None else least,
             view.vcpus, view.vcpus_used, view.allocation_ratio('ram'),
             view.allocation_ratio('cpu'), view.allocation_ratio('disk'),
             view.num_instances, view.num_io_ops, view.failed_builds,
             view.hypervisor_version or 0, view.received_at,
             sum(pool.count for pool in view.pci_pools or ()),
             view.free_ram_mb, view.free_disk_mb,
             compute.usable_ram_mb(view), compute.usable_vcpus(view),
             compute.usable_disk_mb(view)),
            (bool(view.disabled), bool(view.forced_down)),
            tuple(interners[name].code(value) for name, value in zip(
                CODES, (frozenset(view.availability_zones),
                        tuple(tuple(t)
                              for t in view.supported_instances or ()),
                        view.host, view.aggregate_set))))


def aggregate_number(view, key: str) -> float:
    """Metadata ``key`` of the host's aggregates as a number (the
    smallest of several), or NaN when unset or unreadable: what
    ``BaseHostWeigher.weight_multipliers`` replaces by the default."""
    raw = view.aggregate_values(key)
    if not raw:
        return np.nan
    value = aggregates_res.smallest_value(raw, key, None)
    return np.nan if value is None else float(value)


class _Interner:
    """Value <-> code; append-only, so a code never changes meaning."""

    def __init__(self):
        self.codes: dict = {}
        self.values: list = []

    def code(self, value) -> int:
        code = self.codes.get(value)
        if code is None:
            code = self.codes[value] = len(self.values)
            self.values.append(value)
        return code


#: A change waits for the snapshots reading the store's arrays
#: (``ColumnStore._waits``) while fewer than the larger of these wait:
#: a count, and a fraction (1/n) of the rows.  Past that, a copy now is
#: cheaper than making the request that releases the snapshot write
#: them all.
_WAIT_MIN = 64
_WAIT_FRACTION = 128
#: Instance entries a dropped view left (``ColumnStore._unlisted``)
#: are forgotten, once no snapshot is live, past the larger of this
#: and the rows.
_UNLISTED_MIN = 4096

#: The columns by type: one 2-D block per type, a row of it per column.
_BLOCKS = ((NUMBERS, np.float64), (FLAGS, bool), (CODES, np.int32))


class _Arrays:
    """The columns, rows grown by doubling.

    Each type's columns are the rows of one 2-D block (``blocks``), so
    that a host's values are written, and a snapshot's columns copied,
    in one operation per block rather than one per column; ``data``
    names each column (a row view of its block, contiguous).
    """

    def __init__(self, blocks: list, agg: dict):
        self.blocks = blocks
        #: Column name -> a row view of its block.
        self.data = {}
        for (names, _dtype), block in zip(_BLOCKS, blocks):
            self.data.update(zip(names, block))
        #: Metadata key -> aggregate_number column, for keys asked for.
        self.agg = agg

    @classmethod
    def empty(cls, capacity: int) -> '_Arrays':
        return cls([np.zeros((len(names), capacity), dtype)
                    for names, dtype in _BLOCKS], {})

    def grown(self, capacity: int) -> '_Arrays':
        """A copy with room for ``capacity`` rows (the new ones 0)."""
        def grow(old):
            new = np.zeros(old.shape[:-1] + (capacity,), old.dtype)
            new[..., :old.shape[-1]] = old
            return new
        return _Arrays([grow(b) for b in self.blocks],
                       {key: grow(a) for key, a in self.agg.items()})

    def put(self, row: int, view, interners: dict,
            replaces=None) -> bool:
        """``view``'s values into ``row``; ``replaces``: the view the
        row held, whose aggregate columns stay right when ``view``
        shares its aggregates (a claim's copy of it).  Whether aggregate
        columns were written."""
        for block, values in zip(self.blocks, _row(view, interners)):
            block[:, row] = values
        if not self.agg or (replaces is not None
                            and view.shares_aggregates(replaces)):
            return False
        for key, column in self.agg.items():
            column[row] = aggregate_number(view, key)
        return True

    def copy(self) -> '_Arrays':
        return _Arrays([b.copy() for b in self.blocks],
                       {key: a.copy() for key, a in self.agg.items()})

    def shallow(self) -> '_Arrays':
        """The same arrays, in dicts of its own: a snapshot adds the
        aggregate columns it reads to its own."""
        new = _Arrays.__new__(_Arrays)
        new.blocks = self.blocks
        new.data = self.data
        new.agg = dict(self.agg)
        return new

    def view(self, size: int) -> '_Arrays':
        """The first ``size`` rows, not copied (a snapshot's, while the
        store writes into copies of its own), and read-only: a plugin
        that wrote into a column it was given would write into the
        store."""
        return _Arrays([_read_only(b[:, :size]) for b in self.blocks],
                       {key: _read_only(a[:size])
                        for key, a in self.agg.items()})


def _read_only(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


class ColumnStore:
    """The columns of every host view the HostManager composed.

    A watcher of ``HostManager.watch_views``: a change is one row.  Rows
    of removed views are reused; the candidates' order (the
    HostManager's, which decides ties) is an insertion sequence number
    per row.

    A snapshot reads the store's own arrays until it is ``release``d.  A
    change arriving meanwhile waits (``_pending``) until the last
    snapshot reading the arrays is released, then is written in place.
    Only a new snapshot taken while another still reads, with changes
    waiting, copies the arrays (as does a burst of changes too large to
    wait); ``max_concurrent_decisions`` makes that rare.
    """

    def __init__(self, capacity: int = 1024):
        self._lock = concurrency.native_lock()
        self._arrays = _Arrays.empty(capacity)
        self._capacity = capacity
        self._size = 0
        self._rows: dict = {}
        self._views: list = []
        self._seq = np.zeros(capacity, np.int64)
        self._next_seq = 0
        self._free: list = []
        self._ordered = None
        self.interners = {name: _Interner() for name in CODES}
        #: ``Snapshot.has_aggregate_values`` answers, shared by the
        #: snapshots taken since an aggregate column last changed (a new
        #: dict then: older snapshots keep theirs).
        self._has_values: dict = {}
        #: Snapshots reading ``_arrays`` and ``_views`` as they are,
        #: which are copied before the next change; ``_generation``
        #: counts those copies.
        self._shared = 0
        self._generation = 0
        #: Whether ``_ordered`` is every row, in row order (no row was
        #: freed or reused): the columns need no gathering then.
        self._ordered_is_every_row = False
        #: ``(arrays, size, read-only views of them)``: the views a
        #: snapshot reads, made once per copy of the arrays (they show
        #: the changes written in place meanwhile) instead of per
        #: request; None when an array was replaced (grown, a new
        #: aggregate column).
        self._read_only: tuple | None = None
        #: ``(key, view or None for a removal)``, in order: changes
        #: that wait for the snapshots reading the arrays.
        self._pending: list = []
        #: Instance uuid -> the row (an int), or rows (a tuple), whose
        #: view lists it (``Snapshot.instance_counts``).  A superset
        #: of every snapshot's: an entry a view dropped is kept
        #: (``_unlisted``) until no snapshot is left that may still
        #: read the view that had it.
        self._instance_rows: dict = {}
        self._unlisted: list = []
        #: Snapshots taken and not released, whatever they read.
        self._live = 0

    def __len__(self) -> int:
        return len(self._rows)

    def _own(self) -> None:
        """Copies, if a snapshot reads the arrays; then the changes
        that waited for it."""
        if self._shared:
            self._arrays = self._arrays.copy()
            self._views = list(self._views)
            self._shared = 0
            self._generation += 1
        self._apply_pending()

    def _apply_pending(self) -> None:
        pending, self._pending = self._pending, []
        for key, view in pending:
            if view is None:
                self._remove(key)
            else:
                self._change(key, view)

    def _waits(self, key, view) -> bool:
        """Whether the change waits for the snapshots reading the
        arrays.  A burst of changes (``_WAIT_MIN``, ``_WAIT_FRACTION``:
        an aggregate's hosts) is written into copies at once instead:
        applying it would hold up the request that releases the last
        snapshot."""
        if not self._shared:
            return False
        if len(self._pending) >= max(_WAIT_MIN,
                                     self._size // _WAIT_FRACTION):
            self._own()
            return False
        self._pending.append((key, view))
        return True

    def release(self, generation: int) -> None:
        """A snapshot of ``generation`` no longer reads the arrays: the
        changes that waited for the last one are written."""
        with self._lock:
            self._live -= 1
            if generation == self._generation and self._shared:
                self._shared -= 1
                if not self._shared:
                    self._apply_pending()
            if not self._live and len(self._unlisted) > max(
                    _UNLISTED_MIN, self._size):
                self._forget_unlisted()

    def view_changed(self, key, view) -> None:
        with self._lock:
            if not self._waits(key, view):
                self._change(key, view)

    def _change(self, key, view) -> None:
        """Write ``view`` into its row (the arrays are the store's own)."""
        row = self._rows.get(key)
        if row is None:
            row = self._free.pop() if self._free else self._new_row()
            self._rows[key] = row
            self._seq[row] = self._next_seq
            self._next_seq += 1
            self._ordered = None
        replaces, self._views[row] = self._views[row], view
        self._index_instances(row, replaces, view)
        if self._arrays.put(row, view, self.interners, replaces):
            self._has_values = {}

    def view_removed(self, key) -> None:
        with self._lock:
            if not self._waits(key, None):
                self._remove(key)

    def _remove(self, key) -> None:
        row = self._rows.pop(key, None)
        if row is None:
            return
        self._index_instances(row, self._views[row], None)
        self._views[row] = None
        self._free.append(row)
        self._ordered = None

    def _index_instances(self, row: int, old, new) -> None:
        """Keep ``_instance_rows`` a superset of what the views list,
        now that ``row``'s view ``old`` is replaced by ``new`` (None: a
        removal).  Lists are shared by a view and its copies until
        replaced: most changes (a report saying nothing new) cost a
        comparison of identities."""
        before = () if old is None else old.instance_uuids
        after = () if new is None else new.instance_uuids
        if before is after:
            return
        if before:
            previous = set(before)
            added = [uuid for uuid in after if uuid not in previous]
            if len(previous) + len(added) != len(after):
                # Some went (else ``after`` is ``before`` and ``added``:
                # a claim).  Their entries go once no snapshot can
                # read ``old``; one missed here only stays.
                self._unlisted.extend(
                    (uuid, row) for uuid in previous.difference(after))
        else:
            added = after
        index = self._instance_rows
        for uuid in added:
            found = index.get(uuid)
            if found is None:
                index[uuid] = row
            elif found.__class__ is int:
                if found != row:
                    index[uuid] = (found, row)
            elif row not in found:
                index[uuid] = found + (row,)

    def _forget_unlisted(self) -> None:
        """Drop the entries of ``_instance_rows`` no view lists any
        more (no snapshot is left that may read an older view)."""
        index = self._instance_rows
        for uuid, row in self._unlisted:
            view = self._views[row] if row < len(self._views) else None
            if view is not None and uuid in view.instance_uuids:
                continue
            found = index.get(uuid)
            if found is None:
                continue
            if found.__class__ is int:
                if found == row:
                    del index[uuid]
                continue
            rest = tuple(r for r in found if r != row)
            index[uuid] = rest[0] if len(rest) == 1 else rest
        self._unlisted = []

    def instance_rows(self, uuid: str) -> tuple:
        """The rows whose view listed ``uuid`` (a superset: the caller
        checks the views it reads)."""
        found = self._instance_rows.get(uuid)
        if found is None:
            return ()
        return (found,) if found.__class__ is int else found

    def _new_row(self) -> int:
        if self._size == self._capacity:
            self._capacity *= 2
            self._arrays = self._arrays.grown(self._capacity)
            self._read_only = None
            seq = np.zeros(self._capacity, np.int64)
            seq[:self._size] = self._seq[:self._size]
            self._seq = seq
        self._views.append(None)
        self._size += 1
        return self._size - 1

    def row_of(self, key) -> int | None:
        return self._rows.get(key)

    def snapshot(self) -> 'Snapshot':
        """The columns as they are now, for one request."""
        with self._lock:
            if self._pending:
                # Another snapshot still reads the arrays: this one
                # sees the waiting changes in copies.
                self._own()
            if self._ordered is None:
                used = np.fromiter(self._rows.values(), np.int64,
                                   len(self._rows))
                self._ordered = used[np.argsort(self._seq[used],
                                                kind='stable')]
                self._ordered_is_every_row = bool(
                    len(used) == self._size and
                    (self._ordered == np.arange(self._size)).all())
            self._shared += 1
            cached = self._read_only
            if cached is None or cached[0] is not self._arrays or \
                    cached[1] != self._size:
                cached = self._read_only = (
                    self._arrays, self._size, self._arrays.view(self._size))
            self._live += 1
            return Snapshot(self, cached[2].shallow(), self._views,
                            self._ordered, self._has_values,
                            self._generation, self._ordered_is_every_row)

    def aggregate_column(self, key: str, size: int) -> np.ndarray:
        """Start keeping ``aggregate_number(view, key)`` for every row;
        a copy of its first ``size`` rows (a snapshot's)."""
        with self._lock:
            column = self._arrays.agg.get(key)
            if column is None:
                column = np.full(self._capacity, np.nan)
                for row, view in enumerate(self._views):
                    if view is not None:
                        column[row] = aggregate_number(view, key)
                self._arrays.agg[key] = column
                self._read_only = None
            return column[:size].copy()


class Snapshot:
    """The columns one request works on; only the request changes them
    (the chosen host's row, after a claim).

    Until ``release`` it reads the store's own arrays, whose changes wait
    for it (``ColumnStore``).  A row the request changes (``put``) is
    kept aside, and a column read after that is copied with it: only the
    columns later instances read are copied.
    """

    def __init__(self, store: ColumnStore, arrays: _Arrays, views: list,
                 ordered: np.ndarray, has_values: dict | None = None,
                 generation: int | None = None,
                 ordered_is_every_row: bool = False):
        self.store = store
        self.arrays = arrays
        self.views = views
        #: Rows of every host, in the HostManager's order.
        self.ordered = ordered
        #: ``ordered`` is ``arange(len(arrays))``: a column read for
        #: every host, in order, is the column itself.
        self.ordered_is_every_row = ordered_is_every_row
        self._has_values = {} if has_values is None else has_values
        #: The store generation read, None once released.
        self._generation = generation
        #: Row -> {column name: value} of the rows ``put`` changed.
        self._put: dict = {}
        #: Column name -> this snapshot's copy, with the rows ``put``.
        self._own: dict = {}
        #: Whether ``views`` is this snapshot's own list.
        self._own_views = False

    def release(self) -> None:
        """Read no more of the store's arrays (idempotent)."""
        if self._generation is not None:
            generation, self._generation = self._generation, None
            self.store.release(generation)

    def column(self, name: str) -> np.ndarray:
        own = self._own.get(name)
        if own is not None:
            return own
        column = self.arrays.data[name]
        if not self._put:
            return column
        own = self._own[name] = column.copy()
        for row, values in self._put.items():
            own[row] = values[name]
        return own

    def aggregate_column(self, key: str) -> np.ndarray:
        column = self.arrays.agg.get(key)
        if column is None:
            # First use of this key in this process: taken from the live
            # store, then patched to this snapshot's views.
            column = self.store.aggregate_column(key, len(self.views))
            for row, view in enumerate(self.views):
                if view is not None and \
                        self.store._views[row] is not view:
                    column[row] = aggregate_number(view, key)
            self.arrays.agg[key] = column
        return column

    def has_aggregate_values(self, key: str) -> bool:
        """Whether any host's aggregates set metadata ``key`` (asked
        once per key until an aggregate column changes)."""
        found = self._has_values.get(key)
        if found is None:
            found = self._has_values[key] = bool(
                (~np.isnan(self.aggregate_column(key))).any())
        return found

    def put(self, row: int, view) -> None:
        """Replace ``row``'s values by ``view``'s (a claimed host), for
        this snapshot only."""
        if not self._own_views:
            self.views = list(self.views)
            self._own_views = True
        with self.store._lock:
            numbers, flags, codes = _row(view, self.store.interners)
        values = dict(zip(NUMBERS + FLAGS + CODES, numbers + flags + codes))
        self._put[row] = values
        for name, own in self._own.items():
            own[row] = values[name]
        replaces, self.views[row] = self.views[row], view
        if self.arrays.agg and not view.shares_aggregates(replaces):
            for key, column in list(self.arrays.agg.items()):
                if not column.flags.writeable:
                    column = self.arrays.agg[key] = column.copy()
                column[row] = aggregate_number(view, key)
            self._has_values = {}

    def instance_counts(self, uuids: frozenset) -> dict:
        """Row -> how many of ``uuids`` its view lists (rows with none
        left out), without walking every row: the store's index names
        the rows that may list each uuid, this snapshot's views decide,
        and the rows it changed itself are counted directly."""
        views = self.views
        counts: dict = {}
        for uuid in uuids:
            for row in self.store.instance_rows(uuid):
                if row in self._put or row >= len(views):
                    continue
                view = views[row]
                if view is not None and uuid in view.instance_uuids:
                    counts[row] = counts.get(row, 0) + 1
        for row in self._put:
            found = len(uuids.intersection(views[row].instance_uuids))
            if found:
                counts[row] = found
            else:
                counts.pop(row, None)
        return counts

    def row_of(self, key) -> int | None:
        """The row of node ``key`` in this snapshot, if it has one."""
        row = self.store.row_of(key)
        if row is not None and row < len(self.views) and \
                self.views[row] is not None and self.views[row].key() == key:
            return row
        # The live store moved the node since (dropped, re-added).
        for row, other in enumerate(self.views):
            if other is not None and other.key() == key:
                return row
        return None


class Columns:
    """The candidates' columns, aligned with the candidates' order.

    What ``filter_columns`` and ``weigh_columns`` receive: attributes
    named as in ``NUMBERS`` and ``FLAGS`` (gathered on first use; the
    ``DERIVED`` ones are ``HostResources``' and
    ``scheduler.resources.compute``'s values under the same names),
    ``free_disk_gb``, ``ratio(resource)``, and helpers for categorical
    values and aggregate metadata.
    """

    def __init__(self, snapshot: Snapshot, rows: np.ndarray):
        self.snapshot = snapshot
        self.rows = rows
        self._cache: dict = {}

    def __len__(self) -> int:
        return len(self.rows)

    def __getattr__(self, name: str) -> np.ndarray:
        if name.startswith('_') or name not in self.snapshot.arrays.data:
            raise AttributeError(name)
        cache = self.__dict__['_cache']
        value = cache.get(name)
        if value is None:
            value = self.snapshot.column(name)
            if not (self.rows is self.snapshot.ordered
                    and self.snapshot.ordered_is_every_row):
                # Read-only like the snapshot's own: the same for a
                # plugin whichever it gets.
                value = _read_only(value[self.rows])
            cache[name] = value
        return value

    def ratio(self, resource: str) -> np.ndarray:
        """Effective allocation ratio of ``'cpu'``, ``'ram'``, ``'disk'``."""
        return getattr(self, '%s_ratio' % resource)

    @property
    def free_disk_gb(self) -> np.ndarray:
        """``scheduler.resources.compute.free_disk_gb``: capped by
        ``disk_available_least`` where reported (NaN elsewhere)."""
        return np.fmin(self.local_gb - self.local_gb_used,
                       self.disk_available_least)

    def instances_among(self, uuids: frozenset) -> np.ndarray:
        """How many of the instances ``uuids`` each candidate's view
        lists (``Snapshot.instance_counts``)."""
        counts = np.zeros(len(self.snapshot.views))
        for row, count in self.snapshot.instance_counts(uuids).items():
            counts[row] = count
        return counts[self.rows]

    def host_counts(self, names: list) -> np.ndarray:
        """How many times each candidate's host name is in ``names``
        (``names.count(host)`` per candidate)."""
        interner = self.snapshot.store.interners['host']
        table = np.zeros(len(interner.values) + 1)
        for name in set(names):
            code = interner.codes.get(name)
            if code is not None:
                table[code] = names.count(name)
        return table[self.host]

    def code_mask(self, name: str,
                  predicate: typing.Callable[[typing.Any], bool]
                  ) -> np.ndarray:
        """Hosts whose categorical value ``name`` satisfies ``predicate``
        (asked once per distinct value, not once per host)."""
        values = self.snapshot.store.interners[name].values
        table = np.fromiter((bool(predicate(v)) for v in list(values)),
                            bool)
        return table[getattr(self, name)]

    def aggregate_number(self, key: str) -> np.ndarray | None:
        """``aggregate_number`` of metadata ``key`` per candidate; None
        when no host has the key set (most keys, most of the time)."""
        if not self.snapshot.has_aggregate_values(key):
            return None
        return self.snapshot.aggregate_column(key)[self.rows]

    def one_view_per_code(self, name: str) -> dict:
        """Code -> one candidate's view with that value of categorical
        column ``name``, for each value among the candidates (which
        view of several: unspecified)."""
        codes = getattr(self, name)
        if not len(codes):
            return {}
        # Later positions overwrite earlier ones: one position per code.
        position = np.zeros(int(codes.max()) + 1, np.intp)
        position[codes] = np.arange(len(codes))
        present = np.flatnonzero(np.bincount(codes))
        views, rows = self.snapshot.views, self.rows
        return {code: views[rows[position[code]]]
                for code in present.tolist()}

    def views(self) -> list:
        """The candidates' HostViews, in order (for per-host plugins)."""
        views = self.snapshot.views
        return [views[r] for r in self.rows.tolist()]


def vector_form(plugin, name: str, per_host: tuple):
    """``plugin``'s bound method ``name`` if it stands for ``per_host``:
    defined by the class that defines the last of those, or a subclass."""
    key = (type(plugin), name, per_host)
    found = _VECTOR_FORMS.get(key)
    if found is None:
        found = _VECTOR_FORMS[key] = _has_vector_form(type(plugin), name,
                                                      per_host)
    return getattr(plugin, name) if found else None


#: (class, method, per-host methods) -> whether the class's ``method``
#: stands for them: asked for every filter and weigher of every
#: instance, answered once per class.
_VECTOR_FORMS: dict = {}


def _has_vector_form(cls: type, name: str, per_host: tuple) -> bool:
    mro = cls.__mro__

    def owner(attr):
        for depth, klass in enumerate(mro):
            if attr in vars(klass):
                return depth
        return len(mro)

    depth = owner(name)
    return not (depth == len(mro) or any(owner(a) < depth
                                         for a in per_host))


def _reusable(plugin, name: str) -> bool:
    """Whether ``plugin``'s vector form ``name`` is one of this
    project's own, which answer for each host from that host's columns
    and the request alone (the property tests hold them to it): the
    memo (``_Memo``) reuses their answers.  Nothing asks plugin authors
    to promise as much, so an out-of-tree vector form, or an in-tree
    one a plugin overrides, is asked about every host each time."""
    key = (type(plugin), 'reusable', name)
    found = _VECTOR_FORMS.get(key)
    if found is None:
        owner = next(klass for klass in type(plugin).__mro__
                     if name in vars(klass))
        found = _VECTOR_FORMS[key] = \
            owner.__module__.split('.', 1)[0] == __name__.split('.', 1)[0]
    return found


#: The per-host methods each vector form stands for (``vector_form``).
FILTER_METHODS = ('host_passes', 'filter_all', 'prepare', 'passes')
WEIGH_METHODS = ('_weigh_object', 'weigh_objects')
MULTIPLIER_METHODS = ('weight_multiplier', 'weight_multipliers')


class Candidates:
    """The hosts one instance of a request may go to.

    ``rows`` in the snapshot, in a base order; ``previous`` the weights
    the earlier instances gave them, which order ties as the per-host
    path's re-sorted list does: the true order is by (-last weights,
    ..., -first weights, base order).  For a later instance, ``memo`` is
    what the previous instance's walk left (``_Memo``) and ``checked``
    the row-local filters every one of them passed.
    """

    def __init__(self, snapshot: Snapshot, rows: np.ndarray,
                 previous: list | None = None,
                 memo: '_Memo | None' = None,
                 checked: frozenset = frozenset()):
        self.snapshot = snapshot
        self.rows = rows
        self.previous = previous or []
        self.memo = memo
        self.checked = checked
        self._changed: np.ndarray | None = None
        #: The memo's hosts in the memo's order: nothing filtered out
        #: or reordered since (the memo's weights are by position).
        self.same_as_memo = False
        self._columns: Columns | None = None

    def __len__(self) -> int:
        return len(self.rows)

    def take(self, positions) -> 'Candidates':
        return Candidates(self.snapshot, self.rows[positions],
                          [p[positions] for p in self.previous], self.memo,
                          self.checked)

    def in_order(self) -> 'Candidates':
        """The same hosts with the true order as base order."""
        if not self.previous:
            return self
        order = _order(self.previous, len(self))
        return Candidates(self.snapshot, self.rows[order], None, self.memo,
                          self.checked)

    def columns(self) -> 'Columns':
        """These hosts' ``Columns``, shared by every plugin asked about
        them (each column is gathered once)."""
        if self._columns is None:
            self._columns = Columns(self.snapshot, self.rows)
        return self._columns

    def changed_views(self) -> list:
        """The ``changed`` hosts' views: a plugin asks its per-host form
        about them (one host at most: cheaper than gathering columns)."""
        views = self.snapshot.views
        return [views[row] for row in self.rows[self.changed()].tolist()]

    def changed(self) -> np.ndarray:
        """The position of the host an earlier instance's claim changed
        since ``memo`` was taken, if it is among these (every position
        without a memo)."""
        if self.memo is None:
            return np.arange(len(self))
        if self._changed is None:
            self._changed = np.zeros(0, np.int64) \
                if self.memo.changed is None \
                else np.flatnonzero(self.rows == self.memo.changed)
        return self._changed


class _Memo:
    """What one instance's filter walk and weighing leave to the next
    instance of the same request: the row-local plugins' answers, which
    stay true for every host but the one the instance was placed on."""

    def __init__(self, changed: int | None, checked: frozenset,
                 raw: dict, terms: list | None = None,
                 order: np.ndarray | None = None):
        #: The snapshot row changed since (the claimed node's), if any.
        self.changed = changed
        #: ``id`` of the row-local filters every candidate passed.
        self.checked = checked
        #: ``id(weigher)`` -> raw weights of the row-local weighers, by
        #: position of the instance's candidates: None when every
        #: multiplier was 0, a float when the same for every host, else
        #: clamped, an array of the request's own (``terms``' array).
        self.raw = raw
        #: ``(weigher, multipliers, raw, low, high)`` of each weigher
        #: the totals were summed from, in order, when every one is
        #: row-local (``_weigh_again``); else None.
        self.terms = terms
        #: The first positions of the instance's ranking, as far as it
        #: was sorted (``Ranked._order``).
        self.order = order


def _order(keys: list, n: int, among: np.ndarray | None = None
           ) -> np.ndarray:
    """Positions sorted by descending ``keys`` (last is primary), then
    ascending position; only ``among`` when given."""
    pos = np.arange(n) if among is None else among
    if len(keys) > 1:
        # The earlier keys only break ties of the last: without ties
        # (nearly always, later instances of a request), one sort.
        primary = keys[-1] if among is None else keys[-1][among]
        order = np.argsort(-primary, kind='stable')
        ranked = primary[order]
        if (ranked[1:] != ranked[:-1]).all() and \
                not np.isnan(ranked).any():
            return pos[order]
    sort_keys = [pos] + [-(k if among is None else k[among]) for k in keys]
    return pos[np.lexsort(sort_keys)]


def _mapped(views: list, passed: list, flt) -> list:
    index = {id(v): i for i, v in enumerate(views)}
    try:
        return [index[id(h)] for h in passed]
    except KeyError:
        raise TypeError('%s.filter_all returned a host it was not given'
                        % flt.name())


def filter_candidates(cands: Candidates, spec_obj, filters: list,
                      index: int = 0,
                      report: filters_base.FilterReport | None = None
                      ) -> Candidates:
    """``HostFilterHandler.get_filtered_objects`` over columns.

    A row-local filter that every candidate passed for the previous
    instance of the request looks again only at the hosts its claim
    changed: the walk, counts and survivors are the same as if it
    looked at every host.
    """
    rebuild = compute.request_is_rebuild(spec_obj)
    memo = cands.memo
    checked = set()
    # Asked once a walk, not twice per filter.
    debug = filters_base.LOG.isEnabledFor(logging.DEBUG)
    for flt in filters:
        if not filters_base.should_run(flt, index, rebuild):
            continue
        name = flt.name()
        before = len(cands)
        if debug:
            filters_base.LOG.debug('Starting with %d host(s) for %s',
                                   before, name)
        if memo is not None and id(flt) in memo.checked:
            mask = _changed_mask(flt, cands, spec_obj)
        else:
            mask = _filter_mask(flt, cands, spec_obj)
        if mask is not None:
            if mask is not _EVERY and not mask.all():
                cands = cands.take(np.flatnonzero(mask))
            if vector_form(flt, 'filter_columns', FILTER_METHODS) and \
                    _reusable(flt, 'filter_columns') and \
                    _row_local_for(flt, spec_obj):
                checked.add(id(flt))
        else:
            cands = cands.in_order()
            views = cands.columns().views()
            passed = list(flt.filter_all(views, spec_obj))
            kept = np.array(_mapped(views, passed, flt), np.int64)
            cands = cands.take(kept)
        if debug:
            filters_base.LOG.debug('Filter %s returned %d host(s)', name,
                                   len(cands))
        if not filters_base.record_step(report, name, before, len(cands),
                                        spec_obj):
            break
    cands.checked = frozenset(checked)
    return cands


#: ``_changed_mask``'s answer when every candidate passes.
_EVERY = np.ones(0, bool)


def _changed_mask(flt, cands: Candidates, spec_obj):
    """``_filter_mask`` of a row-local filter that passed every
    candidate last time: asked only of the changed hosts (``_EVERY``
    when they pass)."""
    changed = cands.changed()
    if not len(changed):
        return _EVERY
    views = cands.changed_views()
    passed = list(flt.filter_all(views, spec_obj))
    if len(passed) == len(views):
        return _EVERY
    passed = {id(view) for view in passed}
    mask = np.ones(len(cands), bool)
    mask[changed] = [id(view) in passed for view in views]
    return mask


def _filter_mask(flt, cands: Candidates, spec_obj):
    """The filter's mask over ``cands``, or None to run it per host."""
    method = vector_form(flt, 'filter_columns', FILTER_METHODS)
    prepared = spec_obj
    if isinstance(flt, filters_base.RequestScopedFilter) and (
            method is not None or type(flt).filter_all is
            filters_base.RequestScopedFilter.filter_all):
        prepared = flt.prepare(spec_obj)
        if prepared is filters_base.SKIP:
            # Every host passes, as the base filter_all has it.
            return np.ones(len(cands), bool)
    if method is None:
        return None
    mask = method(cands.columns(), prepared)
    return None if mask is None else np.asarray(mask, bool)


def weigh_candidates(cands: Candidates, spec_obj,
                     weighers: list) -> 'Ranked':
    """``HostWeightHandler.get_weighed_objects`` over columns (without
    ``explain``), weigher by weigher.

    A later instance of the request whose hosts are the previous
    one's, in its order, weighs again only the host its claim changed
    when it can (``_weigh_again``).
    """
    n = len(cands)
    if n <= 1:
        return Ranked(cands, np.zeros(n))
    memo = cands.memo
    if memo is not None and memo.terms is not None and cands.same_as_memo:
        again = _weigh_again(cands, spec_obj, weighers, memo)
        if again is not None:
            return again
    columns = cands.columns()
    kept: dict = {}
    terms, every_local = [], True
    for weigher in weighers:
        term = _term(weigher, cands, columns, spec_obj, kept)
        if term is not None:
            terms.append((weigher,) + term[:2])
            every_local = every_local and term[2]
    totals, terms = _summed(terms, n)
    # When every weigher that counts is row-local, the next instance
    # may weigh the changed host alone.
    return Ranked(cands, totals, kept, terms if every_local else None)


def _summed(terms: list, n: int) -> tuple:
    """``(totals, terms)``: the weights of ``n`` hosts from ``terms``,
    ``(weigher, multipliers, raw weights clamped)``, normalised,
    multiplied and added in order as ``HostWeightHandler`` does; the
    terms with their ``low`` and ``high`` raw weight appended."""
    totals = np.zeros(n)
    bounded = []
    for weigher, multipliers, raw in terms:
        high = float(raw.max() if weigher.maxval is None else weigher.maxval)
        low = float(raw.min() if weigher.minval is None else weigher.minval)
        bounded.append((weigher, multipliers, raw, low, high))
        if high == low:
            # Every host normalises to 0: adding 0 (or -0) to totals
            # that start at +0 changes no bit (failed builds, PCI
            # devices and hypervisor versions are often the same
            # everywhere).
            if np.isfinite(multipliers).all():
                continue
            totals += multipliers * np.zeros(n)
        else:
            totals += multipliers * ((raw - low) / (high - low))
    return totals, bounded


def _term(weigher, cands: Candidates, columns: Columns, spec_obj,
          kept: dict) -> tuple | None:
    """``(multipliers, raw weights, keep)`` of one weigher, the raw
    weights clamped to its ``minval``/``maxval``, or None when it cannot
    change the ranking (every multiplier 0, or the same raw weight for
    every host).  ``keep``: the raw weights came from a row-local vector
    form, so the next instance may keep them (and they are in ``kept``
    by ``id(weigher)``, as are the skipped row-local weighers')."""
    column_multipliers = vector_form(weigher, 'column_multipliers',
                                     MULTIPLIER_METHODS)
    if column_multipliers is not None:
        multipliers = np.asarray(column_multipliers(columns), float)
    else:
        multipliers = _per_host(cands, weigher.weight_multipliers)
    method = vector_form(weigher, 'weigh_columns', WEIGH_METHODS)
    local = method is not None and column_multipliers is not None and \
        _reusable(weigher, 'weigh_columns') and \
        _row_local_for(weigher, spec_obj)
    # One number (the usual case) is tested without ndarray.any's
    # Python-level wrapper.
    if not (multipliers.any() if multipliers.ndim else multipliers):
        if local:
            kept[id(weigher)] = None
        return None
    raw = None if method is None else method(columns, spec_obj)
    if raw is None:
        raw = _per_host(cands, lambda views: weigher.weigh_objects(
            [weights_base.WeighedHost(v) for v in views], spec_obj))
        return multipliers, _clamped(raw, weigher), False
    if np.ndim(raw) == 0:
        raw = float(raw)
        if local:
            kept[id(weigher)] = raw
        if math.isfinite(raw) and weigher.minval is None and \
                weigher.maxval is None:
            # The same raw weight everywhere normalises to 0.
            return None
        return multipliers, _clamped(_full(raw, len(cands)), weigher), False
    raw = _clamped(np.asarray(raw, float), weigher)
    if local:
        if not raw.flags.writeable:
            # A column of the snapshot, returned as is by the vector
            # form: the next instance writes into the kept weights.
            raw = raw.copy()
        kept[id(weigher)] = raw
    return multipliers, raw, local


def _clamped(raw: np.ndarray, weigher) -> np.ndarray:
    """``raw`` clamped to the weigher's ``minval``/``maxval``, as
    ``weights.clamp``."""
    if weigher.minval is None and weigher.maxval is None:
        return raw
    return np.clip(raw, -np.inf if weigher.minval is None
                   else weigher.minval,
                   np.inf if weigher.maxval is None else weigher.maxval)


def _row_local_for(plugin, spec_obj) -> bool:
    """Whether an in-tree filter or weigher stays row-local for this
    request (its ``_row_local_for(spec_obj)``, when it has one: a
    server group plugin is not for a request of its group, whose hosts
    change with every instance placed)."""
    check = getattr(plugin, '_row_local_for', None)
    return check is None or check(spec_obj)


def _weigh_again(cands: Candidates, spec_obj, weighers: list,
                 memo: '_Memo') -> 'Ranked | None':
    """The usual later instance, fast: the previous instance's hosts in
    its order, every weigher that counted row-local (``memo.terms``),
    and the claim changing one host.

    Each row-local weigher is asked about the changed host alone, by
    its per-host form, and its kept raw weights updated in place; the
    others are asked as usual and must still weigh every host alike.
    When no weigher's lowest or highest raw weight moved, every other
    host keeps its total: only this host's is computed
    (``_total_after``), and the previous ranking is reused with it
    moved (``_moved``).  None when anything else happened: the caller
    weighs every host from its columns.
    """
    positions = cands.changed().tolist()
    weighed = [weights_base.WeighedHost(v) for v in cands.changed_views()]
    #: id(weigher) -> the changed host's raw weight before.
    was: dict = {}
    columns = None
    for weigher in weighers:
        if id(weigher) not in memo.raw:
            if columns is None:
                columns = cands.columns()
            if _term(weigher, cands, columns, spec_obj, {}) is not None:
                return None
            continue
        raw = memo.raw[id(weigher)]
        if raw is None or not positions:
            continue
        value = float(weigher.weigh_objects(weighed, spec_obj)[0])
        if isinstance(raw, float):
            if value != raw:
                return None
            continue
        position = positions[0]
        was[id(weigher)] = raw[position]
        raw[position] = _clamped(np.array([value]), weigher)[0]
    previous = cands.previous[-1]
    if not positions:
        # The claimed host is not among these: nothing changed.
        ranked = Ranked(cands, previous, memo.raw, memo.terms)
        ranked._order = memo.order
        return ranked
    position = positions[0]
    total = _total_after(memo.terms, position, was)
    if total is None:
        return None
    totals = previous.copy()
    totals[position] = total
    ranked = Ranked(cands, totals, memo.raw, memo.terms)
    ranked._order = _moved(memo.order, position, cands.previous + [totals])
    return ranked


def _total_after(terms: list, position: int, was: dict) -> float | None:
    """The total of the host at ``position`` once its clamped raw
    weights in ``terms`` (``_summed``'s) changed from ``was`` (by
    ``id(weigher)``), when no weigher's lowest or highest raw weight
    moved, so that every other host keeps its total: by ``_summed``'s
    operations in its order (the same bits).  Else None."""
    total = 0.0
    for weigher, multipliers, raw, low, high in terms:
        value, before = raw[position], was[id(weigher)]
        if value != before:
            if value != value or before != before:
                return None
            if weigher.maxval is None and (value > high or (
                    before == high and raw.max() != before)):
                return None
            if weigher.minval is None and (value < low or (
                    before == low and raw.min() != before)):
                return None
        term = 0.0 if high == low else (value - low) / (high - low)
        if np.ndim(multipliers):
            multipliers = multipliers[position]
        total = total + multipliers * term
    return total


def _moved(order: np.ndarray | None, moved: int, keys: list) -> np.ndarray:
    """The first positions of the ranking by ``keys`` (``_order``'s
    ranking), from ``order``, the first positions of the ranking before
    only the host at ``moved`` changed its last key (the key before it
    is the previous ranking's last).

    Any two other hosts compare as they did (their last two keys are
    the one they were ranked by, twice), so ``order`` without the moved
    host is still the ranking's start, and the moved host is put back
    where its keys place it.  When it falls behind them all, where it
    goes among the hosts not sorted yet is unknown: it is left out.
    An empty answer (nothing known; a NaN weight) sorts from scratch.
    """
    if order is None:
        return np.zeros(0, np.int64)
    ranked = [position for position in order.tolist() if position != moved]
    for i, other in enumerate(ranked):
        for key in reversed(keys):
            mine, theirs = key[moved], key[other]
            if mine != theirs:
                break
        else:
            mine, theirs = -moved, -other
        if mine != mine or theirs != theirs:
            return np.zeros(0, np.int64)
        if mine > theirs:
            ranked.insert(i, moved)
            break
    return np.array(ranked, np.int64)


def _full(raw, n: int) -> np.ndarray:
    """Raw weights as an array of ``n`` floats (a scalar is everyone's)."""
    raw = np.asarray(raw, float)
    return np.full(n, float(raw)) if np.ndim(raw) == 0 else raw


def _per_host(cands: Candidates, ask) -> np.ndarray:
    """A per-host form's answers, ``ask(views)``, by the candidates'
    positions (asked over their views in the true order, as the per-host
    path asks it)."""
    order = _order(cands.previous, len(cands)) if cands.previous \
        else np.arange(len(cands))
    back = np.empty(len(order), np.int64)
    back[order] = np.arange(len(order))
    views = Columns(cands.snapshot, cands.rows[order]).views()
    return _full(ask(views), len(cands))[back]


def filter_and_weigh(cands: Candidates, spec_obj, index: int,
                     report: filters_base.FilterReport | None,
                     filters: list, weighers: list) -> 'Ranked':
    """One instance's filter walk and ranking, over columns."""
    ranked = weigh_candidates(
        filter_candidates(cands, spec_obj, filters, index, report),
        spec_obj, weighers)
    # Each later instance's ranking starts from this one's sorted
    # start, which may lose a host an instance (``_moved``).
    later = (spec_obj.obj_get('num_instances') or 1) - index - 1
    ranked.sorted_at_least += max(later, 0)
    return ranked


class Ranked:
    """The weighed candidates, best first, as a lazy sequence of
    ``WeighedHost``: only as many hosts as are read are sorted."""

    def __init__(self, cands: Candidates, weights: np.ndarray,
                 raw: dict | None = None, terms: list | None = None):
        self.cands = cands
        self.weights = weights
        #: The row-local weighers' raw weights (``_Memo.raw``).
        self.raw = raw or {}
        #: What the weights were summed from (``_Memo.terms``).
        self.terms = terms
        self._order = np.zeros(0, np.int64)
        self._items: list = []
        #: How many hosts to sort at least, once any is read: enough
        #: for a choice among ties and its alternates.
        self.sorted_at_least = 8

    def __len__(self) -> int:
        return len(self.cands)

    def _known(self, count: int) -> None:
        n = len(self.cands)
        count = min(n, count)
        if count <= len(self._order):
            return
        count = min(n, max(count, 2 * len(self._order),
                           self.sorted_at_least))
        keys = self.cands.previous + [self.weights]
        if count >= n // 2:
            self._order = _order(keys, n)
            return
        # Partial selection: every host in the best ``count`` weighs at
        # least the count-th weight; sort only those (ties included).
        threshold = -np.partition(-self.weights, count - 1)[count - 1]
        among = np.flatnonzero(self.weights >= threshold)
        self._order = _order(keys, n, among)[:count]

    def __getitem__(self, item):
        if isinstance(item, slice):
            start, stop, step = item.indices(len(self))
            if stop > len(self._items):
                self._item(stop - 1)
            return self._items[start:stop:step]
        if item < 0:
            item += len(self)
        if not 0 <= item < len(self):
            raise IndexError(item)
        return self._item(item)

    def _item(self, item: int):
        """The ``item``-th best host (``0 <= item < len(self)``), and
        every better one, as ``WeighedHost`` s."""
        self._known(item + 1)
        while len(self._items) <= item:
            pos = int(self._order[len(self._items)])
            self._items.append(weights_base.WeighedHost(
                self.cands.snapshot.views[int(self.cands.rows[pos])],
                float(self.weights[pos])))
        return self._items[item]

    def __iter__(self) -> typing.Iterator:
        items = self._items
        for i in range(len(self)):
            yield items[i] if i < len(items) else self._item(i)

    def after_claim(self, key, current) -> Candidates:
        """The next instance's candidates: these hosts, the claimed one
        (``key``) as ``current(view)`` gives it now."""
        snapshot = self.cands.snapshot
        row = snapshot.row_of(key)
        changed = None
        if row is not None and (self.cands.rows == row).any():
            view = snapshot.views[row]
            fresh = current(view)
            if fresh is not view:
                snapshot.put(row, fresh)
                changed = row
        memo = _Memo(changed, self.cands.checked, self.raw, self.terms,
                     self._order)
        cands = Candidates(snapshot, self.cands.rows,
                           self.cands.previous + [self.weights], memo)
        cands.same_as_memo = True
        return cands


def candidates(store: ColumnStore, spec_obj) -> Candidates | None:
    """Every host minus ``ignore_hosts``, as ``pipeline.candidates``;
    None when the request needs the per-host path (forced hosts, a
    requested destination)."""
    if (spec_obj.obj_get('force_hosts') or spec_obj.obj_get('force_nodes')
            or spec_obj.obj_get('requested_destination') is not None):
        return None
    snapshot = store.snapshot()
    cands = Candidates(snapshot, snapshot.ordered)
    ignored = {str(h).lower() for h in spec_obj.obj_get('ignore_hosts')
               or ()}
    if ignored:
        views = snapshot.views
        keep = [i for i, row in enumerate(cands.rows.tolist())
                if views[row].host.lower() not in ignored]
        cands = cands.take(np.array(keep, np.int64))
    return cands
