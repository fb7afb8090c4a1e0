"""Decisions kept from one request to the next one of the same shape.

A cloud asks for the same few flavors, images and zones over and over,
and between two such requests only a few hosts change: the previous
request's claim, a report or two.  Within one request the columnar path
(``scheduler.columns``) already keeps the answers of its row-local
filters and weighers from one instance to the next, and asks them again
only about the host the claim changed (``columns._Memo``).  This module
keeps the same answers from one request to the next request with the
same *fingerprint*: the request spec without its instance uuid.

What is kept (``_Entry``):

* the filter walk, as the position of the filter that removed each host
  (``rejected``, by row) and how many hosts each filter removed;
* the survivors, the row-local weighers' multipliers and raw weights,
  their stack and the start of the ranking (what ``columns._Memo``
  holds).

The next request with that fingerprint asks the filters again about
these hosts only:

* the rows the store wrote since (``ColumnStore.changed_rows``);
* the rows the previous request changed in its own snapshot (its later
  instances' planned claims);
* the hosts whose last report went stale since (liveness is the one
  input of a row-local filter that moves with time).

The weighers weigh again only the changed survivors.  The walk reported
(counts, log lines) and the ranking are those of a walk from scratch;
``tests/unit/test_repeats.py`` compares the two, request after request.

A request decides from scratch when:

* a filter that runs is not row-local (``BaseHostFilter.row_local``)
  and does not pass every host for the request (``SKIP``);
* the hosts' order changed (a node joined or left);
* more hosts changed than ``_AGAIN_MIN`` / ``_AGAIN_FRACTION`` allow;
* a changed host's multiplier differs from the kept one (an aggregate
  override that came or went).

A shape is kept from its second request on (a shape seen once may not
come back).  A reloaded configuration (``FilterScheduler.reset``)
forgets everything kept; ``[filter_scheduler] keep_decisions = false``
keeps nothing.  One request at a time uses an entry: it is taken at the
start of the request and put back at the end.
"""

import collections
import logging
import math

import numpy as np
from oslo_config import cfg
from oslo_log import log as oslo_logging
from oslo_versionedobjects import base as ovo_base

from scheduler import columns
from scheduler import concurrency
from scheduler import metrics
from scheduler.filters import base as filters_base
from scheduler.resources import liveness

CONF = cfg.CONF
LOG = oslo_logging.getLogger(__name__)

#: Fingerprints kept per worker (the least recently used is forgotten).
_ENTRIES = 8
#: Fingerprints remembered as seen, to keep a shape's second request.
_SEEN = 64
#: At most this many requests of a shape go unrecorded after its kept
#: decisions were of no use (``Repeats._to_record``).
_BACKOFF_MAX = 64
#: A request with more changed hosts than the larger of these (a count,
#: and 1/n of the hosts) decides from scratch: the walk over every host
#: costs less than asking about that many hosts one by one (measured at
#: 10,000 hosts: a kept decision with 20 changed hosts took longer than
#: one from scratch; a host costs the kept decision some 7 us, a
#: decision from scratch costs 0.3 ms at 10,000 hosts, 2.5 ms at
#: 100,000).
_AGAIN_MIN = 8
_AGAIN_FRACTION = 640


def fingerprint(spec_obj) -> str:
    """What a kept decision is looked up by: every field the request
    spec (and each object in it) has set, but its instance uuid.

    A field unset and the same field set to None read alike
    (``obj_get``; the pipeline sets some, ``image``, as it goes).
    Values are written as ``repr`` writes them: a value of a type
    without a ``repr`` of its own never matches another request's, and
    keys of nested dicts (extra specs, image properties, hints) in the
    caller's order: the same request written otherwise is another
    fingerprint, decided afresh.
    """
    return repr(_shape(spec_obj, 'instance_uuid'))


