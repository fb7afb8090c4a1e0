"""scheduler-demo: the whole scenario as a process, and its checks alone."""

import os
import subprocess
import sys

import pytest

from scheduler import exception
from scheduler import objects
from scheduler.demo import caller as demo_caller
from scheduler.demo import scenario as scenarios
from scheduler.simulator import fleet as fleet_mod


def _command() -> list:
    script = os.path.join(os.path.dirname(sys.executable), 'scheduler-demo')
    if os.access(script, os.X_OK):
        return [script]
    return [sys.executable, '-m', 'scheduler.cmd.demo']


def test_demo_runs_every_driver_and_exits_0():
    proc = subprocess.run(_command(), stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    for driver in ('filter_scheduler', 'chance_scheduler', 'ip_scheduler'):
        assert '== %s ==' % driver in out
    assert 'FAILED' not in out
    assert 'Every check passed: 3 drivers' in out
    assert 'run_instance received by' in out
    assert 'ok: NoValidHost, as expected' in out
    assert 'Filter results: ComputeFilter: 50 -> 50' in out
    assert "prefix 'dev' for requests from 192.0.2.10" in out
    assert 'ok: refused by the compute, as expected' in out
    assert 'ok: terminated' in out
    # Quiet by default: no log lines at all.
    assert proc.stderr.strip() == ''


def test_demo_takes_a_config_file_and_stays_in_process(tmp_path):
    """A config file without transport_url keeps the demo on fake://."""
    conf_file = tmp_path / 'scenarios.conf'
    conf_file.write_text('[filter_scheduler]\nhost_subset_size = 2\n')
    proc = subprocess.run(
        _command() + ['--config-file', str(conf_file), '--driver',
                      'filter_scheduler'],
        stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert 'fake:// in this process' in proc.stdout
    assert 'Every check passed: 1 drivers' in proc.stdout


def test_demo_fails_fast_without_a_broker():
    proc = subprocess.run(
        _command() + ['--transport-url', 'rabbit://guest:guest@127.0.0.1:9/',
                      '--driver', 'chance_scheduler'],
        stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=120)
    assert proc.returncode == 1
    assert 'cannot reach the broker at 127.0.0.1:9' in proc.stdout
    assert '***@127.0.0.1:9' in proc.stdout
    assert 'guest:guest' not in proc.stdout


# -- the checks, with stand-ins for the bus ----------------------------------

class FakeAPI:
    """Answers select_destinations with ``answer(spec, uuids)``."""

    def __init__(self, answer):
        self.answer = answer
        self.casts = []

    def select_destinations(self, ctxt, spec, uuids, return_objects=True,
                            return_alternates=False):
        return self.answer(spec, uuids)

    def schedule_run_instance(self, ctxt, spec, uuids):
        self.casts.append(list(uuids))


class FakeObserver:

    def __init__(self):
        self.running = {}
        self.failed = {}

    def placements(self, uuids):
        return {u: h for u, h in self.running.items() if u in uuids}

    def failed_builds(self):
        return dict(self.failed)


def _selection(host, zone, uuid=None):
    return objects.Selection(service_host=host, nodename=host,
                             compute_node_uuid=None, instance_uuid=uuid,
                             limits=None, availability_zone=zone,
                             weight=None)


@pytest.fixture
def caller():
    spec = fleet_mod.parse(scenarios.DEMO_FLEET)
    made = demo_caller.Caller('filter_scheduler', None, FakeObserver(),
                              spec)
    return made


def test_every_driver_has_a_scenario_with_a_cast_and_a_termination():
    for driver in scenarios.DRIVERS:
        hows = [step.how for step in scenarios.scenario(driver)]
        assert scenarios.RUN in hows and hows[-1] == scenarios.TERMINATE
    ip_steps = scenarios.scenario('ip_scheduler')
    assert {s.remote.split('.')[0] for s in ip_steps if s.remote} == {
        '10', '192'}


def test_demo_fleet_has_two_zones_and_the_ip_prefixes():
    spec = fleet_mod.parse(scenarios.DEMO_FLEET)
    assert len(spec.hosts) == 50
    assert ({spec.availability_zone(h.name) for h in spec.hosts}
            == {'az1', 'az2'})
    assert {'doc', 'ops', 'dev'} <= {h.name.split('-')[0]
                                     for h in spec.hosts}


def test_a_host_in_the_wrong_zone_fails_the_check(caller):
    caller.api = FakeAPI(lambda spec, uuids: [[_selection('doc-001',
                                                          'az1')]])
    caller.run([scenarios.Step('small in az2', zone='az2',
                               check=scenarios.in_zone('az2'))])
    assert caller.failures == [
        'filter_scheduler, small in az2: in zone az1, not az2']
    assert caller.rows[0]['result'] == 'FAILED: in zone az1, not az2'


def test_missing_alternates_fail_the_check(caller):
    caller.api = FakeAPI(lambda spec, uuids: [[_selection('doc-001', 'az1')]
                                              for _ in uuids])
    caller.run([scenarios.Step('two', num=2, alternates=True,
                               expect_alternates=True)])
    assert len(caller.failures) == 2
    assert caller.placed == 2


def test_expected_no_valid_host(caller):
    def refuse(spec, uuids):
        raise exception.NoValidHost(reason='Filter results: RamFilter: 5 -> 0')
    caller.api = FakeAPI(refuse)
    caller.run([scenarios.Step('huge', 'x.huge',
                               outcome=scenarios.NO_VALID_HOST,
                               reason_has='Filter results')])
    assert caller.failures == []
    assert caller.expected_errors == 1
    assert 'RamFilter: 5 -> 0' in caller.notes[0]


def test_no_valid_host_without_the_filter_walk_fails(caller):
    def refuse(spec, uuids):
        raise exception.NoValidHost(reason='none')
    caller.api = FakeAPI(refuse)
    caller.run([scenarios.Step('huge', 'x.huge',
                               outcome=scenarios.NO_VALID_HOST,
                               reason_has='Filter results'),
                scenarios.Step('small')])
    assert len(caller.failures) == 2


def test_placing_what_cannot_fit_fails(caller):
    caller.api = FakeAPI(lambda spec, uuids: [[_selection('big-001',
                                                          'az1')]])
    caller.run(
        [scenarios.Step('huge', 'x.huge', outcome=scenarios.NO_VALID_HOST)])
    assert caller.failures == [
        'filter_scheduler, huge: placed, expected NoValidHost']


def test_cast_then_terminate(caller, monkeypatch):
    caller.api = FakeAPI(None)
    terminated = []

    class Computes:
        def terminate_instance(self, ctxt, host, uuid):
            terminated.append((host, uuid))
            caller.observer.running.pop(uuid)

    caller.compute_api = Computes()
    monkeypatch.setattr(caller.api, 'schedule_run_instance',
                        lambda ctxt, spec, uuids: caller.observer.running
                        .update({u: 'ops-001' for u in uuids}))
    caller.run([scenarios.Step('two', num=2, how=scenarios.RUN,
                               check=scenarios.named('ops')),
                scenarios.Step('terminate', how=scenarios.TERMINATE)])
    assert caller.failures == []
    assert [r['result'] for r in caller.rows] == [
        'ok: run_instance received by ops-001'] * 2 + ['ok: terminated'] * 2
    assert [h for h, _u in terminated] == ['ops-001', 'ops-001']


def test_a_cast_nobody_acts_on_fails(caller, monkeypatch):
    monkeypatch.setattr(scenarios, 'CAST_TIMEOUT', 0.2)
    caller.api = FakeAPI(None)
    caller.run([scenarios.Step('lost', how=scenarios.RUN),
                scenarios.Step('refused', 'x.huge', how=scenarios.RUN,
                               outcome=scenarios.REFUSED)])
    assert caller.failures == [
        'filter_scheduler, lost: 0 of 1 instances running after 0.2 s',
        'filter_scheduler, refused: no compute reported a failed build']


def test_the_demo_over_rabbitmq_leaves_no_queue_for_long(conf, tmp_path):
    # Reply and fanout queues outlive their process: the demo's go half
    # a minute after it stops, not oslo.messaging's 30 minutes.
    from oslo_config import cfg

    from scheduler.demo import buses
    from scheduler import rpc
    bus = buses.RabbitBus('rabbit://guest:guest@127.0.0.1:5672/',
                          str(tmp_path), 'tag', debug=False)
    try:
        ttl = bus.TRANSIENT_QUEUES_TTL
        assert ttl <= 60
        assert cfg.CONF.oslo_messaging_rabbit.rabbit_transient_queues_ttl \
            == ttl
        with open(bus._write_config('filter_scheduler')) as f:
            assert 'rabbit_transient_queues_ttl = %d\n' % ttl in f.read()
    finally:
        rpc.cleanup()
