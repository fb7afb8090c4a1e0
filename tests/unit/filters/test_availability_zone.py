"""AvailabilityZoneFilter: zones come from aggregates' metadata."""

from scheduler.filters import availability_zone
from tests.unit import fixtures

AGGS = [fixtures.aggregate('rack1', ['h1'], zone='az1'),
        fixtures.aggregate('rack2', ['h2'], zone='az2'),
        fixtures.aggregate('gpus', ['h1', 'h3'])]     # no zone


def _hosts():
    return fixtures.hosts(fixtures.report('h1'), fixtures.report('h2'),
                          fixtures.report('h3'), aggregates=AGGS)


def _passing(zone):
    spec = fixtures.request(availability_zone=zone)
    return [h.host for h in availability_zone.AvailabilityZoneFilter()
            .filter_all(_hosts(), spec)]


def test_no_zone_asked_any_host_passes():
    assert _passing(None) == ['h1', 'h2', 'h3']


def test_only_hosts_of_the_zone_pass():
    assert _passing('az1') == ['h1']
    assert _passing('az2') == ['h2']
    assert _passing('az9') == []


def test_hosts_in_no_zone_are_in_the_default_zone(conf):
    assert _passing('nova') == ['h3']
    conf.config(default_availability_zone='internal')
    assert _passing('internal') == ['h3']
    assert _passing('nova') == []


def test_host_passes_agrees_with_filter_all():
    flt = availability_zone.AvailabilityZoneFilter()
    h1, h2, h3 = _hosts()
    spec = fixtures.request(availability_zone='az1')
    assert [bool(flt.host_passes(h, spec)) for h in (h1, h2, h3)] == \
        [True, False, False]


def test_rejection_reason_names_both_zones():
    h2 = _hosts()[1]
    assert availability_zone.AvailabilityZoneFilter().rejection_reason(
        h2, fixtures.request(availability_zone='az1')) == \
        'in zone(s) az2, not in requested zone az1'
