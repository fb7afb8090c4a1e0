"""DifferentHostFilter, SameHostFilter and the server group filters
over columns: the instances they name are looked up in the column
store's instance index, not in every candidate's list, and the answer
is the same as host by host."""

import pytest

from scheduler import columns
from scheduler.filters import different_host
from scheduler.filters import same_host
from scheduler.filters import server_group_affinity
from scheduler.filters import server_group_anti_affinity
from scheduler import objects
from scheduler import plugin_testing
from tests.unit import fixtures

UUID1 = 'a0cf03a5-d921-4877-bb5c-86d26cf818e1'
UUID2 = '8c19174f-4220-44f0-824a-cd1eeef10287'
FILTERS = [different_host.DifferentHostFilter, same_host.SameHostFilter]


def _hosts():
    return fixtures.hosts(
        fixtures.report('h1', instance_uuids=[UUID1]),
        fixtures.report('h2', instance_uuids=[UUID2, 'other']),
        fixtures.report('h3', instance_uuids=['other']),
        fixtures.report('h4'))


@pytest.mark.parametrize('cls', FILTERS)
@pytest.mark.parametrize('hint', [[UUID1], [UUID1, UUID2], [UUID2],
                                  ['gone'], [UUID2, 'gone']])
def test_columns_agree_with_host_by_host(cls, hint):
    spec = fixtures.request(scheduler_hints={cls.__module__.rsplit(
        '.', 1)[1]: hint})
    flt = cls()
    plugin_testing.check_filter(flt, _hosts(), spec)
    # The check above is vacuous without a vector form.
    assert columns.vector_form(flt, 'filter_columns',
                               columns.FILTER_METHODS) is not None


@pytest.mark.parametrize('members,hosts,rules,own', [
    ([UUID1], [], {}, None),
    ([UUID1, UUID2], ['h1', 'h3'], {}, None),
    ([], ['h2', 'h2', 'h4', 'elsewhere'], {'max_server_per_host': '2'},
     None),
    ([UUID1, 'other'], ['h1'], {'max_server_per_host': '2'}, None),
    ([UUID2], ['h2'], {}, 'other'),
    ([], [], {}, None),
])
def test_anti_affinity_columns_agree_with_host_by_host(members, hosts,
                                                       rules, own):
    spec = fixtures.request(instance_group=objects.InstanceGroup(
        uuid=fixtures.uuid(600), name='g', policy='anti-affinity',
        members=members, hosts=hosts, rules=rules))
    if own:
        spec.instance_uuid = own
    flt = server_group_anti_affinity.ServerGroupAntiAffinityFilter()
    plugin_testing.check_filter(flt, _hosts(), spec)
    assert columns.vector_form(flt, 'filter_columns',
                               columns.FILTER_METHODS) is not None


@pytest.mark.parametrize('members,hosts,own', [
    ([UUID1, UUID2], ['h1', 'h3'], None),
    ([UUID1], ['h1', 'h1'], None),
    ([UUID2], ['h2'], 'other'),
    ([], [], None),
])
def test_anti_affinity_of_several_instances_over_columns(members, hosts,
                                                         own):
    # A later instance of a request counts the hosts the earlier ones
    # went to, as host by host.
    spec = fixtures.request(num_instances=3, instance_group=objects.
                            InstanceGroup(uuid=fixtures.uuid(600), name='g',
                                          policy='anti-affinity',
                                          members=members, hosts=hosts))
    if own:
        spec.instance_uuid = own
    flt = server_group_anti_affinity.ServerGroupAntiAffinityFilter()
    plugin_testing.check_filter(flt, _hosts(), spec)
    assert flt.filter_columns(plugin_testing.host_columns(_hosts()),
                              flt.prepare(spec)) is not None


@pytest.mark.parametrize('hosts', [['h1'], ['h2', 'h4', 'h2'],
                                   ['elsewhere'], []])
def test_affinity_columns_agree_with_host_by_host(hosts):
    spec = fixtures.request(num_instances=2, instance_group=objects.
                            InstanceGroup(uuid=fixtures.uuid(600), name='g',
                                          policy='affinity', members=[],
                                          hosts=hosts))
    flt = server_group_affinity.ServerGroupAffinityFilter()
    plugin_testing.check_filter(flt, _hosts(), spec)
    assert columns.vector_form(flt, 'filter_columns',
                               columns.FILTER_METHODS) is not None
