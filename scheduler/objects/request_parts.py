"""Small objects a RequestSpec carries: retry, destination, limits."""

from oslo_utils import versionutils

from scheduler.objects import base
from scheduler.objects import fields


@base.SchedulerObjectRegistry.register
class SchedulerRetry(base.SchedulerObject):
    """How many times an instance was tried, and on which hosts."""

    # Version 1.0: Initial version
    VERSION = '1.0'

    fields = {
        'num_attempts': fields.NonNegativeIntegerField(default=0),
        # [host, nodename] pairs already tried.
        'hosts': fields.ListOfListsOfStringsField(default=[]),
    }


@base.SchedulerObjectRegistry.register
class Destination(base.SchedulerObject):
    """A host, node, aggregates and/or cell the caller wants the instance
    on."""

    # Version 1.0: Initial version
    # Version 1.1: Added cell and allow_cross_cell_move
    VERSION = '1.1'

    fields = {
        'host': fields.StringField(nullable=True),
        'node': fields.StringField(nullable=True),
        # Each entry is a comma list of aggregate uuids or names: the
        # host must be in one of each entry's aggregates.
        'aggregates': fields.ListOfStringsField(nullable=True),
        # The cell (a host's ``cell_uuid``) to stay in: candidates are
        # restricted to it unless allow_cross_cell_move, in which case
        # CrossCellWeigher only prefers it (nova's move operations).
        'cell': fields.StringField(nullable=True, default=None),
        'allow_cross_cell_move': fields.BooleanField(default=False),
    }

    def obj_make_compatible(self, primitive, target_version):
        super().obj_make_compatible(primitive, target_version)
        if versionutils.convert_version_to_tuple(target_version) < (1, 1):
            primitive.pop('cell', None)
            primitive.pop('allow_cross_cell_move', None)


@base.SchedulerObjectRegistry.register
class SchedulerLimits(base.SchedulerObject):
    """Oversubscription limits the chosen host must not exceed.

    Filled by the resource filters from each host's totals and
    allocation ratios, so that the compute agent can enforce them.
    """

    # Version 1.0: Initial version
    VERSION = '1.0'

    fields = {
        'memory_mb': fields.IntegerField(nullable=True, default=None),
        'disk_gb': fields.IntegerField(nullable=True, default=None),
        'vcpu': fields.IntegerField(nullable=True, default=None),
        'numa_topology': fields.DictOfNullableFloatsField(nullable=True,
                                                          default=None),
    }

    @classmethod
    def from_dict(cls, limits: dict | None) -> 'SchedulerLimits':
        """Limits from a filter's dict (every Selection's, per request)."""
        limits = limits or {}
        numa = limits.get('numa_topology')
        return cls(memory_mb=_int(limits.get('memory_mb')),
                   disk_gb=_int(limits.get('disk_gb')),
                   vcpu=_int(limits.get('vcpu')),
                   numa_topology=dict(numa) if numa else None)

    def to_dict(self) -> dict:
        out = {}
        for key in ('memory_mb', 'disk_gb', 'vcpu', 'numa_topology'):
            value = self.obj_get(key)
            if value is not None:
                out[key] = value
        return out


def _int(value):
    return None if value is None else int(value)


@base.SchedulerObjectRegistry.register
class Aggregate(base.SchedulerObject):
    """A host aggregate from the inventory: a named set of hosts."""

    # Version 1.0: Initial version
    VERSION = '1.0'

    fields = {
        'id': fields.IntegerField(nullable=True),
        'uuid': fields.UUIDField(nullable=True),
        'name': fields.StringField(),
        'hosts': fields.ListOfStringsField(default=[]),
        'metadata': fields.DictOfStringsField(default={}),
    }

    @classmethod
    def from_row(cls, row: dict) -> 'Aggregate':
        """The aggregate an inventory row (``scheduler.db.api``) holds."""
        return cls(id=row.get('id'), uuid=row.get('uuid'), name=row['name'],
                   hosts=list(row['hosts']), metadata=dict(row['metadata']))

    @property
    def availability_zone(self) -> str | None:
        return self.obj_get('metadata', {}).get('availability_zone')
