"""The object registry, base classes and serializer of the scheduler.

Every versioned object registers with ``SchedulerObjectRegistry`` and
derives from ``SchedulerObject``.  ``SchedulerObjectSerializer`` is the
only serializer: ``scheduler.rpc`` wraps it with the request context.
"""

import functools
import re
import uuid

from oslo_utils import versionutils
from oslo_versionedobjects import base as ovo_base
from oslo_versionedobjects import exception as ovo_exc
from oslo_versionedobjects import fields as ovo_fields

from scheduler import exception


class SchedulerObjectRegistry(ovo_base.VersionedObjectRegistry):
    """Registry of the scheduler's objects, exposed on ``scheduler.objects``.
    """

    def registration_hook(self, cls, index):
        _MANIFEST[1] = -1  # a class replaced by one of the same version
        from scheduler import objects
        current = getattr(objects, cls.obj_name(), None)
        if current is None or cls.VERSION >= current.VERSION:
            setattr(objects, cls.obj_name(), cls)


#: Where oslo.versionedobjects keeps a field's value on the object
#: (``base._get_attrname``); tests/unit/objects checks it still does.
_ATTR_PREFIX = '_obj_'
_UNSET = object()


#: The usual spelling of a UUID (a quicker test than ``uuid.UUID``).
_CANONICAL_UUID = re.compile(
    r'[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-'
    r'[0-9a-fA-F]{12}')


def _is_uuid(value: str) -> bool:
    """Whether oslo's UUID type takes ``value`` without its warning
    (``uuid.UUID`` reads it); only such a string may skip it."""
    if _CANONICAL_UUID.fullmatch(value):
        return True
    try:
        uuid.UUID(value)
    except Exception:  # what oslo catches, to warn
        return False
    return True


#: Field types whose coercion keeps a value of the exact Python type
#: named as it is (``str(s) is s``, ``int(i) is i``, ...), with the
#: check, if any, the value must also pass.  Only these exact classes:
#: a subclass (an Enum is a String) may coerce differently.
_KEPT_AS_IS = {
    ovo_fields.String: (str, None),
    ovo_fields.UUID: (str, _is_uuid),
    ovo_fields.Integer: (int, None),
    ovo_fields.NonNegativeInteger: (int, lambda value: value >= 0),
    ovo_fields.Float: (float, None),
    ovo_fields.Boolean: (bool, None),
}

#: Class -> {field name: test of a value that may be stored as it is}.
_PLAIN_FIELDS: dict = {}


class _Never:
    """The type no value has: a field that keeps only None as it is."""


def _plain_fields(cls) -> dict:
    """``{field: (exact type, check, nullable)}`` for the fields of
    ``cls`` that may take a value without oslo's setter: None when
    ``nullable`` (oslo's coercion keeps None as it is in any nullable
    field; elsewhere it puts the default in its place, or raises), or a
    value of the ``exact`` type (any type when None) that passes
    ``check`` (when there is one).  ``_keeps(entry, value)`` tells.

    A field qualifies when its property is oslo's (no class of ours
    replaced it) and it is not read-only; its type is in
    ``_KEPT_AS_IS``, or an object field, which keeps an object of its
    object name as it is, or any other type when nullable.
    """
    table = _PLAIN_FIELDS.get(cls)
    if table is not None:
        return table
    table = {}
    for name, field in cls.fields.items():
        prop = getattr(cls, name, None)
        if (not isinstance(prop, property) or field.read_only
                or getattr(prop.fset, '__module__', None)
                != ovo_base.__name__):
            continue
        kind = type(field._type)
        if kind is ovo_fields.Object and not field._type._subclasses:
            exact, check = None, _object_test(field._type._obj_name)
        elif kind in _KEPT_AS_IS:
            exact, check = _KEPT_AS_IS[kind]
        elif field.nullable:
            exact, check = _Never, None
        else:
            continue
        table[name] = (exact, check, field.nullable)
    _PLAIN_FIELDS[cls] = table
    return table


def _keeps(entry: tuple, value) -> bool:
    """Whether oslo's coercion would keep ``value`` as it is, for a
    field of ``_plain_fields``."""
    exact, check, nullable = entry
    if value is None:
        return nullable
    return ((exact is None or type(value) is exact)
            and (check is None or check(value)))


def _object_test(obj_name: str):
    def test(value) -> bool:
        return (isinstance(value, ovo_base.VersionedObject)
                and value.obj_name() == obj_name)
    return test


#: Class -> names of its fields read through oslo's own getter.
_OSLO_GETTERS: dict = {}


