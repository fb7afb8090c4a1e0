"""InstanceGroup: the server group an instance belongs to."""

from scheduler.objects import base
from scheduler.objects import fields


@base.SchedulerObjectRegistry.register
class InstanceGroup(base.SchedulerObject):
    """A server group as the scheduler needs it: policy, rules, members.

    ``hosts`` are the hosts the members already run on; the scheduler
    adds the hosts it picks during a multi-instance request so that
    later instances of the same request see them.
    """

    # Version 1.0: Initial version
    VERSION = '1.0'

    fields = {
        'uuid': fields.UUIDField(nullable=True),
        'name': fields.StringField(nullable=True),
        'policy': fields.InstanceGroupPolicyField(nullable=True),
        # e.g. {'max_server_per_host': '2'} for anti-affinity.
        'rules': fields.DictOfStringsField(default={}),
        'members': fields.ListOfStringsField(default=[]),
        'hosts': fields.ListOfStringsField(default=[]),
    }
