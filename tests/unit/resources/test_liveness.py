"""Up, down and forced down, from a clock a test can set."""

import pytest

from scheduler.filters import compute
from scheduler import host_manager
from scheduler.resources import liveness
from tests.unit import fixtures


@pytest.fixture
def clock():
    now = [1_000_000.0]
    liveness.set_clock(lambda: now[0])
    yield now
    liveness.set_clock(None)


def test_a_test_states_a_report_age(clock, conf):
    conf.config(service_down_time=60, group='scheduler')
    host = fixtures.host('h1')          # received "now" by the fake clock
    assert host.received_at == 1_000_000.0
    clock[0] += 60
    assert host.is_up() and host.seconds_since_report() == 60
    assert liveness.state_name(host) == 'up'
    clock[0] += 1
    assert not host.is_up()
    assert liveness.state_name(host) == 'down'
    assert compute.ComputeFilter().filter_all([host], None) == []


def test_forced_down_is_distinct_from_a_stale_report(clock):
    host = fixtures.host('h1', forced_down=True)
    assert not host.is_up()
    assert liveness.state_name(host) == 'forced down'
    flt = compute.ComputeFilter()
    assert flt.filter_all([host], None) == []
    assert not flt.host_passes(host, None)
    assert flt.rejection_reason(host, None) == \
        'compute service forced down by an operator'


def test_host_manager_reads_the_same_clock(clock, conf):
    conf.config(service_down_time=60, group='scheduler')
    hm = host_manager.HostManager(inventory=object())
    hm.update_from_report(fixtures.report('h1'))
    hm.update_from_report(fixtures.report('h2', forced_down=True))
    assert [s.host for s in hm.get_up_host_states()] == ['h1']
    clock[0] += 61
    assert hm.get_up_host_states() == []
    assert hm.check_down_hosts() == [('h1', 'h1'), ('h2', 'h2')]
