"""NUMA topologies: what a host has and what an instance asks for."""

from scheduler.objects import base
from scheduler.objects import fields


@base.SchedulerObjectRegistry.register
class NUMACell(base.SchedulerObject):
    """One NUMA cell of a host, with what is in use on it."""

    # Version 1.0: Initial version
    VERSION = '1.0'

    fields = {
        'id': fields.NonNegativeIntegerField(),
        'cpuset': fields.SetOfIntegersField(),
        'memory': fields.NonNegativeIntegerField(),
        'cpu_usage': fields.NonNegativeIntegerField(default=0),
        'memory_usage': fields.NonNegativeIntegerField(default=0),
    }


@base.SchedulerObjectRegistry.register
class NUMATopology(base.SchedulerObject):
    """The NUMA cells of a host."""

    # Version 1.0: Initial version
    VERSION = '1.0'

    fields = {
        'cells': fields.ListOfObjectsField('NUMACell'),
    }


@base.SchedulerObjectRegistry.register
class InstanceNUMACell(base.SchedulerObject):
    """One guest NUMA cell an instance asks for."""

    # Version 1.0: Initial version
    VERSION = '1.0'

    fields = {
        'id': fields.NonNegativeIntegerField(),
        'cpuset': fields.SetOfIntegersField(),
        'memory': fields.NonNegativeIntegerField(),
    }


@base.SchedulerObjectRegistry.register
class InstanceNUMATopology(base.SchedulerObject):
    """The guest NUMA cells an instance asks for."""

    # Version 1.0: Initial version
    VERSION = '1.0'

    fields = {
        'cells': fields.ListOfObjectsField('InstanceNUMACell'),
    }
