"""PCI device pools of a host and the PCI requests of an instance."""

from scheduler.objects import base
from scheduler.objects import fields


@base.SchedulerObjectRegistry.register
class PciDevicePool(base.SchedulerObject):
    """Identical PCI devices of a host, counted together."""

    # Version 1.0: Initial version
    VERSION = '1.0'

    fields = {
        'vendor_id': fields.StringField(),
        'product_id': fields.StringField(),
        'numa_node': fields.IntegerField(nullable=True),
        'tags': fields.DictOfNullableStringsField(default={}),
        'count': fields.NonNegativeIntegerField(),
    }


@base.SchedulerObjectRegistry.register
class InstancePCIRequest(base.SchedulerObject):
    """``count`` devices matching any of the ``spec`` dicts."""

    # Version 1.0: Initial version
    VERSION = '1.0'

    fields = {
        'count': fields.NonNegativeIntegerField(),
        'spec': fields.ListOfDictOfNullableStringsField(),
        'alias_name': fields.StringField(nullable=True),
    }
