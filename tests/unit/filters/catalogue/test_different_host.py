"""DifferentHostFilter: the guide's two-uuid example."""

from scheduler.filters import different_host as mod
from tests.unit.filters.catalogue import host
from tests.unit.filters.catalogue import passing
from tests.unit.filters.catalogue import request

UUID1 = 'a0cf03a5-d921-4877-bb5c-86d26cf818e1'
UUID2 = '8c19174f-4220-44f0-824a-cd1eeef10287'


def _hosts():
    return [host('h1', instance_uuids=[UUID1]),
            host('h2', instance_uuids=[UUID2, 'other']),
            host('h3', instance_uuids=['other'])]


def test_avoids_hosts_of_the_named_instances():
    spec = request(hints={'different_host': [UUID1, UUID2]})
    flt = mod.DifferentHostFilter()
    assert passing(flt, _hosts(), spec) == ['h3']
    assert UUID2 in flt.rejection_reason(_hosts()[1], spec)


def test_single_uuid():
    spec = request(hints={'different_host': UUID1})
    assert passing(mod.DifferentHostFilter(), _hosts(), spec) == ['h2',
                                                                  'h3']


def test_no_hint_skips():
    flt = mod.DifferentHostFilter()
    assert flt.prepare(request()) is mod.base.SKIP
    assert passing(flt, _hosts(), request()) == ['h1', 'h2', 'h3']
    assert flt.run_filter_once_per_request