def _shape(value, skip: str | None = None):
    """``value`` as nested tuples of plain values (``fingerprint``)."""
    if isinstance(value, ovo_base.VersionedObject):
        stored = value.__dict__
        parts = [value.obj_name(), value.VERSION]
        for name in value.fields:
            field = stored.get('_obj_' + name)
            if field is not None and name != skip:
                parts.append((name, _shape(field)))
        return tuple(parts)
    if isinstance(value, (list, tuple)):
        return tuple(_shape(item) for item in value)
    if isinstance(value, dict):
        return tuple((key, _shape(item)) for key, item in value.items())
    if isinstance(value, (set, frozenset)):
        return ('set', tuple(sorted(repr(item) for item in value)))
    return value


class _Entry:
    """One fingerprint's decision, as its last request left it."""

    def __init__(self, repeat: 'Repeat', ranked: 'columns.Ranked',
                 single: bool):
        snapshot = repeat.snapshot
        previous = repeat.entry
        #: The lists the request used: another list (a reload) is
        #: another pipeline.
        self.filters = repeat.filters
        self.weighers = repeat.weighers
        #: The hosts' order it was decided over.
        self.ordered = snapshot.ordered
        #: The store's ``log_position`` it saw.
        self.log_position = snapshot.log_position
        #: Rows its snapshot changed on its own (planned claims).
        self.dirty = set(snapshot.put_rows())
        #: ``liveness.cutoff()`` it was decided at (or before), and the
        #: oldest report no older than that: until the cutoff passes
        #: it, no host went stale.
        self.cutoff = repeat.cutoff
        self.next_expiry = repeat.next_expiry
        #: By row: the position (among the filters that ran) of the
        #: filter that removed the host; the number of filters for a
        #: survivor.
        self.rejected = repeat.rejected
        #: Hosts each filter removed, then the survivors (a list).
        self.counts = repeat.counts
        #: The store's count of aggregate changes it saw.
        self.aggregate_changes = snapshot.aggregate_changes
        #: What the ``RequestScopedFilter`` s prepared, by ``id``.
        self.prepared = previous.prepared if previous is not None else {}
        #: ``columns.Candidates.checked`` of the survivors: every filter.
        self.checked = frozenset(id(flt) for flt in repeat.ran)
        self.survivors = ranked.cands.rows
        if previous is not None and previous.survivors is self.survivors:
            self.position = previous.position
        else:
            #: By row: the position among the survivors, -1 elsewhere.
            self.position = np.full(len(self.rejected), -1, np.int64)
            self.position[self.survivors] = np.arange(len(self.survivors))
        #: ``columns._Memo.raw``: id(weigher) -> (multipliers, raw).
        self.raw = {key: (_owned(mult), _owned(raw))
                    for key, (mult, raw) in ranked.raw.items()}
        self.stack = ranked.stack
        #: The ranking's sorted start, when the ranking was by these
        #: weights alone (one instance: no earlier weights break ties).
        self.order = ranked._order if single else None


def _owned(value):
    """``value``, copied if it is an array this process may write to
    elsewhere (a column of the store, read-only here)."""
    if isinstance(value, np.ndarray) and not value.flags.writeable:
        return value.copy()
    return value


