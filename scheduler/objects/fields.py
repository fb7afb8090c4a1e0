"""Field types of the scheduler's objects (oslo's plus a few of our own)."""

from oslo_versionedobjects import fields
from oslo_versionedobjects.fields import *  # noqa: F401,F403


class DictOfFloatsField(fields.AutoTypedField):
    AUTO_TYPE = fields.Dict(fields.Float())


class DictOfNullableFloatsField(fields.AutoTypedField):
    AUTO_TYPE = fields.Dict(fields.Float(), nullable=True)


class InstanceGroupPolicy(fields.Enum):
    AFFINITY = 'affinity'
    ANTI_AFFINITY = 'anti-affinity'
    SOFT_AFFINITY = 'soft-affinity'
    SOFT_ANTI_AFFINITY = 'soft-anti-affinity'
    ALL = (AFFINITY, ANTI_AFFINITY, SOFT_AFFINITY, SOFT_ANTI_AFFINITY)

    def __init__(self):
        super().__init__(valid_values=self.ALL)


class InstanceGroupPolicyField(fields.BaseEnumField):
    AUTO_TYPE = InstanceGroupPolicy()
