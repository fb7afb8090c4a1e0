"""ServerGroupSoftAffinityWeigher: hosts with more members first."""

from scheduler import objects
from scheduler.weights import server_group_soft_affinity as mod
from tests.unit.filters.catalogue import aggregate
from tests.unit.filters.catalogue import host
from tests.unit.filters.catalogue import request
from tests.unit.weights.catalogue import contributions
from tests.unit.weights.catalogue import ranking


def _spec(policy='soft-affinity', hosts=()):
    return request(instance_group=objects.InstanceGroup(
        uuid=None, name='g', policy=policy, rules={},
        members=['m1', 'm2', 'm3'], hosts=list(hosts)))


def _hosts(**kwargs):
    return [host('one', instance_uuids=['m1', 'x']),
            host('two', instance_uuids=['m2', 'm3'], **kwargs),
            host('zero', instance_uuids=['x'])]


def test_more_members_weigh_more():
    assert ranking(mod.ServerGroupSoftAffinityWeigher(), _hosts(),
                   _spec()) == ['two', 'one', 'zero']


def test_hosts_picked_earlier_in_the_request_count():
    assert ranking(mod.ServerGroupSoftAffinityWeigher(), _hosts(),
                   _spec(hosts=['zero', 'zero', 'zero']))[0] == 'zero'


def test_other_policies_weigh_nothing():
    for spec in (_spec('soft-anti-affinity'), _spec('affinity'),
                 request()):
        assert set(contributions(mod.ServerGroupSoftAffinityWeigher(),
                                 _hosts(), spec).values()) == {0.0}


def test_negative_aggregate_override_is_clipped():
    hosts = _hosts(aggregates=[
        aggregate(soft_affinity_weight_multiplier='-2')])
    assert contributions(mod.ServerGroupSoftAffinityWeigher(), hosts,
                         _spec())['two'] == 0.0
