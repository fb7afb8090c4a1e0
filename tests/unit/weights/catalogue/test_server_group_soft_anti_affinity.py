"""ServerGroupSoftAntiAffinityWeigher: hosts with fewer members first."""

import pytest

from scheduler import objects
from scheduler.weights import server_group_soft_anti_affinity as mod
from tests.unit.filters.catalogue import host
from tests.unit.filters.catalogue import request
from tests.unit.weights.catalogue import contributions
from tests.unit.weights.catalogue import ranking


def _spec(policy='soft-anti-affinity'):
    return request(instance_group=objects.InstanceGroup(
        uuid=None, name='g', policy=policy, rules={},
        members=['m1', 'm2', 'm3'], hosts=[]))


def _hosts():
    return [host('one', instance_uuids=['m1', 'x']),
            host('two', instance_uuids=['m2', 'm3']),
            host('zero', instance_uuids=['x'])]


def test_fewer_members_weigh_more():
    assert ranking(mod.ServerGroupSoftAntiAffinityWeigher(), _hosts(),
                   _spec()) == ['zero', 'one', 'two']


def test_other_policies_weigh_nothing():
    assert set(contributions(mod.ServerGroupSoftAntiAffinityWeigher(),
                             _hosts(), _spec('soft-affinity')).values()) \
        == {0.0}


def test_negative_option_is_refused(conf):
    with pytest.raises(ValueError):
        conf.config(soft_anti_affinity_weight_multiplier=-1.0,
                    group='filter_scheduler')
