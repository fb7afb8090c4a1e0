"""The object registry, base classes and serializer of the scheduler.

Every versioned object registers with ``SchedulerObjectRegistry`` and
derives from ``SchedulerObject``.  ``SchedulerObjectSerializer`` is the
only serializer: ``scheduler.rpc`` wraps it with the request context.
"""

from oslo_utils import versionutils
from oslo_versionedobjects import base as ovo_base
from oslo_versionedobjects import exception as ovo_exc

from scheduler import exception


class SchedulerObjectRegistry(ovo_base.VersionedObjectRegistry):
    """Registry of the scheduler's objects, exposed on ``scheduler.objects``.
    """

    def registration_hook(self, cls, index):
        from scheduler import objects
        current = getattr(objects, cls.obj_name(), None)
        if current is None or cls.VERSION >= current.VERSION:
            setattr(objects, cls.obj_name(), cls)


class SchedulerObject(ovo_base.VersionedObject,
                      ovo_base.ComparableVersionedObject):
    """Base class of every object the scheduler puts on the wire."""

    OBJ_SERIAL_NAMESPACE = 'versioned_object'
    OBJ_PROJECT_NAMESPACE = 'scheduler'

    @classmethod
    def obj_from_primitive(cls, primitive: dict, context=None):
        """oslo's ``obj_from_primitive``, refusing a garbled object.

        oslo reads any non-dict data as "no field set": a garbled
        object would arrive as an empty one.
        """
        if isinstance(primitive, dict):
            data = primitive.get(cls.OBJ_SERIAL_NAMESPACE + '.data')
            if not isinstance(data, dict):
                raise ValueError('%s data is a %s, not a dict' % (
                    primitive.get(cls.OBJ_SERIAL_NAMESPACE + '.name'),
                    type(data).__name__))
        return super().obj_from_primitive(primitive, context)

    def obj_to_primitive(self, target_version: str | None = None,
                         version_manifest: dict | None = None) -> dict:
        """oslo's ``obj_to_primitive``, quicker at the object's own
        version: no version parsed and compared, one ``obj_what_changed``
        walk instead of two.  Kept because every Selection of an answer
        and its limits go through it, and the saving shows in the CPU
        of a select call on the mixed workload (measured with
        tools/bench/bench_objects.py).  The primitive is oslo's (a test
        compares them); a backport is oslo's own code.
        """
        if ((target_version is not None and target_version != self.VERSION)
                or version_manifest):
            return super().obj_to_primitive(target_version, version_manifest)
        primitive = {}
        for name, field in self.fields.items():
            if self.obj_attr_is_set(name):
                primitive[name] = field.to_primitive(
                    self, name, getattr(self, name))
        key = self.OBJ_SERIAL_NAMESPACE + '.'
        obj = {key + 'name': self.obj_name(),
               key + 'namespace': self.OBJ_PROJECT_NAMESPACE,
               key + 'version': self.VERSION,
               key + 'data': primitive}
        changes = [name for name in self.obj_what_changed()
                   if name in primitive]
        if changes:
            obj[key + 'changes'] = changes
        return obj

    def obj_get(self, name: str, default=None):
        """Return a field's value, or ``default`` when it is not set."""
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


class SchedulerObjectSerializer(ovo_base.VersionedObjectSerializer):
    """Turns objects into primitives and back, with typed errors.

    A primitive that cannot be read (unknown object, newer version than
    this code knows, bad field value) raises ``MalformedObject`` or
    ``IncompatibleObjectVersion``; ``scheduler.rpc`` sends those back to
    the caller.
    """

    OBJ_BASE_CLASS = SchedulerObject

    def deserialize_entity(self, context, entity):
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
    the other objects it can read.
    """
    return {name: classes[0].VERSION
            for name, classes in
            SchedulerObjectRegistry.obj_classes().items()
            if issubclass(classes[0], SchedulerObject)}


def _older(version: str, than: str) -> bool:
    return (versionutils.convert_version_to_tuple(version)
            < versionutils.convert_version_to_tuple(than))


def common_manifest(manifest: dict) -> dict:
    """For each object, the older of our version and the peer's.

    A peer newer than us reads our versions; only objects it has at an
    older version need a backport.
    """
    ours = obj_manifest()
    return {name: (manifest[name] if name in manifest
                   and _older(manifest[name], version) else version)
            for name, version in ours.items()}


def needs_backport(manifest: dict) -> bool:
    """Whether a peer with object versions ``manifest`` lacks any of ours.

    Peers running the same code (the usual case) skip the backport walk,
    and send a manifest equal to ours: that one is not walked either.
    """
    ours = obj_manifest()
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
