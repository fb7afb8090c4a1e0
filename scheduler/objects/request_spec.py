"""RequestSpec: everything the scheduler needs to place instances."""

from oslo_utils import versionutils

from scheduler.objects import base
from scheduler.objects import fields
from scheduler.objects import flavor as flavor_obj
from scheduler.objects import image_meta as image_obj
from scheduler.objects import instance_group as group_obj
from scheduler.objects import request_parts


@base.SchedulerObjectRegistry.register
class RequestSpec(base.SchedulerObject):
    """One scheduling request for ``num_instances`` identical instances."""

    # Version 1.0: Initial version
    # Version 1.1: Added is_bfv
    VERSION = '1.1'

    fields = {
        'instance_uuid': fields.StringField(nullable=True),
        'project_id': fields.StringField(nullable=True),
        'user_id': fields.StringField(nullable=True),
        'num_instances': fields.IntegerField(default=1),
        'flavor': fields.ObjectField('Flavor'),
        'image': fields.ObjectField('ImageMeta', nullable=True),
        'numa_topology': fields.ObjectField('InstanceNUMATopology',
                                            nullable=True),
        'pci_requests': fields.ListOfObjectsField('InstancePCIRequest'),
        'availability_zone': fields.StringField(nullable=True),
        'scheduler_hints': fields.DictOfListOfStringsField(nullable=True),
        'ignore_hosts': fields.ListOfStringsField(nullable=True),
        'force_hosts': fields.ListOfStringsField(nullable=True),
        'force_nodes': fields.ListOfStringsField(nullable=True),
        'requested_destination': fields.ObjectField('Destination',
                                                    nullable=True),
        'retry': fields.ObjectField('SchedulerRetry', nullable=True),
        'instance_group': fields.ObjectField('InstanceGroup', nullable=True),
        'limits': fields.ObjectField('SchedulerLimits', nullable=True),
        # Booted from volume: the root disk is not on the host.
        'is_bfv': fields.BooleanField(default=False),
    }

    _DEFAULTS = {
        'instance_uuid': None, 'project_id': None, 'user_id': None,
        'num_instances': 1, 'image': None, 'numa_topology': None,
        'pci_requests': [], 'availability_zone': None,
        'scheduler_hints': None, 'ignore_hosts': None, 'force_hosts': None,
        'force_nodes': None, 'requested_destination': None, 'retry': None,
        'instance_group': None, 'limits': None, 'is_bfv': False,
    }

    def obj_load_attr(self, attrname):
        # Callers send only what they know; the rest means "no
        # constraint".  The flavor has no sensible default.
        if attrname == 'flavor':
            self.flavor = flavor_obj.Flavor()
        elif attrname in self._DEFAULTS:
            value = self._DEFAULTS[attrname]
            setattr(self, attrname, list(value)
                    if isinstance(value, list) else value)
        else:
            super().obj_load_attr(attrname)
        self.obj_reset_changes([attrname])

    def obj_make_compatible(self, primitive, target_version):
        super().obj_make_compatible(primitive, target_version)
        target = versionutils.convert_version_to_tuple(target_version)
        if target < (1, 1):
            primitive.pop('is_bfv', None)

    # -- convenience for filters ------------------------------------------

    def get_scheduler_hint(self, name: str, default=None):
        """A hint's value: a single string when the hint has one value."""
        hints = self.scheduler_hints or {}
        value = hints.get(name)
        if value is None:
            return default
        if isinstance(value, list) and len(value) == 1:
            return value[0]
        return value

    @property
    def image_properties(self) -> dict:
        return dict(self.image.properties) if self.image else {}

    @property
    def memory_mb(self) -> int:
        """nova's shortcut for ``flavor.memory_mb``."""
        return self.flavor.memory_mb

    @property
    def vcpus(self) -> int:
        """nova's shortcut for ``flavor.vcpus``."""
        return self.flavor.vcpus

    def get(self, key: str, default=None):
        """Dict-style access for filters written against old nova.

        Fields are returned as they are; any other key is looked up in
        the legacy ``filter_properties`` view, so that a filter doing
        ``spec_obj.get('request_spec', {}).get('image', {})`` (like the
        TroveImageFilter of the seeds) keeps working.
        """
        if key in self.fields:
            return self.obj_get(key, default)
        return self.to_legacy_filter_properties_dict().get(key, default)

    # -- legacy dicts -------------------------------------------------------

    @classmethod
    def from_primitives(cls, request_spec: dict,
                        filter_properties: dict) -> 'RequestSpec':
        """Build a RequestSpec from the legacy ``request_spec`` and
        ``filter_properties`` dicts that old callers send."""
        request_spec = dict(request_spec or {})
        filter_properties = dict(filter_properties or {})
        props = dict(request_spec.get('instance_properties') or {})
        flavor_dict = (request_spec.get('instance_type')
                       or filter_properties.get('instance_type') or {})
        spec = cls()
        spec.flavor = _flavor_from_dict(flavor_dict, props)
        image = request_spec.get('image')
        spec.image = _image_from_dict(image) if image else None
        uuids = request_spec.get('instance_uuids') or []
        spec.instance_uuid = props.get('uuid') or (uuids[0] if uuids
                                                   else None)
        spec.project_id = props.get('project_id')
        spec.user_id = props.get('user_id')
        num = request_spec.get('num_instances')
        # An explicit 0 stays 0, for the manager to reject.
        spec.num_instances = int(num if num is not None
                                 else len(uuids) or 1)
        spec.availability_zone = (props.get('availability_zone')
                                  or filter_properties.get(
                                      'availability_zone'))
        hints = filter_properties.get('scheduler_hints') or {}
        spec.scheduler_hints = {
            str(k): [str(x) for x in v] if isinstance(v, (list, tuple))
            else [str(v)] for k, v in hints.items()} or None
        for key in ('ignore_hosts', 'force_hosts', 'force_nodes'):
            value = filter_properties.get(key)
            if isinstance(value, str):
                value = [value]
            setattr(spec, key, list(value) if value else None)
        retry = filter_properties.get('retry')
        spec.retry = request_parts.SchedulerRetry(
            num_attempts=int(retry.get('num_attempts', 0)),
            hosts=[list(h) for h in retry.get('hosts', [])]) if retry else None
        group_policy = filter_properties.get('group_policies')
        if group_policy or filter_properties.get('group_hosts'):
            # nova sends a set of policies (JSON a list): take the first.
            if isinstance(group_policy, (set, frozenset)):
                group_policy = sorted(group_policy)
            policy = group_policy[0] if isinstance(
                group_policy, (list, tuple)) and group_policy \
                else group_policy
            spec.instance_group = group_obj.InstanceGroup(
                uuid=None, name=None, policy=policy or None,
                rules=dict(filter_properties.get('group_rules') or {}),
                members=list(filter_properties.get('group_members') or []),
                hosts=list(filter_properties.get('group_hosts') or []))
        else:
            spec.instance_group = None
        limits = filter_properties.get('limits')
        spec.limits = (request_parts.SchedulerLimits.from_dict(limits)
                       if limits else None)
        spec.requested_destination = None
        spec.is_bfv = bool(request_spec.get('is_bfv', False))
        return spec

    def to_legacy_request_spec_dict(self) -> dict:
        """The legacy ``request_spec`` dict, for old callers and drivers."""
        flavor = self.flavor.to_dict()
        props = {
            'uuid': self.instance_uuid, 'project_id': self.project_id,
            'user_id': self.user_id,
            'availability_zone': self.availability_zone,
            'memory_mb': flavor.get('memory_mb', 0),
            'vcpus': flavor.get('vcpus', 0),
            'root_gb': flavor.get('root_gb', 0),
            'ephemeral_gb': flavor.get('ephemeral_gb', 0),
        }
        spec = {
            'num_instances': self.num_instances,
            'instance_type': flavor,
            'instance_properties': props,
            'image': self.image.to_dict() if self.image else {},
            'is_bfv': self.is_bfv,
        }
        # One uuid stands for the request only when it is one instance.
        if self.instance_uuid and self.num_instances == 1:
            spec['instance_uuids'] = [self.instance_uuid]
        return spec

    def to_legacy_filter_properties_dict(self) -> dict:
        """The legacy ``filter_properties`` dict."""
        fp = {'scheduler_hints': dict(self.scheduler_hints or {}),
              'instance_type': self.flavor.to_dict(),
              'request_spec': self.to_legacy_request_spec_dict()}
        for key in ('ignore_hosts', 'force_hosts', 'force_nodes'):
            if getattr(self, key):
                fp[key] = list(getattr(self, key))
        if self.retry:
            fp['retry'] = {'num_attempts': self.retry.num_attempts,
                           'hosts': [list(h) for h in self.retry.hosts]}
        if self.instance_group and self.instance_group.obj_get('policy'):
            group = self.instance_group
            fp['group_updated'] = True
            fp['group_policies'] = {group.policy}
            fp['group_rules'] = dict(group.obj_get('rules') or {})
            fp['group_hosts'] = set(group.obj_get('hosts') or [])
            fp['group_members'] = set(group.obj_get('members') or [])
        if self.limits:
            fp['limits'] = self.limits.to_dict()
        return fp


def _flavor_from_dict(flavor: dict, props: dict) -> flavor_obj.Flavor:
    def pick(key):
        value = flavor.get(key, props.get(key, 0))
        return int(value or 0)
    return flavor_obj.Flavor(
        flavorid=_str_or_none(flavor.get('flavorid')),
        name=_str_or_none(flavor.get('name')),
        memory_mb=pick('memory_mb'), vcpus=pick('vcpus'),
        root_gb=pick('root_gb'), ephemeral_gb=pick('ephemeral_gb'),
        swap=pick('swap'),
        extra_specs={str(k): str(v) for k, v in
                     (flavor.get('extra_specs') or {}).items()})


def _image_from_dict(image: dict) -> image_obj.ImageMeta:
    props = image.get('properties') or {}
    return image_obj.ImageMeta(
        id=_str_or_none(image.get('id')), name=_str_or_none(image.get('name')),
        disk_format=image.get('disk_format'),
        container_format=image.get('container_format'),
        min_ram=int(image.get('min_ram') or 0),
        min_disk=int(image.get('min_disk') or 0),
        size=int(image.get('size') or 0),
        properties={str(k): None if v is None else str(v)
                    for k, v in props.items()})


def _str_or_none(value):
    return None if value is None else str(value)
