"""Flavor: the resources and extra specs an instance asks for."""

from scheduler.objects import base
from scheduler.objects import fields


@base.SchedulerObjectRegistry.register
class Flavor(base.SchedulerObject):
    # Version 1.0: Initial version
    VERSION = '1.0'

    fields = {
        'flavorid': fields.StringField(nullable=True),
        'name': fields.StringField(nullable=True),
        'memory_mb': fields.NonNegativeIntegerField(),
        'vcpus': fields.NonNegativeIntegerField(),
        'root_gb': fields.NonNegativeIntegerField(),
        'ephemeral_gb': fields.NonNegativeIntegerField(),
        # MiB, as nova counts swap.
        'swap': fields.NonNegativeIntegerField(),
        'extra_specs': fields.DictOfStringsField(),
    }

    def obj_load_attr(self, attrname):
        # Unset resource fields mean "none of it", not an error.
        defaults = {'memory_mb': 0, 'vcpus': 0, 'root_gb': 0,
                    'ephemeral_gb': 0, 'swap': 0, 'extra_specs': {},
                    'flavorid': None, 'name': None}
        if attrname not in defaults:
            super().obj_load_attr(attrname)
        setattr(self, attrname, defaults[attrname])
        self.obj_reset_changes([attrname])
