"""SameHostFilter: the guide's two-uuid example."""

from scheduler.filters import same_host as mod
from tests.unit.filters.catalogue import host
from tests.unit.filters.catalogue import passing
from tests.unit.filters.catalogue import request

UUID1 = 'a0cf03a5-d921-4877-bb5c-86d26cf818e1'
UUID2 = '8c19174f-4220-44f0-824a-cd1eeef10287'


def test_host_running_all_the_instances():
    hosts = [host('h1', instance_uuids=[UUID1, UUID2, 'x']),
             host('h2', instance_uuids=[UUID1]), host('h3')]
    spec = request(hints={'same_host': [UUID1, UUID2]})
    flt = mod.SameHostFilter()
    assert passing(flt, hosts, spec) == ['h1']
    assert UUID2 in flt.rejection_reason(hosts[1], spec)


def test_instances_on_different_hosts_fit_nowhere():
    hosts = [host('h1', instance_uuids=[UUID1]),
             host('h2', instance_uuids=[UUID2])]
    spec = request(hints={'same_host': [UUID1, UUID2]})
    assert passing(mod.SameHostFilter(), hosts, spec) == []


def test_no_hint_skips():
    flt = mod.SameHostFilter()
    assert passing(flt, [host('h1')], request()) == ['h1']