def _oslo_getters(cls) -> frozenset:
    """The fields of ``cls`` whose property is oslo's: reading one that
    is set returns the value stored under ``_ATTR_PREFIX + name``."""
    names = _OSLO_GETTERS.get(cls)
    if names is None:
        names = _OSLO_GETTERS[cls] = frozenset(
            name for name in cls.fields
            if isinstance(getattr(cls, name, None), property)
            and getattr(getattr(cls, name).fget, '__module__', None)
            == ovo_base.__name__)
    return names


#: Class -> (fields, nested, keys): see ``_layout``.
_LAYOUTS: dict = {}


def _layout(cls) -> tuple:
    """How ``obj_to_primitive`` and ``obj_what_changed`` walk ``cls``.

    ``fields``: ``(name, storage attribute, field)`` in field order,
    with None for the field when its ``to_primitive`` gives any value
    back as it is (oslo's own for a field type that does not change
    it: strings, UUIDs, numbers, booleans, enums).  ``nested``:
    ``(name, storage attribute)`` of the fields that may hold a
    versioned object (any but those whose coercion makes a str, a
    number or a bool).  ``keys``: the primitive's keys (name,
    namespace, version, data, changes).  Values are read from the
    instance's ``__dict__``, where oslo keeps them.
    """
    layout = _LAYOUTS.get(cls)
    if layout is not None:
        return layout
    fields, nested = [], []
    for name, field in cls.fields.items():
        attr = _ATTR_PREFIX + name
        kind = type(field._type)
        as_is = (type(field).to_primitive is ovo_fields.Field.to_primitive
                 and kind.to_primitive is ovo_fields.FieldType.to_primitive)
        fields.append((name, attr, None if as_is else field))
        if kind not in _KEPT_AS_IS:
            nested.append((name, attr))
    keys = tuple(cls._obj_primitive_key(key) for key in
                 ('name', 'namespace', 'version', 'data', 'changes'))
    layout = _LAYOUTS[cls] = (tuple(fields), tuple(nested), keys)
    return layout


