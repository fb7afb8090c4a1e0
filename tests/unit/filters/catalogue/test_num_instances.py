"""NumInstancesFilter: fewer than max_instances_per_host instances."""

from scheduler.filters import num_instances as mod
from tests.unit.filters.catalogue import host
from tests.unit.filters.catalogue import passing
from tests.unit.filters.catalogue import request


def test_default_limit_is_fifty():
    hosts = [host('a', num_instances=49), host('b', num_instances=50)]
    flt = mod.NumInstancesFilter()
    assert passing(flt, hosts, request()) == ['a']
    assert '50 instances >= max_instances_per_host 50' == \
        flt.rejection_reason(hosts[1], request())


def test_option(conf):
    conf.config(max_instances_per_host=1, group='filter_scheduler')
    h = host('a')
    flt = mod.NumInstancesFilter()
    assert passing(flt, [h], request()) == ['a']
    h.consume_from_request(request())
    assert passing(flt, [h], request()) == []
