"""Selection: one destination chosen for one instance."""

from oslo_utils import versionutils

from scheduler.objects import base
from scheduler.objects import fields
from scheduler.objects import request_parts


@base.SchedulerObjectRegistry.register
class Selection(base.SchedulerObject):
    """A destination for an instance, first choice or alternate.

    ``select_destinations`` returns, per instance, a list whose first
    Selection is the host to build on and whose others are alternates
    the caller may try in order if the build fails there, without
    calling the scheduler again.  ``limits`` are what the compute must
    enforce; ``weight`` says how the host ranked.
    """

    # Version 1.0: Initial version
    # Version 1.1: Added weight
    VERSION = '1.1'

    fields = {
        'service_host': fields.StringField(),
        'nodename': fields.StringField(),
        'compute_node_uuid': fields.UUIDField(nullable=True),
        'instance_uuid': fields.StringField(nullable=True),
        'limits': fields.ObjectField('SchedulerLimits', nullable=True),
        'availability_zone': fields.StringField(nullable=True),
        'weight': fields.FloatField(nullable=True),
    }

    def obj_load_attr(self, attrname):
        # A Selection 1.0 (what an API 1.1 caller is answered with) has
        # no weight: unknown, as from a driver that does not weigh.
        if attrname != 'weight':
            super().obj_load_attr(attrname)
        self.weight = None
        self.obj_reset_changes(['weight'])

    def obj_make_compatible(self, primitive, target_version):
        super().obj_make_compatible(primitive, target_version)
        if versionutils.convert_version_to_tuple(target_version) < (1, 1):
            primitive.pop('weight', None)

    @classmethod
    def from_host_state(cls, host_state, instance_uuid=None,
                        weight=None, limits=None) -> 'Selection':
        """A Selection for ``host_state`` with the request's ``limits``."""
        return cls(service_host=host_state.host,
                   nodename=host_state.nodename,
                   compute_node_uuid=host_state.uuid,
                   instance_uuid=instance_uuid,
                   limits=request_parts.SchedulerLimits.from_dict(
                       host_state.limits if limits is None else limits),
                   availability_zone=min(host_state.availability_zones,
                                         default=None),
                   weight=weight)

    def to_legacy_dict(self) -> dict:
        """The seed's ``{'host', 'nodename', 'limits'}`` destination dict."""
        limits = self.limits.to_dict() if self.limits else {}
        return {'host': self.service_host, 'nodename': self.nodename,
                'limits': limits}

    @classmethod
    def from_legacy_dict(cls, dest: dict) -> 'Selection':
        return cls(service_host=dest['host'],
                   nodename=dest.get('nodename') or dest['host'],
                   compute_node_uuid=None, instance_uuid=None,
                   limits=request_parts.SchedulerLimits.from_dict(
                       dest.get('limits')),
                   availability_zone=None, weight=None)
