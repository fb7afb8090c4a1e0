"""AggregateMultiTenancyIsolation: the guide's HostA / HostB example."""

from scheduler.filters import aggregate_multitenancy_isolation as mod
from tests.unit.filters.catalogue import aggregate
from tests.unit.filters.catalogue import host
from tests.unit.filters.catalogue import passing
from tests.unit.filters.catalogue import request


def _hosts():
    isolated = aggregate('tenant-x', filter_tenant_id='X')
    return [host('HostA'), host('HostB', aggregates=[isolated])]


def test_isolated_tenant_may_use_both_hosts():
    assert passing(mod.AggregateMultiTenancyIsolation(), _hosts(),
                   request(project_id='X')) == ['HostA', 'HostB']


def test_other_tenant_only_gets_the_shared_host():
    flt = mod.AggregateMultiTenancyIsolation()
    assert passing(flt, _hosts(), request(project_id='Y')) == ['HostA']
    assert 'project Y' in flt.rejection_reason(_hosts()[1],
                                               request(project_id='Y'))


def test_no_project_is_kept_off_isolated_hosts():
    assert passing(mod.AggregateMultiTenancyIsolation(), _hosts(),
                   request()) == ['HostA']


def test_comma_lists_and_suffixed_keys():
    agg = aggregate(filter_tenant_id='a, b', filter_tenant_id_2='c',
                    other='d')
    hosts = [host('h', aggregates=[agg])]
    flt = mod.AggregateMultiTenancyIsolation()
    for project in ('a', 'b', 'c'):
        assert passing(flt, hosts, request(project_id=project)) == ['h']
    assert passing(flt, hosts, request(project_id='d')) == []


def test_tenants_of_several_aggregates_add_up():
    hosts = [host('h', aggregates=[aggregate(filter_tenant_id='a'),
                                   aggregate(filter_tenant_id='b')])]
    flt = mod.AggregateMultiTenancyIsolation()
    assert passing(flt, hosts, request(project_id='b')) == ['h']
    assert flt.run_filter_once_per_request
