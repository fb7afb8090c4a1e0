"""A time no compute report could reach the schedulers is not counted in
any host's age: a broker outage, or every scheduler stopped."""

import pytest

from scheduler import context
from scheduler import hearing
from scheduler import host_manager
from scheduler import manager as manager_mod
from scheduler import rpc
from scheduler.resources import liveness
from tests.unit import fixtures

START = 1_000_000.0


@pytest.fixture
def clock(conf):
    conf.config(service_down_time=60, report_interval=10,
                periodic_task_interval=10, group='scheduler')
    now = [START]
    liveness.set_clock(lambda: now[0])
    yield now
    liveness.set_clock(None)


def _up(hm) -> list:
    return sorted(s.host for s in hm.get_up_host_states())


class _Broker:
    """A probe the test answers; counts the probes."""

    def __init__(self):
        self.reachable = True
        self.probes = 0

    def __call__(self) -> bool:
        self.probes += 1
        return self.reachable


def test_a_broker_outage_is_not_counted_in_a_hosts_age(clock):
    hm = host_manager.HostManager(inventory=object())
    hm.update_from_report(fixtures.report('h1'))
    broker = _Broker()
    ears = hearing.Hearing(probe=broker, last_report=lambda: None)
    clock[0] = START + 5
    ears.check()
    broker.reachable = False
    clock[0] = START + 10
    ears.check()
    assert liveness.is_deaf()
    # Five minutes without a broker: nobody could report, nobody could
    # ask for a placement.
    clock[0] = START + 300
    assert _up(hm) == ['h1']
    broker.reachable = True
    ears.check()
    assert not liveness.is_deaf()
    # h1 was heard 5 s before the outage: it has 55 s left to report.
    clock[0] = START + 355
    assert _up(hm) == ['h1']
    hm.update_from_report(fixtures.report('h2'))
    clock[0] = START + 356
    assert _up(hm) == ['h2']
    assert hm.check_down_hosts() == [('h1', 'h1')]
    # Once every host has had service_down_time to report, the outage
    # is forgotten: h2 is judged by its own silence.
    clock[0] = START + 355 + 60
    assert _up(hm) == ['h2']
    clock[0] = START + 355 + 61
    assert _up(hm) == []


def test_computes_that_stop_while_the_broker_answers_go_down(clock):
    hm = host_manager.HostManager(inventory=object())
    hm.update_from_report(fixtures.report('h1'))
    broker = _Broker()
    ears = hearing.Hearing(probe=broker, last_report=lambda: None)
    for step in range(1, 8):
        clock[0] = START + 10 * step
        ears.check()
    assert broker.probes == 7 and not liveness.is_deaf()
    assert _up(hm) == []


def test_a_worker_taking_reports_does_not_probe_the_broker(clock):
    broker = _Broker()
    ears = hearing.Hearing(probe=broker, last_report=lambda: clock[0] - 1)
    for step in range(1, 4):
        clock[0] = START + 10 * step
        ears.check()
    assert broker.probes == 0


def test_a_deployment_started_again_after_a_long_stop_keeps_its_fleet(
        clock, inventory):
    before = host_manager.HostManager()
    before.load_from_inventory()
    before.update_from_report(fixtures.report('h1'))
    before.update_from_report(fixtures.report('h2'))
    before.flush()
    # Every scheduler stopped for ten minutes; the computes' reports of
    # that time were lost.
    clock[0] = START + 600
    after = host_manager.HostManager()
    after.load_from_inventory()
    assert _up(after) == ['h1', 'h2']
    clock[0] = START + 660
    assert _up(after) == ['h1', 'h2']
    clock[0] = START + 661
    assert _up(after) == []


def test_a_worker_started_beside_live_ones_grants_nothing(clock, inventory):
    before = host_manager.HostManager()
    before.load_from_inventory()
    before.update_from_report(fixtures.report('h1'))
    before.flush()
    clock[0] = START + 15
    after = host_manager.HostManager()
    after.load_from_inventory()
    assert not liveness.is_deaf()
    clock[0] = START + 61
    assert _up(after) == []


def test_the_managers_periodic_task_probes_the_broker(
        clock, monkeypatch):
    monkeypatch.setattr(rpc, 'broker_reachable', lambda timeout: False)
    manager = manager_mod.SchedulerManager()
    clock[0] = START + 10
    manager._watch_hearing(context.get_admin_context())
    assert liveness.is_deaf()


# -- a worker without a report turn takes the report workers' word -----


def test_a_worker_without_the_turn_does_not_probe_while_the_holder_hears(
        clock):
    broker = _Broker()
    ears = hearing.Hearing(probe=broker, last_report=lambda: None,
                           vouched=lambda: clock[0] - 2)
    for step in range(1, 8):
        clock[0] = START + 10 * step
        ears.check()
    assert broker.probes == 0 and not liveness.is_deaf()


def test_the_holder_s_word_probed_in_a_silent_fleet_is_enough(clock):
    """The holder takes no report either: it probes at its own periodic
    checks, whatever their phase against this worker's."""
    broker = _Broker()
    holder_probed = [START]
    ears = hearing.Hearing(probe=broker, last_report=lambda: None,
                           vouched=lambda: holder_probed[0])
    for step in range(1, 8):
        clock[0] = START + 10 * step + 0.5
        ears.check()
        holder_probed[0] = START + 10 * step + 0.9
    assert broker.probes == 0


def test_a_worker_probes_once_the_holder_s_word_is_old(clock):
    """The holder was killed (or is stuck): its last word ages."""
    broker = _Broker()
    ears = hearing.Hearing(probe=broker, last_report=lambda: None,
                           vouched=lambda: START)
    clock[0] = START + 10
    ears.check()
    assert broker.probes == 0
    clock[0] = START + hearing.vouch_window() + 1
    ears.check()
    assert broker.probes == 1


def test_an_outage_heard_through_the_holder_s_word_is_credited(clock):
    """The broker goes: the holder's word stops at its last report; this
    worker goes deaf from there, and hears again with the holder."""
    hm = host_manager.HostManager(inventory=object())
    hm.update_from_report(fixtures.report('h1'))
    broker = _Broker()
    holder = [START + 5]
    ears = hearing.Hearing(probe=broker, last_report=lambda: None,
                           vouched=lambda: holder[0])
    clock[0] = START + 10
    ears.check()
    broker.reachable = False
    clock[0] = START + 20
    ears.check()
    assert not liveness.is_deaf()
    clock[0] = START + 30
    ears.check()
    assert liveness.is_deaf() and broker.probes == 1
    clock[0] = START + 300
    assert _up(hm) == ['h1']
    # Still down: the old word does not end the deafness.
    ears.check()
    assert liveness.is_deaf()
    broker.reachable = True
    holder[0] = START + 301
    clock[0] = START + 302
    ears.check()
    assert not liveness.is_deaf() and broker.probes == 2
    # h1 was heard 5 s before the last word: 55 s left once heard again.
    clock[0] = START + 301 + 54
    assert _up(hm) == ['h1']
    clock[0] = START + 301 + 56
    assert _up(hm) == []


def test_a_report_worker_publishes_what_it_last_heard(clock):
    taken = [None]
    broker = _Broker()
    ears = hearing.Hearing(probe=broker, last_report=lambda: taken[0])
    assert ears.heard_at == START
    clock[0] = START + 10
    ears.check()
    assert ears.heard_at == START + 10
    taken[0] = START + 12
    assert ears.heard_at == START + 12
    broker.reachable = False
    clock[0] = START + 30
    ears.check()
    ears.check()
    assert ears.heard_at == START + 12
