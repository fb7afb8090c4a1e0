"""ServerGroupAffinityFilter: members follow the group's hosts."""

from scheduler.filters import server_group_affinity as mod
from scheduler import objects
from tests.unit.filters.catalogue import host
from tests.unit.filters.catalogue import passing
from tests.unit.filters.catalogue import request


def _spec(policy, hosts):
    return request(instance_group=objects.InstanceGroup(
        uuid=None, name='group-1', policy=policy, rules={},
        members=['m1'], hosts=hosts))


def _hosts():
    return [host('h1'), host('h2'), host('h3')]


def test_only_the_group_hosts():
    flt = mod.ServerGroupAffinityFilter()
    spec = _spec('affinity', ['h2'])
    assert passing(flt, _hosts(), spec) == ['h2']
    assert 'h2' in flt.rejection_reason(_hosts()[0], spec)


def test_first_member_goes_anywhere():
    assert passing(mod.ServerGroupAffinityFilter(), _hosts(),
                   _spec('affinity', [])) == ['h1', 'h2', 'h3']


def test_other_policies_and_no_group_skip():
    flt = mod.ServerGroupAffinityFilter()
    for spec in (_spec('anti-affinity', ['h2']),
                 _spec('soft-affinity', ['h2']), request()):
        assert flt.prepare(spec) is mod.base.SKIP


def test_later_instances_of_a_request_follow_the_first():
    flt = mod.ServerGroupAffinityFilter()
    spec = _spec('affinity', [])
    assert passing(flt, _hosts(), spec) == ['h1', 'h2', 'h3']
    # What the driver does after placing the first instance.
    spec.instance_group.hosts = ['h3']
    assert passing(flt, _hosts(), spec) == ['h3']
    assert not flt.run_filter_once_per_request