class Repeats:
    """The decisions kept by one worker, by fingerprint."""

    def __init__(self):
        self._lock = concurrency.native_lock()
        self._entries: collections.OrderedDict = collections.OrderedDict()
        #: Fingerprints of the last requests (``_SEEN``): a decision is
        #: kept from the second request of a shape on.
        self._seen: collections.OrderedDict = collections.OrderedDict()
        #: ``(filters, ran, unsure)`` of ``_pipeline``.
        self._filters: tuple | None = None

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        """Forget every decision (the configuration changed)."""
        with self._lock:
            self._entries.clear()
            self._seen.clear()

    def begin(self, cands: 'columns.Candidates', spec_obj, filters: list,
              weighers: list) -> 'Repeat | None':
        """A request's use of the kept decisions, or None when its
        decision is not one to keep (a rebuild, ignored hosts, a filter
        without a row-local vector form)."""
        if not CONF.filter_scheduler.keep_decisions:
            if self._entries:
                self.clear()
            return None
        snapshot = cands.snapshot
        if cands.rows is not snapshot.ordered or cands.memo is not None:
            return None
        if filters_base.request_is_rebuild(spec_obj):
            return None
        ran, unsure = self._pipeline(filters)
        if not all(columns.filter_skips(flt, spec_obj) for flt in unsure):
            return None
        key = fingerprint(spec_obj)
        with self._lock:
            entry = self._entries.pop(key, None)
            if entry is None and not self._to_record(key):
                return None
        return Repeat(self, key, entry, ran, filters, weighers)

    def _pipeline(self, filters: list) -> tuple:
        """``(the filters that run for a first instance, those of them
        that are not row-local: a request is kept only if they pass
        every host for it)``, once per list."""
        known = self._filters
        if known is None or known[0] is not filters:
            ran = [flt for flt in filters if flt.run_filter_for_index(0)]
            unsure = [flt for flt in ran
                      if not columns.filter_is_row_local(flt)]
            known = self._filters = (filters, ran, unsure)
        return known[1], known[2]

    def _to_record(self, key: str) -> bool:
        """Whether to record the walk of a request of shape ``key``
        that has no kept decision.

        Not the first of its shape: a shape seen once may not come
        back, and recording costs (about 0.1 ms at 10,000 hosts).  Nor
        while the shape's kept decisions were of no use lately (too
        many hosts changed between two of its requests): after each
        such miss, 2, 4, 8... up to ``_BACKOFF_MAX`` requests of the
        shape are decided without recording.
        """
        seen = self._seen
        state = seen.get(key)
        if state is None:
            seen[key] = [0, 0]
            if len(seen) > _SEEN:
                seen.popitem(last=False)
            return False
        seen.move_to_end(key)
        if state[1]:
            state[1] -= 1
            return False
        return True

    def _missed(self, key: str) -> None:
        """A kept decision of shape ``key`` was of no use."""
        metrics.record_kept_decision('missed')
        with self._lock:
            state = self._seen.setdefault(key, [0, 0])
            state[0] += 1
            state[1] = min(2 ** state[0], _BACKOFF_MAX)

    def _hit(self, key: str) -> None:
        """A kept decision of shape ``key`` was used."""
        metrics.record_kept_decision('used')
        state = self._seen.get(key)
        if state is not None and state[0]:
            with self._lock:
                state[0] = state[1] = 0

    def _keep(self, key: str, entry: _Entry) -> None:
        with self._lock:
            self._entries[key] = entry
            while len(self._entries) > _ENTRIES:
                self._entries.popitem(last=False)


