"""HostView: the scheduler's working copy of one compute node.

Filters and weighers read thousands of hosts per request, so they must
not pay the versioned-object machinery on every attribute read.  A
HostView has a ``objects.HostState`` report's fields as plain
attributes, plus what only the scheduler knows (aggregates, when the
report arrived) and the claims it made since.  Both share their
resource arithmetic (``HostResources``), so a filter works on either.
"""

import copy
import functools
import itertools
import weakref

from oslo_versionedobjects import base as ovo_base
from oslo_versionedobjects import fields as ovo_fields

from scheduler.objects import host_state as host_state_obj
from scheduler.resources import aggregates as aggregates_res
from scheduler.resources import liveness

#: Fields whose values are mutable containers, copied per view (as
#: plain lists and dicts).
_CONTAINERS = ('cpu_info', 'supported_instances', 'instance_uuids',
               'metrics', 'pci_pools', 'stats',
               'instance_image_properties')


def _plain(value):
    """``value`` with its lists and dicts as plain ones, recursively.

    A versioned object's list and dict fields are coerced containers
    that point back to the object (for change tracking): a view that
    kept one would keep the whole wire object alive.
    """
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value


#: Plain containers of reports -> the one object views with an equal
#: container share (nodes of one hardware model report the same CPU
#: description and instance types, and most nodes an empty list or
#: dict for the rest).  Safe because a view's containers are replaced,
#: never changed in place (see ``HostView.copy``).  Emptied when full:
#: values unique to a node (metrics, stats) come and go.
_CONTAINERS_SEEN: dict = {}
_CONTAINERS_SEEN_MAX = 4096

#: Containers shared only when empty: their values are a node's own
#: (instance uuids, PCI pools as objects that are not hashable).
_SHARED_WHEN_EMPTY = ('instance_uuids', 'pci_pools')


def _shared_container(name: str, value):
    """``value`` (a report's container field ``name``, plain) as the
    container already kept for an equal one, else itself, kept."""
    if isinstance(value, dict):
        key = (name, tuple(value.items()))
    elif name in _SHARED_WHEN_EMPTY and value:
        return value
    else:
        key = (name, tuple(tuple(item) if isinstance(item, list) else item
                           for item in value))
    try:
        found = _CONTAINERS_SEEN.get(key)
    except TypeError:
        # A value that cannot be a key (a plugin's own report field
        # holding a list, say): kept as it is.
        return value
    if found is None:
        if len(_CONTAINERS_SEEN) >= _CONTAINERS_SEEN_MAX:
            _CONTAINERS_SEEN.clear()
        _CONTAINERS_SEEN[key] = found = value
    return found


def _equal(mine, theirs) -> bool:
    """Equality of a view's plain values and a report's: containers item
    by item, versioned objects (NUMA cells, PCI pools) field by field,
    a field the report left unset counting as its default (the view's
    copy has the defaults set)."""
    if isinstance(mine, ovo_base.VersionedObject) or isinstance(
            theirs, ovo_base.VersionedObject):
        if type(mine) is not type(theirs):
            return False
        for name, field in mine.fields.items():
            values = []
            for obj in (mine, theirs):
                if obj.obj_attr_is_set(name):
                    values.append(getattr(obj, name))
                elif field.default is not ovo_fields.UnspecifiedDefault:
                    values.append(field.default)
                else:
                    values.append(_UNSET)
            if not _equal(*values):
                return False
        return True
    if isinstance(mine, (list, tuple)) and isinstance(theirs, (list, tuple)):
        return len(mine) == len(theirs) and all(
            _equal(a, b) for a, b in zip(mine, theirs))
    if isinstance(mine, dict) and isinstance(theirs, dict):
        return mine.keys() == theirs.keys() and all(
            _equal(value, theirs[key]) for key, value in mine.items())
    return mine == theirs


_UNSET = object()


def _frozen(value):
    """``value`` as a hashable key: a versioned object as its fields'
    values (an unset field as its default), sets and lists as tuples."""
    if isinstance(value, ovo_base.VersionedObject):
        return (type(value).__name__,) + tuple(
            _frozen(_value_or_default(value, name))
            for name in sorted(value.fields))
    if isinstance(value, (set, frozenset)):
        return tuple(sorted(value))
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(item) for item in value)
    if isinstance(value, dict):
        return tuple(sorted((key, _frozen(item))
                            for key, item in value.items()))
    return value


def _value_or_default(obj, name: str):
    if obj.obj_attr_is_set(name):
        return getattr(obj, name)
    default = obj.fields[name].default
    return None if default is ovo_fields.UnspecifiedDefault else default


#: A NUMA topology's value -> the one object views with that value
#: share (nodes of one hardware model report the same one).  Safe: no
#: view changes its topology once made; claims are laid over a copy
#: with cloned cells (``HostView.copy``).
_TOPOLOGIES: 'weakref.WeakValueDictionary' = weakref.WeakValueDictionary()


