"""ComputeFilter: only hosts whose compute is up and enabled get instances."""

import time

from scheduler.filters import compute
from tests.unit import fixtures


def _filter(hosts, spec=None):
    return compute.ComputeFilter().filter_all(hosts, spec or
                                              fixtures.request())


def test_a_host_that_just_reported_passes():
    host = fixtures.host('h1')
    assert compute.ComputeFilter().host_passes(host, fixtures.request())
    assert _filter([host]) == [host]


def test_a_disabled_host_is_rejected_with_its_reason():
    host = fixtures.host('h1', disabled=True,
                         disabled_reason='maintenance')
    flt = compute.ComputeFilter()
    assert not flt.host_passes(host, fixtures.request())
    assert _filter([host]) == []
    assert flt.rejection_reason(host, fixtures.request()) == \
        'compute service disabled (maintenance)'


def test_a_disabled_host_without_reason():
    host = fixtures.host('h1', disabled=True)
    assert compute.ComputeFilter().rejection_reason(
        host, fixtures.request()) == \
        'compute service disabled (no reason given)'


def test_a_silent_host_is_rejected_after_service_down_time(conf):
    conf.config(service_down_time=60, group='scheduler')
    fresh, silent = fixtures.hosts(fixtures.report('fresh'),
                                   fixtures.report('silent'))
    silent.received_at = time.time() - 120
    assert _filter([fresh, silent]) == [fresh]
    flt = compute.ComputeFilter()
    assert not flt.host_passes(silent, fixtures.request())
    reason = flt.rejection_reason(silent, fixtures.request())
    assert reason.startswith('no report for 12')
    assert reason.endswith('(service_down_time 60 s)')


def test_service_down_time_is_read_on_each_request(conf):
    host = fixtures.host('h1')
    host.received_at = time.time() - 120
    conf.config(service_down_time=60, group='scheduler')
    assert _filter([host]) == []
    conf.config(service_down_time=300, group='scheduler')
    assert _filter([host]) == [host]


def test_runs_once_per_request():
    flt = compute.ComputeFilter()
    assert flt.run_filter_for_index(0)
    assert not flt.run_filter_for_index(1)
