"""The aggregates one scheduler worker knows, and each host's share.

``HostAggregates`` owns the aggregates (read from the inventory, or
sent by another service), the index of each host's aggregates, and
whether they must be read again.  It shares the host manager's lock:
when the aggregates of some hosts change it tells the manager
(``hosts_changed``, called with the lock held), which re-attaches those
hosts' views.
"""

import typing

from scheduler import exception
from scheduler import objects


class HostAggregates:
    """Aggregates and the hosts' index of them, for one worker."""

    def __init__(self, lock, inventory: typing.Callable,
                 hosts_changed: typing.Callable[[set], None]):
        #: The host manager's lock (views and aggregates change together).
        self._lock = lock
        #: Returns the inventory (``scheduler.db.api``), looked up late.
        self._inventory = inventory
        #: Re-attaches the views of these hosts (called under the lock).
        self._hosts_changed = hosts_changed
        self._aggregates: list = []
        #: host -> its aggregates, in the order of ``_aggregates``.
        self._by_host: dict = {}
        #: The inventory's stamp of the aggregates last read (None: read
        #: them again).
        self.stamp: tuple | None = None
        #: Changes made to ``_aggregates`` (a read that began before the
        #: last one is stale).
        self._version = 0
        #: Writes of aggregates in flight (``_writing``).
        self._writes = 0

    def __len__(self) -> int:
        return len(self._aggregates)

    def all(self) -> list:
        return list(self._aggregates)

    def attach(self, view, like=None) -> None:
        """Attach the aggregates of ``view``'s host to ``view`` (a
        report view no request can see yet).  Called with the lock
        held."""
        view.set_aggregates(self._by_host.get(view.host, []), like=like)

    def refresh(self) -> None:
        """Re-read aggregates from the inventory (other workers change them).

        Host views are re-attached only when something changed (the
        expensive part).  Nothing is read while this worker writes
        aggregates it was sent: memory is ahead of the inventory then, and
        a read mid-write would put the old aggregates back until the next.
        """
        with self._lock:
            if self._writes:
                return
            version = self._version
        db = self._inventory()
        stamp = db.aggregates_stamp()
        if stamp == self.stamp:
            return
        # Every aggregate's hosts, one string per host of a large fleet:
        # under eventlet the database driver yields while it waits.
        rows = db.aggregate_get_all()
        with self._lock:
            known = self._known()
            if self._set([_known_or_new(known, row) for row in rows],
                         version=version):
                self.stamp = stamp

    def update(self, aggregates: list) -> None:
        """Aggregates another service changed: apply, then save.

        Applied in memory first, so this worker schedules with them even
        if saving fails (every worker gets the same cast and saves the
        same rows; the inventory ends up right either way).
        """
        changed = {agg.name: agg for agg in aggregates}
        uuids = {agg.obj_get('uuid') for agg in aggregates} - {None}
        with self._lock:
            kept = [a for a in self._aggregates
                    if a.name not in changed and a.uuid not in uuids]
            self._set(kept + list(aggregates))
        # Writing a large zone takes long enough that a loop held
        # meanwhile would stop answering the broker's heartbeats: under
        # eventlet the database drivers yield while they wait (never a
        # native thread: ``concurrency.run_native``).
        self._writing(self._save, aggregates)

    def delete(self, aggregate) -> None:
        with self._lock:
            self._set([a for a in self._aggregates
                       if a.name != aggregate.name])
        try:
            self._writing(self._inventory().aggregate_delete,
                          aggregate.obj_get('uuid') or aggregate.name)
        except exception.AggregateNotFound:
            pass

    def _writing(self, write, *args) -> None:
        """Run ``write`` (of aggregates already changed in memory) with
        ``refresh`` held off meanwhile."""
        with self._lock:
            self._writes += 1
        try:
            write(*args)
        finally:
            with self._lock:
                self._writes -= 1
                # Read them back once written: another worker may have
                # written others meanwhile.
                self.stamp = None

    def _save(self, aggregates: list) -> None:
        db = self._inventory()
        for agg in aggregates:
            db.aggregate_upsert({
                'uuid': agg.obj_get('uuid'), 'name': agg.name,
                'hosts': list(agg.obj_get('hosts') or []),
                'metadata': dict(agg.obj_get('metadata') or {})})

    def _known(self) -> dict:
        """('uuid', uuid) and ('name', name) -> the aggregate known by it."""
        known = {}
        for agg in self._aggregates:
            known[('uuid', agg.obj_get('uuid'))] = agg
            known[('name', agg.name)] = agg
        return known

    def _set(self, aggregates: list, version: int | None = None) -> bool:
        """Make ``aggregates`` the aggregates; have the hosts whose
        aggregates changed, and only those, re-attached.  Called with
        the lock held.

        An aggregate equal to one already known (same uuid or name,
        hosts and metadata) keeps the known object, so re-reading every
        aggregate from the inventory changes no view; a change costs in
        proportion to the hosts of the aggregates that changed.
        ``version``: the aggregates' version they were read at; they are
        stale, and nothing is changed (False), when another change came
        since.
        """
        if version is not None and version != self._version:
            return False
        self._version += 1
        known = self._known()
        aggregates = [_same_or_new(known, agg) for agg in aggregates]
        new_ids = {id(agg) for agg in aggregates}
        old_ids = {id(agg) for agg in self._aggregates}
        removed = [a for a in self._aggregates if id(a) not in new_ids]
        added = [a for a in aggregates if id(a) not in old_ids]
        position = {id(agg): i for i, agg in enumerate(aggregates)}
        added_to: dict = {}
        for agg in added:
            for host in agg.hosts:
                added_to.setdefault(host, []).append(agg)
        affected = set(added_to)
        for agg in removed:
            affected.update(agg.hosts)
        by_host = self._by_host
        self.stamp = None
        self._aggregates = aggregates
        for host in affected:
            now = sorted([a for a in by_host.get(host, ())
                          if id(a) in new_ids] + added_to.get(host, []),
                         key=lambda a: position[id(a)])
            if now:
                by_host[host] = now
            else:
                by_host.pop(host, None)
        self._hosts_changed(affected)
        return True


def _same_or_new(known: dict, agg):
    """The known aggregate ``agg`` equals, or ``agg`` itself."""
    if known.get(('name', agg.name)) is agg:
        return agg
    old = _known_equal(known, agg.name, agg.obj_get('uuid'), agg.hosts,
                       agg.metadata)
    return agg if old is None else old


def _known_or_new(known: dict, row: dict):
    """The known aggregate inventory ``row`` describes, else a new one
    (no versioned object is made for an aggregate that did not change)."""
    old = _known_equal(known, row['name'], row.get('uuid'), row['hosts'],
                       row['metadata'])
    return objects.Aggregate.from_row(row) if old is None else old


def _known_equal(known: dict, name: str, uuid: str | None, hosts,
                 metadata):
    """The known aggregate with this uuid (else name) if it has this
    name, uuid, hosts (in any order) and metadata."""
    old = known.get(('uuid', uuid)) if uuid else None
    if old is None:
        old = known.get(('name', name))
    if (old is not None and old.name == name
            and old.obj_get('uuid') == uuid
            and len(old.hosts) == len(hosts)
            and set(old.hosts) == set(hosts)
            and dict(old.metadata) == dict(metadata)):
        return old
    return None
