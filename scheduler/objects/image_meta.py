"""ImageMeta: the image an instance boots from and its properties."""

from scheduler.objects import base
from scheduler.objects import fields


@base.SchedulerObjectRegistry.register
class ImageMeta(base.SchedulerObject):
    # Version 1.0: Initial version
    VERSION = '1.0'

    fields = {
        'id': fields.StringField(nullable=True),
        'name': fields.StringField(nullable=True),
        'disk_format': fields.StringField(nullable=True),
        'container_format': fields.StringField(nullable=True),
        'min_ram': fields.NonNegativeIntegerField(),
        'min_disk': fields.NonNegativeIntegerField(),
        'size': fields.NonNegativeIntegerField(),
        # Free-form, as in the image service: filters such as
        # ImagePropertiesFilter read ``hw_architecture``, ``img_hv_type``,
        # ``img_hv_requested_version`` and ``hw_vm_mode``; out-of-tree
        # filters may read any key.
        'properties': fields.DictOfNullableStringsField(),
    }

    def obj_load_attr(self, attrname):
        defaults = {'properties': {}, 'min_ram': 0, 'min_disk': 0,
                    'size': 0, 'id': None, 'name': None,
                    'disk_format': None, 'container_format': None}
        if attrname not in defaults:
            super().obj_load_attr(attrname)
        setattr(self, attrname, defaults[attrname])
        self.obj_reset_changes([attrname])