def _shared_topology(topology):
    """The view's NUMA topology for a report's ``topology``: the one
    already kept for this value, else a clone (detached from the wire
    object, usage a compute left out set to none)."""
    key = _frozen(topology)
    found = _TOPOLOGIES.get(key)
    if found is None:
        found = topology.obj_clone()
        for cell in found.cells:
            cell.obj_set_defaults()
        _TOPOLOGIES[key] = found
    return found


#: What a view holds besides the report's fields.
_OWN = ('received_at', 'aggregates', 'availability_zones', 'aggregate_keys',
        'aggregate_set', '_metadata', '_ratios', '_reported', '_digest')
_SLOTS = tuple(host_state_obj.HostState.fields) + _OWN


def _slot_copier():
    """A function copying every slot of one view onto another, one
    assignment per slot, generated once (claims copy a view per
    instance placed, and a ``getattr``/``setattr`` loop would look up
    every name on every copy)."""
    lines = ['def copy_slots(source, target):']
    lines += ['    target.%s = source.%s' % (name, name) for name in _SLOTS]
    namespace: dict = {}
    exec('\n'.join(lines), namespace)
    return namespace['copy_slots']


_copy_slots = _slot_copier()


def _derived(aggregates: list, own_ratios: tuple) -> tuple:
    """What a view keeps of its aggregates: the list, its zones, the
    values of each metadata key, the keys, the allocation ratios (the
    aggregates' overrides, else the node's own) and a new number."""
    metadata: dict = {}
    for agg in aggregates:
        for key, value in agg.metadata.items():
            metadata.setdefault(key, []).append(value)
    overrides = aggregates_res.ratio_overrides(aggregates)
    ratios = {resource: overrides.get(resource, own)
              for resource, own in zip(host_state_obj.RESOURCES,
                                       own_ratios)}
    return (aggregates, frozenset(aggregates_res.zones_of(aggregates)),
            metadata, frozenset(metadata), ratios, next(_AGGREGATE_SETS))


#: Numbers of the attached sets of aggregates (``HostView.aggregate_set``):
#: views that share what ``_derived`` made share its number, so a filter
#: that reads only aggregates judges each number once.  A number, not
#: the list itself, is what the column store interns: it keeps no
#: aggregate alive once no view holds it.
_AGGREGATE_SETS = itertools.count()


#: (ids of the aggregates, the node's own allocation ratios) -> what
#: ``_derived`` made of them, shared by every view with both.  Never
#: changed once made; emptied when full (aggregate changes leave old
#: entries behind).
_ATTACHED: dict = {}
_ATTACHED_MAX = 4096


@functools.cache
def _blank_report() -> host_state_obj.HostState:
    """An empty HostState, the object a field's ``to_primitive`` is
    given (``HostView.report_primitive``); made once, on first use."""
    return host_state_obj.HostState()


