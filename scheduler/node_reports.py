"""Each node's last report, and how far the stored reports were read.

``NodeReports`` and ``ReportMarks`` share the host manager's lock and
are called with it held; a report view is replaced, never changed in
place.
"""

import typing

from oslo_log import log as logging

from scheduler import host_view
from scheduler import objects
from scheduler.resources import liveness
from scheduler import usage_cache

LOG = logging.getLogger(__name__)


class NodeReports:
    """The last report of each node (a ``HostView`` without claims, its
    host's aggregates attached), each host's nodes, and the nodes that
    stopped reporting."""

    def __init__(self):
        #: key -> the node's last report view.
        self._by_key: dict = {}
        #: host -> its nodes' keys, sorted (a tuple: most hosts have
        #: one node, and one is held per host of the fleet, so the
        #: smallest container that holds it).
        self._nodes_of: dict = {}
        #: Keys of the nodes that stopped reporting.
        self._down: set = set()

    def get(self, key):
        return self._by_key.get(key)

    def items(self) -> typing.ItemsView:
        return self._by_key.items()

    def put(self, key, view) -> None:
        self._by_key[key] = view
        nodes = self._nodes_of.get(key[0], ())
        if key not in nodes:
            self._nodes_of[key[0]] = tuple(sorted(nodes + (key,)))

    def forget(self, key) -> None:
        self._by_key.pop(key, None)
        self._down.discard(key)
        nodes = tuple(k for k in self._nodes_of.get(key[0], ()) if k != key)
        if nodes:
            self._nodes_of[key[0]] = nodes
        else:
            self._nodes_of.pop(key[0], None)

    def nodes_of(self, host: str) -> list:
        return list(self._nodes_of.get(host, ()))

    def is_down(self, key) -> bool:
        return key in self._down

    def down(self) -> list:
        return sorted(self._down)

    def back(self, key) -> bool:
        """Node ``key`` reports again: whether it was down."""
        was = key in self._down
        self._down.discard(key)
        return was

    def older_than(self, when: float) -> list:
        """The keys of the nodes whose last report here was received
        before ``when`` (down ones included)."""
        return [key for key, view in self._by_key.items()
                if view.received_at < when]

    def mark_down(self, now: float) -> list:
        """Mark down the nodes whose last report is older than the
        cut-off; return ``[(key, seconds since its report)]`` of those
        newly down."""
        cutoff = liveness.cutoff(now)
        newly = [(key, view.seconds_since_report(now))
                 for key, view in self._by_key.items()
                 if view.received_at < cutoff and key not in self._down]
        self._down.update(key for key, _age in newly)
        return newly


class ReportMarks:
    """How far this worker has read the changed reports stored in the
    inventory, and which stored report each node's report here is."""

    def __init__(self):
        #: The highest ``changed_seq`` up to which every changed report
        #: was read (``refresh_changed_reports``).
        self.changed = 0
        #: key -> the ``changed_seq`` of the stored report this worker's
        #: report of the node is (or is newer than).
        self._held: dict = {}

    def holds(self, key, changed_seq: int) -> None:
        """This worker holds node ``key``'s stored report of
        ``changed_seq`` (or a newer one)."""
        if self._held.get(key, -1) < changed_seq:
            self._held[key] = changed_seq

    def is_new(self, key, changed_seq: int) -> bool:
        """Whether the stored report of ``changed_seq`` is newer than
        the one held of node ``key``."""
        return changed_seq > self._held.get(key, -1)

    def written(self, keys: list, seq, changed: bool) -> None:
        """This worker stored nodes ``keys``' reports (``changed``), or
        only their times, at ``seq``: a changed one is not to be read
        back."""
        if not isinstance(seq, int):
            return
        if changed:
            for key in keys:
                self.holds(key, seq)

    def changed_read(self, rows: list) -> list:
        """The keys of changed report ``rows`` (in ``changed_seq``
        order) newer than those held; moves the mark past them."""
        keys = [(row['host'], row['nodename']) for row in rows
                if self.is_new((row['host'], row['nodename']),
                               row['changed_seq'])]
        self.changed = max(self.changed, rows[-1]['changed_seq'])
        return keys

    def all_read(self, seq: int) -> None:
        """Every stored report up to ``seq`` was read (a load): every
        change up to it is known (rows become visible in sequence
        order)."""
        self.changed = max(self.changed, seq)


def stored_view(row: dict) -> host_view.HostView | None:
    """The view of a report row of the inventory; None (logged) when
    the saved report cannot be read."""
    try:
        state = objects.HostState.obj_from_primitive(row['report'])
    except Exception as e:
        LOG.warning('Ignoring unreadable saved report of %s/%s: %s',
                    row['host'], row['nodename'], e)
        return None
    updated = row.get('updated_at')
    view = host_view.HostView(
        state, usage_cache.timestamp(updated) if updated else None)
    view.disabled = bool(row.get('disabled', view.disabled))
    return view


def newer_report(held, stored) -> bool:
    """Whether the report view ``held`` was produced after ``stored``
    (by the computes' own clock: the time each report carries)."""
    mine, theirs = held.updated_at, stored.updated_at
    if mine is None or theirs is None:
        return False
    return usage_cache.timestamp(mine) > usage_cache.timestamp(theirs)
