"""Payloads of the versioned notifications the scheduler emits.

Consumers (billing, audit, dashboards) read them from the notification
topics; like every other object they carry a version, so consumers can
tell what they got.  See ``scheduler.notifications`` for the events.
"""

from scheduler.objects import base
from scheduler.objects import fields


@base.SchedulerObjectRegistry.register
class RequestSpecPayload(base.SchedulerObject):
    """What was asked: the request without its internals."""

    # Version 1.0: Initial version
    VERSION = '1.0'

    fields = {
        'instance_uuid': fields.StringField(nullable=True),
        'project_id': fields.StringField(nullable=True),
        'user_id': fields.StringField(nullable=True),
        'num_instances': fields.IntegerField(),
        'memory_mb': fields.IntegerField(),
        'vcpus': fields.IntegerField(),
        'root_gb': fields.IntegerField(),
        'ephemeral_gb': fields.IntegerField(),
        'availability_zone': fields.StringField(nullable=True),
        'image_id': fields.StringField(nullable=True),
        'scheduler_hints': fields.DictOfListOfStringsField(),
    }

    @classmethod
    def from_spec(cls, spec_obj) -> 'RequestSpecPayload':
        flavor = spec_obj.flavor
        image = spec_obj.obj_get('image')
        return cls(instance_uuid=spec_obj.obj_get('instance_uuid'),
                   project_id=spec_obj.obj_get('project_id'),
                   user_id=spec_obj.obj_get('user_id'),
                   num_instances=spec_obj.num_instances,
                   memory_mb=flavor.memory_mb, vcpus=flavor.vcpus,
                   root_gb=flavor.root_gb, ephemeral_gb=flavor.ephemeral_gb,
                   availability_zone=spec_obj.obj_get('availability_zone'),
                   image_id=image.obj_get('id') if image else None,
                   scheduler_hints=dict(spec_obj.obj_get('scheduler_hints')
                                        or {}))


@base.SchedulerObjectRegistry.register
class SelectDestinationsPayload(base.SchedulerObject):
    """A select_destinations call: the request and, at the end, the hosts."""

    # Version 1.0: Initial version
    VERSION = '1.0'

    fields = {
        'request_spec': fields.ObjectField('RequestSpecPayload'),
        # [host, nodename] of each instance's first choice, in order.
        'destinations': fields.ListOfListsOfStringsField(default=[]),
        'driver': fields.StringField(),
    }


@base.SchedulerObjectRegistry.register
class ExceptionPayload(base.SchedulerObject):
    """Why a call failed."""

    # Version 1.0: Initial version
    VERSION = '1.0'

    fields = {
        'request_spec': fields.ObjectField('RequestSpecPayload'),
        'exception': fields.StringField(),
        'exception_message': fields.StringField(),
        'driver': fields.StringField(),
    }


@base.SchedulerObjectRegistry.register
class ClaimExpiredPayload(base.SchedulerObject):
    """A claim released because the compute never reported the instance.

    Usually a build lost on the way to the compute (a broker restart
    dropped its run_instance cast): the caller's instance never starts.
    """

    # Version 1.0: Initial version
    VERSION = '1.0'

    fields = {
        'instance_uuid': fields.StringField(),
        'host': fields.StringField(),
        'nodename': fields.StringField(nullable=True),
        'claimed_at': fields.FloatField(),
        'project_id': fields.StringField(nullable=True),
        'user_id': fields.StringField(nullable=True),
    }
