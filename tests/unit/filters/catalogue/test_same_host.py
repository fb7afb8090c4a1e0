"""SameHostFilter: the guide's two-uuid example, decided as nova does."""

from scheduler.filters import same_host as mod
from tests.unit.filters.catalogue import host
from tests.unit.filters.catalogue import passing
from tests.unit.filters.catalogue import request

UUID1 = 'a0cf03a5-d921-4877-bb5c-86d26cf818e1'
UUID2 = '8c19174f-4220-44f0-824a-cd1eeef10287'


def test_host_running_all_the_instances():
    hosts = [host('h1', instance_uuids=[UUID1, UUID2, 'x']),
             host('h3')]
    spec = request(hints={'same_host': [UUID1, UUID2]})
    flt = mod.SameHostFilter()
    assert passing(flt, hosts, spec) == ['h1']
    assert UUID2 in flt.rejection_reason(hosts[1], spec)


def test_a_host_running_any_named_instance_passes_as_in_nova():
    # nova's SameHostFilter passes a host whose instances overlap the
    # hint's (utils.list_overlap != 0): one of them is enough.
    hosts = [host('h1', instance_uuids=[UUID1]),
             host('h2', instance_uuids=[UUID2, 'x']), host('h3')]
    spec = request(hints={'same_host': [UUID1, UUID2]})
    assert passing(mod.SameHostFilter(), hosts, spec) == ['h1', 'h2']


def test_an_unknown_uuid_does_not_hide_the_host_of_a_known_one():
    hosts = [host('h1', instance_uuids=[UUID1]), host('h2')]
    spec = request(hints={'same_host': [UUID1, 'no-such-instance']})
    assert passing(mod.SameHostFilter(), hosts, spec) == ['h1']


def test_no_hint_skips():
    flt = mod.SameHostFilter()
    assert passing(flt, [host('h1')], request()) == ['h1']