class Repeat:
    """One request's first instance, decided again from a kept decision
    where there is one, and kept for the next request."""

    def __init__(self, owner: Repeats, key: str, entry: _Entry | None,
                 ran: list, filters: list, weighers: list):
        self._owner = owner
        self._key = key
        self.entry = entry
        self.ran = ran
        self.filters = filters
        self.weighers = weighers
        self.snapshot = None
        self.cutoff = self.next_expiry = None
        self.rejected = self.counts = None
        #: Hosts a kept decision looked at again.
        self.changed = 0

    def filter_and_weigh(self, cands: 'columns.Candidates', spec_obj,
                         report: filters_base.FilterReport | None,
                         later: int) -> 'columns.Ranked':
        """``columns.filter_and_weigh`` for the first instance."""
        self.snapshot = cands.snapshot
        if self.entry is None:
            ranked = self._afresh(cands, spec_obj, report)
        else:
            ranked = self._again(cands.snapshot, spec_obj, report)
            if ranked is not None:
                self._owner._hit(self._key)
                LOG.debug('Decided from the kept decision of the request\'s '
                          'shape, its filters and weighers asked again about '
                          '%d changed host(s)', self.changed)
            else:
                LOG.debug('The kept decision of the request\'s shape is of '
                          'no use (a node joined or left, more hosts '
                          'changed than it looks at again, or a multiplier '
                          'override changed): deciding from scratch')
                # Decided from scratch, not recorded: the next requests
                # of the shape are likely to find as many changes.
                self.entry = None
                self._owner._missed(self._key)
                ranked = columns.weigh_candidates(
                    columns.filter_candidates(cands, spec_obj, self.ran, 0,
                                              report),
                    spec_obj, self.weighers, later > 0)
        ranked.sorted_at_least += later
        return ranked

    def keep(self, ranked, instances: int) -> None:
        """Keep the request's decision, as its last instance (``ranked``)
        left it, for the next request: only when that instance ranked
        the first one's survivors."""
        if self.rejected is None or not isinstance(ranked, columns.Ranked):
            return
        if ranked.cands.rows is not self.survivors:
            return
        self._owner._keep(self._key, _Entry(self, ranked, instances == 1))

    def _afresh(self, cands, spec_obj, report) -> 'columns.Ranked':
        """The walk over every host, recorded."""
        metrics.record_kept_decision('recorded')
        snapshot = cands.snapshot
        cutoff = liveness.cutoff()
        rejected = np.full(len(snapshot.views), len(self.ran), np.int16)
        passed = columns.filter_candidates(cands, spec_obj, self.ran, 0,
                                           report, rejected)
        ranked = columns.weigh_candidates(passed, spec_obj, self.weighers,
                                          True)
        ordered = snapshot.ordered
        self.rejected = rejected
        self.counts = np.bincount(rejected[ordered],
                                  minlength=len(self.ran) + 1).tolist()
        self.cutoff = cutoff
        self.next_expiry = _oldest_live(
            snapshot.column('received_at')[ordered], cutoff)
        self.survivors = passed.rows
        return ranked

    def _again(self, snapshot, spec_obj, report) -> 'columns.Ranked | None':
        """The kept decision brought up to ``snapshot``; None (nothing
        changed yet) when it cannot be."""
        entry = self.entry
        if entry.ordered is not snapshot.ordered or \
                entry.filters is not self.filters or \
                entry.weighers is not self.weighers:
            return None
        logged = snapshot.store.changed_rows(entry.log_position,
                                             snapshot.log_position)
        cutoff = liveness.cutoff()
        if logged is None or cutoff < entry.cutoff:
            return None
        rows = set(logged)
        rows.update(entry.dirty)
        next_expiry = entry.next_expiry
        ordered = snapshot.ordered
        if cutoff > next_expiry:
            received = snapshot.column('received_at')[ordered]
            rows.update(ordered[(received >= entry.cutoff) &
                                (received < cutoff)].tolist())
            next_expiry = _oldest_live(received, cutoff)
        if len(rows) > max(_AGAIN_MIN, len(ordered) // _AGAIN_FRACTION):
            return None
        changed = sorted(rows)
        self.changed = len(changed)
        everyone = len(self.ran)
        # A few rows: plain lists, not arrays (a microsecond an
        # operation on arrays, a tenth of that on lists).
        new = first_rejections(snapshot, np.array(changed, np.int64),
                               spec_obj, self.ran, entry.prepared).tolist()
        rejected = entry.rejected
        old = [int(rejected[row]) for row in changed]
        staying = np.array([row for row, now, then in zip(changed, new, old)
                            if now == then == everyone], np.int64)
        if not _multipliers_hold(entry, snapshot, staying):
            return None
        # From here on the entry is this request's: nothing returns None.
        counts = entry.counts
        received = snapshot.column('received_at')
        entering, leaving = False, []
        for row, now, then in zip(changed, new, old):
            if now != then:
                counts[then] -= 1
                counts[now] += 1
                rejected[row] = now
                if now == everyone:
                    entering = True
                elif then == everyone:
                    leaving.append(row)
            if cutoff <= received[row] < next_expiry:
                next_expiry = float(received[row])
        self.rejected, self.counts = rejected, counts
        self.cutoff, self.next_expiry = cutoff, next_expiry
        checked = entry.checked
        if entering:
            # A host passes that did not: ranked from scratch, in order.
            survivors = ordered[rejected[ordered] == everyone]
            passed = columns.Candidates(snapshot, survivors,
                                        checked=checked)
        else:
            passed = _kept_candidates(entry, snapshot, staying, checked)
            if leaving:
                keep = np.ones(len(passed), bool)
                keep[entry.position[leaving]] = False
                passed = passed.take(np.flatnonzero(keep))
        _report(report, self.ran, entry.counts, len(ordered), spec_obj)
        self.survivors = passed.rows
        return columns.weigh_candidates(passed, spec_obj, self.weighers,
                                        True)


def _kept_candidates(entry: _Entry, snapshot, staying: np.ndarray,
                     checked: frozenset) -> 'columns.Candidates':
    """The kept survivors as the next instance of a request sees them:
    every row-local answer kept but the changed hosts'."""
    memo = columns._Memo(staying, checked, entry.raw, entry.stack,
                         entry.order)
    cands = columns.Candidates(snapshot, entry.survivors, None, memo,
                               np.arange(len(entry.survivors)), checked)
    cands.same_as_memo = True
    cands._changed = entry.position[staying]
    return cands


def first_rejections(snapshot, rows: np.ndarray, spec_obj, filters: list,
                     prepared: dict | None = None) -> np.ndarray:
    """For each of ``rows``: the position in ``filters`` of the first
    that removes it (``len(filters)`` when every one passes it), as a
    walk over those hosts alone finds it.  ``prepared``: what each
    ``RequestScopedFilter`` prepared from a request of this fingerprint
    (by ``id``), filled as asked."""
    result = np.full(len(rows), len(filters), np.int16)
    if len(rows) > columns._PER_HOST_MAX:
        alive = np.arange(len(rows))
        for position, flt in enumerate(filters):
            if not len(alive):
                break
            mask = columns.filter_mask(
                flt, columns.Candidates(snapshot, rows[alive]), spec_obj)
            result[alive[~mask]] = position
            alive = alive[mask]
        return result
    # A few hosts: asked by the per-host form (which the vector form
    # stands for), cheaper than gathering their columns.
    prepared = {} if prepared is None else prepared
    views = [snapshot.views[row] for row in rows.tolist()]
    alive = list(range(len(rows)))
    for position, flt in enumerate(filters):
        if not alive:
            break
        if type(flt).filter_all is filters_base.RequestScopedFilter.filter_all:
            ready = prepared.get(id(flt), prepared)
            if ready is prepared:
                ready = prepared[id(flt)] = flt.prepare(spec_obj)
            if ready is filters_base.SKIP:
                continue
            passes = flt.passes
            kept = [i for i in alive if passes(views[i], ready)]
        else:
            mask = columns.per_host_mask(flt, [views[i] for i in alive],
                                         spec_obj)
            kept = [i for i, passes in zip(alive, mask) if passes]
        if len(kept) < len(alive):
            for i in set(alive).difference(kept):
                result[i] = position
            alive = kept
    return result


def _multipliers_hold(entry: _Entry, snapshot, rows: np.ndarray) -> bool:
    """Whether each kept multiplier still holds for the changed
    survivors ``rows``: multipliers come from the configuration (a
    reload forgets every kept decision) and the host's aggregates, so
    only a host whose aggregates may have changed is asked again."""
    store = snapshot.store
    for row, position in zip(rows.tolist(), entry.position[rows].tolist()):
        if not store.aggregates_changed(row, entry.aggregate_changes):
            continue
        view = snapshot.views[row]
        for weigher in entry.weighers:
            kept = entry.raw.get(id(weigher))
            if kept is None:
                continue
            multipliers = kept[0]
            then = multipliers if np.ndim(multipliers) == 0 \
                else multipliers[position]
            if weigher.weight_multipliers([view])[0] != then:
                return False
    return True


def _oldest_live(received: np.ndarray, cutoff: float) -> float:
    """The oldest report among ``received`` not stale at ``cutoff``."""
    live = received[received >= cutoff]
    return float(live.min()) if len(live) else math.inf


def _report(report, filters: list, counts: np.ndarray, hosts: int,
            spec_obj) -> None:
    """The filter walk's bookkeeping from kept counts: the steps and
    log lines a walk from scratch records."""
    debug = filters_base.LOG.isEnabledFor(logging.DEBUG)
    before = hosts
    for position, flt in enumerate(filters):
        name = flt.name()
        after = before - int(counts[position])
        if debug:
            filters_base.LOG.debug('Starting with %d host(s) for %s',
                                   before, name)
            filters_base.LOG.debug('Filter %s returned %d host(s)', name,
                                   after)
        if not filters_base.record_step(report, name, before, after,
                                        spec_obj):
            break
        before = after