class SchedulerObject(ovo_base.VersionedObject,
                      ovo_base.ComparableVersionedObject):
    """Base class of every object the scheduler puts on the wire."""

    OBJ_SERIAL_NAMESPACE = 'versioned_object'
    OBJ_PROJECT_NAMESPACE = 'scheduler'

    @classmethod
    def _obj_from_primitive(cls, context, objver, primitive):
        """oslo's ``_obj_from_primitive``, quicker for plain values.

        Every request and reply is read here, field by field through
        oslo's setter and coercion.  A value that coercion would keep
        as it is (``_plain_fields``: a string in a string field, an int
        in an integer field, None in a nullable one ...) is stored
        directly; any other value takes oslo's way, and raises or warns
        as it did.  The object is the same, changes included.
        """
        # oslo reads any non-dict data as "no field set": a garbled
        # object would arrive as an empty one.
        data = primitive.get(cls._obj_primitive_key('data'))
        if not isinstance(data, dict):
            raise ValueError('%s data is a %s, not a dict'
                             % (cls.obj_name(), type(data).__name__))
        self = cls()
        self._context = context
        self.VERSION = objver
        changes = cls._obj_primitive_field(primitive, 'changes', [])
        plain = _plain_fields(cls)
        fields = self.fields
        for name, field in fields.items():
            if name not in data:
                continue
            value = data[name]
            entry = plain.get(name)
            if entry is None:
                setattr(self, name, field.from_primitive(self, name, value))
                continue
            if not _keeps(entry, value):
                # A nested object is read from its primitive first: the
                # object read is then kept as it is.
                value = field.from_primitive(self, name, value)
                if not _keeps(entry, value):
                    setattr(self, name, value)
                    continue
            setattr(self, _ATTR_PREFIX + name, value)
        self._changed_fields = {x for x in changes if x in fields}
        return self

    @classmethod
    def from_fields(cls, **values):
        """``cls(**values)``, quicker for values that need no coercion.

        For objects built per request from values the scheduler made
        itself (Selections, their limits): each value coercion would
        keep as it is (``_plain_fields``) is stored directly, any other
        goes through oslo's setter.  The object is the same, with the
        same fields changed.  Classes with their own ``__init__`` are
        built by it, as before.
        """
        if cls.__init__ is not ovo_base.VersionedObject.__init__:
            return cls(**values)
        self = cls()
        plain = _plain_fields(cls)
        changed = self._changed_fields
        stored = self.__dict__
        for name, value in values.items():
            entry = plain.get(name)
            if entry is not None and _keeps(entry, value):
                stored[_ATTR_PREFIX + name] = value
                changed.add(name)
            else:
                setattr(self, name, value)
        return self

    @classmethod
    def from_coerced(cls, values: dict):
        """An object holding ``values`` as they are: values another
        object of this class held (coerced when it was made), so not
        coerced again.  For the scheduler's copies of objects it keeps
        as plain values (a host view's report)."""
        self = cls()
        stored = self.__dict__
        for name, value in values.items():
            stored[_ATTR_PREFIX + name] = value
        self._changed_fields.update(values)
        return self

    def obj_to_primitive(self, target_version: str | None = None,
                         version_manifest: dict | None = None) -> dict:
        """oslo's ``obj_to_primitive``, quicker at the object's own version.

        Every reply and report is serialised at the sender's own
        versions: oslo then still parses both versions (a regular
        expression each) to compare them, and asks
        ``obj_what_changed`` twice, for each object and nested object.
        The primitive is the same; a backport (another version, or a
        manifest) is oslo's own code.
        """
        if ((target_version is not None and target_version != self.VERSION)
                or version_manifest):
            return super().obj_to_primitive(target_version, version_manifest)
        fields, _, keys = _layout(type(self))
        primitive = {}
        stored = self.__dict__
        for name, attr, field in fields:
            value = stored.get(attr, _UNSET)
            if value is not _UNSET:
                primitive[name] = value if field is None else \
                    field.to_primitive(self, name, value)
        obj = {keys[0]: self.obj_name(),
               keys[1]: self.OBJ_PROJECT_NAMESPACE,
               keys[2]: self.VERSION,
               keys[3]: primitive}
        changes = [name for name in self.obj_what_changed()
                   if name in primitive]
        if changes:
            obj[keys[4]] = changes
        return obj

    def obj_what_changed(self) -> set:
        """oslo's ``obj_what_changed``, reading the values' storage.

        ``obj_to_primitive`` asks it twice per object and nested object
        at every serialisation, and oslo's version goes through two
        property look-ups per field each time: serialising the three
        Selections of a reply cost 0.14 ms, half of it here.  The
        result is the same: fields marked changed, plus those holding a
        versioned object that has changes of its own (fields whose
        coercion makes a str, number or bool cannot, and are skipped).
        """
        fields = self.fields
        changes = {name for name in self._changed_fields if name in fields}
        stored = self.__dict__
        for name, attr in _layout(type(self))[1]:
            value = stored.get(attr)
            if (isinstance(value, ovo_base.VersionedObject)
                    and value.obj_what_changed()):
                changes.add(name)
        return changes

    def obj_get(self, name: str, default=None):
        """Return a field's value, or ``default`` when it is not set."""
        if name in _oslo_getters(type(self)):
            # What oslo's getter would return, without its two lookups
            # of the field list: filters read spec fields this way for
            # every instance of every request.
            return self.__dict__.get(_ATTR_PREFIX + name, default)
        if self.obj_attr_is_set(name):
            return getattr(self, name)
        return default

    def to_dict(self) -> dict:
        """A plain dict of the set fields, nested objects included."""
        out = {}
        for name in self.fields:
            if not self.obj_attr_is_set(name):
                continue
            out[name] = _plain(getattr(self, name))
        return out


