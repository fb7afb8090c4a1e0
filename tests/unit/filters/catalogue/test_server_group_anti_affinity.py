"""ServerGroupAntiAffinityFilter: members on separate hosts, up to
max_server_per_host."""

import pytest

from scheduler import exception
from scheduler.filters import server_group_anti_affinity as mod
from scheduler import objects
from tests.unit.filters.catalogue import host
from tests.unit.filters.catalogue import passing
from tests.unit.filters.catalogue import request


def _spec(members, hosts=(), rules=None, policy='anti-affinity',
          instance_uuid='new'):
    return request(instance_uuid=instance_uuid,
                   instance_group=objects.InstanceGroup(
                       uuid=None, name='group-1', policy=policy,
                       rules=rules or {}, members=list(members),
                       hosts=list(hosts)))


def _hosts():
    return [host('h1', instance_uuids=['m1', 'x']),
            host('h2', instance_uuids=['m2', 'm3']),
            host('h3', instance_uuids=['x'])]


def test_one_member_per_host_by_default():
    flt = mod.ServerGroupAntiAffinityFilter()
    spec = _spec(['m1', 'm2', 'm3'], ['h1', 'h2'])
    assert passing(flt, _hosts(), spec) == ['h3']
    assert flt.rejection_reason(_hosts()[1], spec) == (
        'runs 2 member(s) of the anti-affinity server group, '
        'max_server_per_host 1')


def test_max_server_per_host_rule():
    spec = _spec(['m1', 'm2', 'm3'], ['h1', 'h2'],
                 rules={'max_server_per_host': '2'})
    assert passing(mod.ServerGroupAntiAffinityFilter(), _hosts(),
                   spec) == ['h1', 'h3']


def test_group_hosts_count_instances_placed_in_this_request():
    # Two instances of this request went to h3 without uuids the host
    # knows yet: the driver listed h3 twice in the group's hosts.
    spec = _spec(['m1'], ['h1', 'h3', 'h3'],
                 rules={'max_server_per_host': '2'})
    assert passing(mod.ServerGroupAntiAffinityFilter(), _hosts(),
                   spec) == ['h1', 'h2']


def test_members_and_hosts_are_not_added_up():
    # h1 runs m1 and the caller lists h1 once for it: one member.
    spec = _spec(['m1'], ['h1'], rules={'max_server_per_host': '2'})
    assert passing(mod.ServerGroupAntiAffinityFilter(), _hosts(),
                   spec) == ['h1', 'h2', 'h3']


def test_placed_uuids_count_through_instance_uuids():
    flt = mod.ServerGroupAntiAffinityFilter()
    h = host('h1')
    spec = _spec(['a', 'b'], instance_uuid='a')
    assert passing(flt, [h], spec) == ['h1']
    h.consume_from_request(spec)
    spec.instance_uuid = 'b'
    assert passing(flt, [h], spec) == []


def test_source_host_of_a_move_passes():
    spec = _spec(['m1', 'm2'], ['h1', 'h2'], instance_uuid='m2')
    assert passing(mod.ServerGroupAntiAffinityFilter(), _hosts(),
                   spec) == ['h2', 'h3']


def test_other_policies_skip():
    flt = mod.ServerGroupAntiAffinityFilter()
    assert flt.prepare(_spec(['m1'], ['h1'], policy='affinity')) is \
        mod.base.SKIP
    assert flt.prepare(_spec(['m1'], ['h1'],
                             policy='soft-anti-affinity')) is mod.base.SKIP
    assert flt.prepare(request()) is mod.base.SKIP


@pytest.mark.parametrize('value', ['0', '-1', 'two', ''])
def test_bad_rule_is_an_invalid_request(value):
    spec = _spec(['m1'], rules={'max_server_per_host': value})
    with pytest.raises(exception.InvalidRequest):
        mod.ServerGroupAntiAffinityFilter().filter_all(_hosts(), spec)
