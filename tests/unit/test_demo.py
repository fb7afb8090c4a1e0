"""scheduler-demo: the whole scenario as a process, and its checks alone."""

import os
import subprocess
import sys
import time

import pytest

from scheduler import exception
from scheduler import objects
from tests.unit import fixtures


def _command() -> list:
    script = os.path.join(os.path.dirname(sys.executable), 'scheduler-demo')
    if os.access(script, os.X_OK):
        return [script]
    return [sys.executable, '-m', 'scheduler.cmd.demo']


def test_demo_runs_every_driver_and_exits_0():
    started = time.monotonic()
    proc = subprocess.run(_command(), stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=180)
    elapsed = time.monotonic() - started
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
    assert elapsed < 60


def test_demo_takes_a_config_file_and_stays_in_process(tmp_path):
    """A config file without transport_url keeps the demo on fake://."""
    conf_file = tmp_path / 'demo.conf'
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

@pytest.fixture(scope='module')
def demo():
    """scheduler.cmd.demo, imported without greening this test process.

    Importing ``scheduler.cmd`` monkey-patches the process for eventlet;
    the rest of the test run must not change under the other tests.
    """
    return fixtures.import_unpatched('scheduler.cmd.demo')


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
def caller(demo):
    spec = demo.fleet_mod.parse(demo.DEMO_FLEET)
    made = demo.Caller('filter_scheduler', None, FakeObserver(), spec)
    return made


def test_every_driver_has_a_scenario_with_a_cast_and_a_termination(demo):
    for driver in demo.DRIVERS:
        hows = [step.how for step in demo.scenario(driver)]
        assert demo.RUN in hows and hows[-1] == demo.TERMINATE
    ip_steps = demo.scenario('ip_scheduler')
    assert {s.remote.split('.')[0] for s in ip_steps if s.remote} == {
        '10', '192'}


def test_demo_fleet_has_two_zones_and_the_ip_prefixes(demo):
    spec = demo.fleet_mod.parse(demo.DEMO_FLEET)
    assert len(spec.hosts) == 50
    assert ({spec.availability_zone(h.name) for h in spec.hosts}
            == {'az1', 'az2'})
    assert {'doc', 'ops', 'dev'} <= {h.name.split('-')[0]
                                     for h in spec.hosts}


def test_a_host_in_the_wrong_zone_fails_the_check(demo, caller):
    caller.api = FakeAPI(lambda spec, uuids: [[_selection('doc-001',
                                                          'az1')]])
    caller.run([demo.Step('small in az2', zone='az2',
                          check=demo.in_zone('az2'))])
    assert caller.failures == [
        'filter_scheduler, small in az2: in zone az1, not az2']
    assert caller.rows[0]['result'] == 'FAILED: in zone az1, not az2'


def test_missing_alternates_fail_the_check(demo, caller):
    caller.api = FakeAPI(lambda spec, uuids: [[_selection('doc-001', 'az1')]
                                              for _ in uuids])
    caller.run([demo.Step('two', num=2, alternates=True,
                          expect_alternates=True)])
    assert len(caller.failures) == 2
    assert caller.placed == 2


def test_expected_no_valid_host(demo, caller):
    def refuse(spec, uuids):
        raise exception.NoValidHost(reason='Filter results: RamFilter: 5 -> 0')
    caller.api = FakeAPI(refuse)
    caller.run([demo.Step('huge', 'x.huge', outcome=demo.NO_VALID_HOST,
                          reason_has='Filter results')])
    assert caller.failures == []
    assert caller.expected_errors == 1
    assert 'RamFilter: 5 -> 0' in caller.notes[0]


def test_no_valid_host_without_the_filter_walk_fails(demo, caller):
    def refuse(spec, uuids):
        raise exception.NoValidHost(reason='none')
    caller.api = FakeAPI(refuse)
    caller.run([demo.Step('huge', 'x.huge', outcome=demo.NO_VALID_HOST,
                          reason_has='Filter results'),
                demo.Step('small')])
    assert len(caller.failures) == 2


def test_placing_what_cannot_fit_fails(demo, caller):
    caller.api = FakeAPI(lambda spec, uuids: [[_selection('big-001',
                                                          'az1')]])
    caller.run([demo.Step('huge', 'x.huge', outcome=demo.NO_VALID_HOST)])
    assert caller.failures == [
        'filter_scheduler, huge: placed, expected NoValidHost']


def test_cast_then_terminate(demo, caller, monkeypatch):
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
    caller.run([demo.Step('two', num=2, how=demo.RUN,
                          check=demo.named('ops')),
                demo.Step('terminate', how=demo.TERMINATE)])
    assert caller.failures == []
    assert [r['result'] for r in caller.rows] == [
        'ok: run_instance received by ops-001'] * 2 + ['ok: terminated'] * 2
    assert [h for h, _u in terminated] == ['ops-001', 'ops-001']


def test_a_cast_nobody_acts_on_fails(demo, caller, monkeypatch):
    monkeypatch.setattr(demo, 'CAST_TIMEOUT', 0.2)
    caller.api = FakeAPI(None)
    caller.run([demo.Step('lost', how=demo.RUN),
                demo.Step('refused', 'x.huge', how=demo.RUN,
                          outcome=demo.REFUSED)])
    assert caller.failures == [
        'filter_scheduler, lost: 0 of 1 instances running after 0.2 s',
        'filter_scheduler, refused: no compute reported a failed build']