class HostView(host_state_obj.HostResources):
    """One node as the scheduler sees it right now.

    What the mixin computes on demand (zones, aggregate keys, effective
    allocation ratios) is computed once per report or aggregate change.
    A view holds plain values in slots, not the versioned object it was
    made from (the wire objects of a large fleet would cost far more
    memory); ``report`` rebuilds that when asked.  A node has one view,
    and a second while claims the compute has not reported yet are laid
    over it.  Attributes a plugin sets of its own still work (the mixin
    gives every view a ``__dict__``).
    """

    __slots__ = _SLOTS

    def __init__(self, report: host_state_obj.HostState,
                 received_at: float | None = None):
        report.set_defaults()
        for name in host_state_obj.HostState.fields:
            value = getattr(report, name)
            if name in _CONTAINERS:
                value = _shared_container(name, _plain(value))
            elif name == 'numa_topology' and value is not None:
                value = _shared_topology(value)
            setattr(self, name, value)
        # One text for the names that are the host's own (a decoded
        # report holds a copy of each).
        if self.nodename == self.host:
            self.nodename = self.host
        if self.hypervisor_hostname == self.host:
            self.hypervisor_hostname = self.host
        self.received_at = liveness.now() if received_at is None \
            else received_at
        #: The view of the report this one was composed from (None: this
        #: is that view).
        self._reported = None
        #: (version, digest) of what the report says, once asked
        #: (``content_digest``).
        self._digest = None
        self.set_aggregates([])

    def says_the_same(self, report: host_state_obj.HostState) -> bool:
        """Whether ``report`` says what this view's report said, its time
        aside: most periodic reports of a quiet node do."""
        report.set_defaults()
        for name in host_state_obj.HostState.fields:
            if name != 'updated_at' and not _equal(
                    getattr(self, name), getattr(report, name)):
                return False
        return True

    def content_digest(self, version: str) -> str:
        """``objects.host_state.content_digest`` of this view's report
        at HostState ``version``: what a quiet compute's liveness
        message (API 1.6) must carry.  Kept once made, shared with the
        successors."""
        source = self.reported_view()
        held = source._digest
        if held is not None and held[0] == version:
            return held[1]
        digest = host_state_obj.content_digest(source, version)
        source._digest = (version, digest)
        return digest

    def reported_view(self) -> 'HostView':
        """The view of the compute's last report, without the claims
        and usage the scheduler laid over it."""
        return self._reported if self._reported is not None else self

    @property
    def report(self) -> host_state_obj.HostState:
        """The compute's last report as a ``HostState`` (rebuilt, not
        kept: changing it changes no view)."""
        source = self.reported_view()
        values = {}
        for name in host_state_obj.HostState.fields:
            value = getattr(source, name)
            if name in _CONTAINERS:
                value = copy.copy(value)
            elif name == 'numa_topology' and value is not None:
                value = value.obj_clone()
            values[name] = value
        return host_state_obj.HostState(**values)

    def report_primitive(self) -> dict:
        """``self.report.obj_to_primitive()`` without the object: what
        the inventory stores of the compute's last report.

        Each value goes through its field's public ``to_primitive``, as
        serializing the object does, without the versioned object's
        per-attribute machinery (coercion, change tracking, set checks),
        which made the stored form of a changed report cost as much as
        decoding it from the wire.  The values need no coercion: they
        are a decoded report's, already coerced (``__init__`` keeps
        plain copies of its containers, which serialize alike).  Every
        field is set and listed as changed, as in an object made with
        every field's value (a test compares the two).
        """
        source = self.reported_view()
        blank = _blank_report()
        data = {}
        for name, field in host_state_obj.HostState.fields.items():
            data[name] = field.to_primitive(blank, name,
                                            getattr(source, name))
        key = host_state_obj.HostState.OBJ_SERIAL_NAMESPACE + '.'
        return {key + 'name': host_state_obj.HostState.obj_name(),
                key + 'namespace':
                    host_state_obj.HostState.OBJ_PROJECT_NAMESPACE,
                key + 'version': host_state_obj.HostState.VERSION,
                key + 'data': data,
                key + 'changes': list(data)}

    def set_aggregates(self, aggregates: list,
                       like: 'HostView | None' = None) -> None:
        """Attach the host's aggregates; derived values are computed once.

        ``like``: a view that may have these very aggregates attached
        already (the node's previous view); its derived values are
        shared when it has, and its allocation ratios are this view's.
        """
        if like is not None and self._attached_like(aggregates, like):
            self.aggregates = like.aggregates
            self.availability_zones = like.availability_zones
            self._metadata = like._metadata
            self.aggregate_keys = like.aggregate_keys
            self.aggregate_set = like.aggregate_set
            self._ratios = like._ratios
            return
        own = tuple(getattr(self, '%s_allocation_ratio' % resource)
                    for resource in host_state_obj.RESOURCES)
        # The entry keeps the aggregates themselves: their ids in its
        # key cannot be another object's while it lives.
        key = (tuple(map(id, aggregates)), own)
        derived = _ATTACHED.get(key)
        if derived is None:
            derived = _derived(list(aggregates), own)
            if len(_ATTACHED) >= _ATTACHED_MAX:
                _ATTACHED.clear()
            _ATTACHED[key] = derived
        (self.aggregates, self.availability_zones, self._metadata,
         self.aggregate_keys, self._ratios, self.aggregate_set) = derived

    def _attached_like(self, aggregates: list, like: 'HostView') -> bool:
        return like.has_aggregates(aggregates) and all(
            getattr(self, '%s_allocation_ratio' % resource)
            == getattr(like, '%s_allocation_ratio' % resource)
            for resource in host_state_obj.RESOURCES)

    def copy(self) -> 'HostView':
        """A view of the same report that claims and usage are laid
        over.  Containers are shared (claims replace, never mutate,
        instance lists and PCI pools); only the NUMA cells, changed in
        place, are cloned."""
        new = self._same_slots()
        new._reported = self.reported_view()
        if self.numa_topology is not None:
            new.numa_topology = self.numa_topology.obj_clone()
        return new

    def successor(self, received_at: float | None = None) -> 'HostView':
        """The next version of this view, for a change that leaves its
        values as they are (a report that said nothing new, aggregates
        to attach again): views are never changed once a request may see
        them, so the NUMA cells are shared, not cloned."""
        new = self._same_slots()
        if received_at is not None:
            new.received_at = received_at
        return new

    def _same_slots(self) -> 'HostView':
        new = object.__new__(type(self))
        _copy_slots(self, new)
        extra = getattr(self, '__dict__', None)
        if extra:
            new.__dict__.update(extra)
        return new

    def has_aggregates(self, aggregates: list) -> bool:
        """Whether ``aggregates`` (these very objects, in this order)
        are the ones attached."""
        mine = self.aggregates
        return len(mine) == len(aggregates) and all(
            a is b for a, b in zip(mine, aggregates))

    def shares_aggregates(self, other: 'HostView') -> bool:
        """Whether ``other`` has these aggregates for certain (a copy
        of this view, or this one a copy of it): cheap, and False
        does not mean they differ."""
        return self._metadata is other._metadata

    def aggregate_values(self, key: str) -> list:
        return self._metadata.get(key, [])

    def allocation_ratio(self, resource: str) -> float:
        return self._ratios[resource]

    def obj_get(self, name: str, default=None):
        """Like the versioned object's, for code written against either."""
        return getattr(self, name, default)