def _plain(value):
    if isinstance(value, SchedulerObject):
        return value.to_dict()
    if isinstance(value, ovo_base.ObjectListBase):
        return [_plain(v) for v in value.objects]
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, set):
        return sorted(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if hasattr(value, 'isoformat'):
        return value.isoformat()
    if value is not None and not isinstance(value, (int, float, str, bool)):
        return str(value)
    return value


class SchedulerObjectList(ovo_base.ObjectListBase, SchedulerObject):
    """Base of the list objects."""


#: Types the serializer gives back as they are, without a look.
_SCALARS = frozenset((str, int, float, bool, type(None)))


class SchedulerObjectSerializer(ovo_base.VersionedObjectSerializer):
    """Turns objects into primitives and back, with typed errors.

    A primitive that cannot be read (unknown object, newer version than
    this code knows, bad field value) raises ``MalformedObject`` or
    ``IncompatibleObjectVersion``; ``scheduler.rpc`` sends those back to
    the caller.
    """

    OBJ_BASE_CLASS = SchedulerObject

    def serialize_entity(self, context, entity):
        # A call's arguments and answers are mostly strings, numbers,
        # booleans and None: oslo gives them back as they are, after a
        # few checks each.
        if type(entity) in _SCALARS:
            return entity
        return super().serialize_entity(context, entity)

    def deserialize_entity(self, context, entity):
        if type(entity) in _SCALARS:
            return entity
        try:
            return super().deserialize_entity(context, entity)
        except ovo_exc.IncompatibleObjectVersion as e:
            raise exception.IncompatibleObjectVersion(
                objname=e.kwargs.get('objname'),
                objver=e.kwargs.get('objver'),
                supported=e.kwargs.get('supported')) from e
        except (ovo_exc.VersionedObjectsException, ValueError, TypeError,
                KeyError, AttributeError) as e:
            what = 'object'
            if isinstance(entity, dict):
                what = entity.get('versioned_object.name', what)
            raise exception.MalformedObject(what=what, reason=e) from e


#: Object versions the first object-speaking API (1.1) shipped with.
MANIFEST_AT_RPC_1_1 = {
    'Flavor': '1.0', 'ImageMeta': '1.0', 'NUMACell': '1.0',
    'NUMATopology': '1.0', 'InstanceNUMACell': '1.0',
    'InstanceNUMATopology': '1.0', 'PciDevicePool': '1.0',
    'InstancePCIRequest': '1.0', 'InstanceGroup': '1.0',
    'SchedulerRetry': '1.0', 'Destination': '1.0', 'SchedulerLimits': '1.0',
    'Aggregate': '1.0', 'HostState': '1.0', 'Selection': '1.0',
    'RequestSpec': '1.0',
}


def obj_manifest() -> dict:
    """``{object name: newest version}`` of every object this code knows.

    Peers exchange manifests (``get_version_info``) so that each can send
    the other objects it can read.  A new dict each time (callers may
    change theirs).
    """
    return dict(_manifest())


#: (registry dict, classes registered, manifest): see ``_manifest``.
_MANIFEST: list = [None, -1, None]


def _manifest() -> dict:
    """``obj_manifest()``, made once per state of the registry; not to
    be changed.

    Every select_destinations asks for it twice (the caller sends it,
    the service compares it with its own): built each time it took
    2 us, and up to 20 us in a process that had been idle a moment,
    as every call's is.  It is made again when classes are registered
    (more of them), and when a fixture puts another registry dict in
    place (oslo's VersionedObjectRegistryFixture).
    """
    registry = SchedulerObjectRegistry.obj_classes()
    count = sum(map(len, registry.values()))
    cached_registry, cached_count, manifest = _MANIFEST
    if cached_registry is not registry or cached_count != count:
        manifest = {name: classes[0].VERSION
                    for name, classes in registry.items()
                    if issubclass(classes[0], SchedulerObject)}
        _MANIFEST[:] = [registry, count, manifest]
    return manifest


@functools.lru_cache(maxsize=256)
def _version_tuple(version: str) -> tuple:
    return versionutils.convert_version_to_tuple(version)


def _older(version: str, than: str) -> bool:
    """Whether ``version`` is older than ``than``.

    Asked for every object of a peer's manifest at every call that
    carries one (select_destinations): parsing the versions each time
    (a regular expression per version) cost 0.06 ms a request.  The
    parsed strings are cached, boundedly, since a manifest comes from
    the bus; anything not a string is parsed as before, and raises
    what it raised.
    """
    if type(version) is str and type(than) is str:
        return _version_tuple(version) < _version_tuple(than)
    return (versionutils.convert_version_to_tuple(version)
            < versionutils.convert_version_to_tuple(than))


def common_manifest(manifest: dict) -> dict:
    """For each object, the older of our version and the peer's.

    A peer newer than us reads our versions; only objects it has at an
    older version need a backport.
    """
    ours = _manifest()
    return {name: (manifest[name] if name in manifest
                   and _older(manifest[name], version) else version)
            for name, version in ours.items()}


def needs_backport(manifest: dict) -> bool:
    """Whether a peer with object versions ``manifest`` lacks any of ours.

    Peers running the same code (the usual case) skip the backport walk,
    and send a manifest equal to ours: that one is not walked either.
    """
    ours = _manifest()
    if manifest == ours:
        return False
    return any(name in manifest and _older(manifest[name], version)
               for name, version in ours.items())


def obj_to_primitive_for(obj: SchedulerObject, manifest: dict | None) -> dict:
    """Serialise ``obj`` for a peer whose object versions are ``manifest``.

    Objects the peer knows only at an older version are backported with
    ``obj_make_compatible``; nested objects follow the same manifest.
    Without a manifest the newest versions are sent.
    """
    if not manifest:
        return obj.obj_to_primitive()
    common = common_manifest(manifest)
    return obj.obj_to_primitive(target_version=common[obj.obj_name()],
                                version_manifest=common)
