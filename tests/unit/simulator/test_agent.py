"""Simulated compute agents, called directly (no bus) and as a process."""

import inspect
import os
import random
import signal
import subprocess
import sys
import time
import types

import pytest

from scheduler import context as ctx_mod
from scheduler import objects
from scheduler.simulator import agent
from scheduler.simulator import fleet

UUID1 = 'a1a1a1a1-0000-4000-8000-000000000001'
UUID2 = 'a1a1a1a1-0000-4000-8000-000000000002'


class RecordingSchedulerAPI:
    """Stands in for SchedulerAPI: remembers every cast."""

    def __init__(self):
        self.casts = []

    def _record(self, method, *args):
        self.casts.append((method,) + args)

    def update_service_capabilities(self, ctxt, host_state):
        self._record('update_service_capabilities', host_state)

    def update_instance_info(self, ctxt, host_name, instance_uuids):
        self._record('update_instance_info', host_name, list(instance_uuids))

    def delete_instance_info(self, ctxt, host_name, instance_uuid):
        self._record('delete_instance_info', host_name, instance_uuid)

    def update_aggregates(self, ctxt, aggregates):
        self._record('update_aggregates', aggregates)

    def methods(self) -> list:
        return [c[0] for c in self.casts]

    def last_state(self):
        return [c[1] for c in self.casts
                if c[0] == 'update_service_capabilities'][-1]


def _spec(memory_mb=0, vcpus=0, root_gb=0, ephemeral_gb=0, swap=0,
          is_bfv=False) -> objects.RequestSpec:
    return objects.RequestSpec(
        flavor=objects.Flavor(memory_mb=memory_mb, vcpus=vcpus,
                              root_gb=root_gb, ephemeral_gb=ephemeral_gb,
                              swap=swap, extra_specs={}),
        num_instances=1, is_bfv=is_bfv)


@pytest.fixture
def api():
    return RecordingSchedulerAPI()


@pytest.fixture
def compute(api):
    host = fleet.uniform(1, prefix='sim', memory_mb=8192, vcpus=4,
                         local_gb=100, cpu_allocation_ratio=2.0,
                         ram_allocation_ratio=1.0,
                         disk_allocation_ratio=1.0).hosts[0]
    return agent.SimulatedCompute(host, api)


@pytest.fixture
def endpoint(compute):
    return agent.ComputeEndpoint(compute)


@pytest.fixture
def ctxt():
    return ctx_mod.RequestContext(user_id='u', project_id='p')


class TestInitialState:

    def test_reported_fields(self, compute):
        state = compute.snapshot()
        assert (state.host, state.nodename) == ('sim-001', 'sim-001')
        assert state.uuid == fleet.host_uuid('sim-001')
        assert state.supported_instances == [['x86_64', 'kvm', 'hvm']]
        assert str(state.host_ip) == '127.1.0.1'
        assert state.updated_at is not None
        assert (state.memory_mb_used, state.num_instances,
                state.failed_builds) == (0, 0, 0)

    def test_ratios_default_to_compute_options(self, conf):
        conf.config(cpu_allocation_ratio=3.0, ram_allocation_ratio=1.25,
                    group='compute')
        host = fleet.uniform(1, disk_allocation_ratio=2.0).hosts[0]
        state = agent.build_host_state(host)
        assert (state.cpu_allocation_ratio, state.ram_allocation_ratio,
                state.disk_allocation_ratio) == (3.0, 1.25, 2.0)

    def test_stats_are_reported_as_the_fleet_says(self):
        spec = fleet.parse({'groups': [{
            'prefix': 'win', 'count': 1,
            'stats': {'num_os_type_windows': 2, 'gpu': True}}]})
        state = agent.build_host_state(spec.hosts[0])
        assert state.stats == {'num_os_type_windows': '2', 'gpu': 'true'}

    def test_disk_available_least_is_reported_and_shrinks(self, api):
        spec = fleet.parse({'groups': [{
            'prefix': 'thin', 'count': 1, 'local_gb': 500,
            'disk_available_least': 120}]})
        compute = agent.SimulatedCompute(spec.hosts[0], api)
        assert compute.snapshot().disk_available_least == 120
        assert compute.run_instance(UUID1, _spec(memory_mb=64, vcpus=1,
                                                 root_gb=20))
        assert api.last_state().disk_available_least == 100
        assert compute.terminate_instance(UUID1)
        assert compute.snapshot().disk_available_least == 120

    def test_disk_available_least_is_not_reported_unless_set(self, compute):
        assert compute.snapshot().disk_available_least is None

    def test_snapshot_survives_the_wire(self, compute):
        primitive = compute.snapshot().obj_to_primitive()
        state = objects.HostState.obj_from_primitive(primitive)
        assert state.host == 'sim-001'
        assert state.cpu_info == {'arch': 'x86_64'}


class TestRunInstance:

    def test_consumes_and_tells_the_scheduler(self, endpoint, compute, api,
                                              ctxt):
        endpoint.run_instance(ctxt, UUID1, 'sim-001',
                              _spec(2048, 2, 10, 5, swap=1),
                              objects.SchedulerLimits.from_dict({}))
        state = compute.state
        assert state.memory_mb_used == 2048
        assert state.vcpus_used == 2
        # Root + ephemeral + swap rounded up to a whole GiB.
        assert state.local_gb_used == 16
        assert state.num_instances == 1
        assert state.instance_uuids == [UUID1]
        assert compute.instances == {UUID1: (2048, 2, 16)}
        assert api.methods() == ['update_instance_info',
                                 'update_service_capabilities']
        assert api.casts[0][1:] == ('sim-001', [UUID1])
        reported = api.last_state()
        assert reported.instance_uuids == [UUID1]
        assert reported.memory_mb_used == 2048
        assert list(compute.received) == [('run_instance', UUID1, True)]

    def test_boot_from_volume_leaves_the_root_disk_out(self, compute):
        assert compute.run_instance(UUID1, _spec(512, 1, 40, 2,
                                                 is_bfv=True))
        assert compute.state.local_gb_used == 2

    def test_refuses_beyond_the_scheduler_limits(self, endpoint, compute,
                                                 api, ctxt, caplog):
        limits = objects.SchedulerLimits.from_dict({'memory_mb': 4096})
        endpoint.run_instance(ctxt, UUID1, 'sim-001', _spec(4096, 1),
                              limits)
        endpoint.run_instance(ctxt, UUID2, 'sim-001', _spec(1024, 1),
                              limits)
        assert list(compute.instances) == [UUID1]
        assert compute.state.memory_mb_used == 4096
        assert compute.state.failed_builds == 1
        assert 'refused instance %s: RAM' % UUID2 in caplog.text
        assert api.methods()[-2:] == ['delete_instance_info',
                                      'update_service_capabilities']
        assert api.casts[-2][1:] == ('sim-001', UUID2)
        assert api.last_state().failed_builds == 1
        assert compute.received[-1] == ('run_instance', UUID2, False)

    @pytest.mark.parametrize('flavor, what', [
        ((8193, 1, 0), 'RAM'),     # 8192 MB x 1.0
        ((1, 9, 0), 'vCPUs'),      # 4 x 2.0
        ((1, 1, 101), 'disk'),     # 100 GB x 1.0
    ])
    def test_without_limits_the_host_totals_and_ratios_apply(
            self, compute, caplog, flavor, what):
        memory_mb, vcpus, root_gb = flavor
        assert not compute.run_instance(UUID1,
                                        _spec(memory_mb, vcpus, root_gb))
        assert '%s: ' % what in caplog.text
        assert compute.state.num_instances == 0

    def test_vcpu_overcommit_within_the_ratio(self, compute):
        assert compute.run_instance(UUID1, _spec(1, 8, 0))
        assert compute.state.vcpus_used == 8

    def test_limits_may_come_as_a_dict(self, compute):
        assert not compute.run_instance(UUID1, _spec(1, 2, 0),
                                        {'vcpu': 1})
        assert compute.run_instance(UUID1, _spec(1, 1, 0), {'vcpu': 1})

    def test_a_successful_build_resets_failed_builds(self, compute):
        compute.run_instance(UUID1, _spec(memory_mb=10 ** 6))
        assert compute.state.failed_builds == 1
        compute.run_instance(UUID2, _spec(memory_mb=1))
        assert compute.state.failed_builds == 0

    def test_same_instance_twice_counts_once(self, compute, api):
        compute.run_instance(UUID1, _spec(1024, 1))
        compute.run_instance(UUID1, _spec(1024, 1))
        assert compute.state.memory_mb_used == 1024
        assert compute.state.num_instances == 1


class TestTerminateInstance:

    def test_frees_and_tells_the_scheduler(self, endpoint, compute, api,
                                           ctxt):
        endpoint.run_instance(ctxt, UUID1, 'sim-001', _spec(2048, 2, 10))
        api.casts.clear()
        endpoint.terminate_instance(ctxt, UUID1)
        state = compute.state
        assert (state.memory_mb_used, state.vcpus_used, state.local_gb_used,
                state.num_instances, state.instance_uuids) == (0, 0, 0, 0, [])
        assert compute.instances == {}
        assert api.methods() == ['delete_instance_info',
                                 'update_service_capabilities']
        assert api.casts[0][1:] == ('sim-001', UUID1)
        assert api.last_state().instance_uuids == []

    def test_unknown_instance(self, compute, api, caplog):
        assert not compute.terminate_instance(UUID2)
        # The scheduler may still hold a claim for it: told all the same.
        assert api.methods() == ['delete_instance_info']
        assert 'has no instance %s' % UUID2 in caplog.text


class TestEndpoint:

    def test_speaks_compute_api_1_1(self):
        assert agent.ComputeEndpoint.target.version == '1.1'
        assert agent.FleetEndpoint.target.version == '1.1'

    def test_only_the_three_casts_are_public(self, endpoint):
        public = {name for name in dir(endpoint)
                  if not name.startswith('_')
                  and inspect.ismethod(getattr(endpoint, name))}
        assert public == {'run_instance', 'terminate_instance',
                          'send_report'}


def _report_all(sim_fleet) -> int:
    ctxt = ctx_mod.get_admin_context()
    return sum(1 for compute in sim_fleet.hosts.values()
               if compute.report(ctxt))


class TestFleet:

    @pytest.fixture
    def sim_fleet(self, api, tmp_path):
        spec = fleet.uniform(3, prefix='sim', availability_zone='az1')
        return agent.Fleet(spec, control_dir=str(tmp_path),
                           scheduler_api=api)

    def test_report_all(self, sim_fleet, api):
        assert _report_all(sim_fleet) == 3
        assert sorted(c[1].host for c in api.casts) == [
            'sim-001', 'sim-002', 'sim-003']

    def test_down_file_silences_a_host_until_removed(self, sim_fleet, api,
                                                     tmp_path, caplog):
        down = tmp_path / 'sim-002.down'
        down.touch()
        assert _report_all(sim_fleet) == 2
        assert 'sim-002' not in {c[1].host for c in api.casts}
        assert 'Host sim-002 is silenced' in caplog.text
        down.unlink()
        assert _report_all(sim_fleet) == 3
        assert 'Host sim-002 is no longer silenced' in caplog.text

    def test_silent_host_still_serves_but_says_nothing(self, sim_fleet,
                                                       api):
        sim_fleet.set_silent('sim-001')
        compute = sim_fleet.hosts['sim-001']
        assert compute.run_instance(UUID1, _spec(512, 1))
        assert compute.state.num_instances == 1
        assert api.casts == []
        sim_fleet.set_silent('sim-001', False)
        assert compute.report()
        assert api.last_state().instance_uuids == [UUID1]

    def test_unknown_host_cannot_be_silenced(self, sim_fleet):
        with pytest.raises(KeyError):
            sim_fleet.set_silent('nope')

    def test_sends_the_fleet_aggregates(self, sim_fleet, api):
        sim_fleet.send_aggregates()
        [(method, aggregates)] = api.casts
        assert method == 'update_aggregates'
        assert [(a.name, a.hosts) for a in aggregates] == [
            ('az1', ['sim-001', 'sim-002', 'sim-003'])]


# -- scheduler-compute-sim as a process ------------------------------------

def _command() -> list:
    script = os.path.join(os.path.dirname(sys.executable),
                          'scheduler-compute-sim')
    if os.access(script, os.X_OK):
        return [script]
    return [sys.executable, '-m', 'scheduler.cmd.compute_sim']


def _wait_for_line(path, text, proc, timeout=60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text():
            return
        if proc.poll() is not None:
            pytest.fail('exited early with %s' % proc.returncode)
        time.sleep(0.1)
    proc.kill()
    pytest.fail('%r not logged within %s s' % (text, timeout))


@pytest.mark.parametrize('signo', [signal.SIGTERM, signal.SIGINT])
def test_process_stops_cleanly_on_signal(tmp_path, signo):
    conf_file = tmp_path / 'sim.conf'
    # No scheduler answers on fake://: the first report's check of its
    # version gives up after rpc_response_timeout (then checks again in
    # the background) before the fleet is up; 1 s, not the 10 s cap.
    conf_file.write_text('[DEFAULT]\ntransport_url = fake://\n'
                         'rpc_response_timeout = 1\n'
                         'state_path = %s\n' % tmp_path)
    log = tmp_path / 'sim.log'
    proc = subprocess.Popen(
        _command() + ['--config-file', str(conf_file), '--hosts', '3',
                      '--prefix', 'sig', '--log-file', str(log)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE)
    _wait_for_line(log, 'Simulating 3 compute host(s)', proc)
    proc.send_signal(signo)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert 'Stopped 3 simulated host(s)' in log.read_text()


def test_process_refuses_a_bad_fleet_file(tmp_path):
    conf_file = tmp_path / 'sim.conf'
    conf_file.write_text('[DEFAULT]\ntransport_url = fake://\n')
    bad = tmp_path / 'fleet.json'
    bad.write_text('{"groups": [{"prefix": "x"}]}')
    proc = subprocess.run(
        _command() + ['--config-file', str(conf_file), '--fleet', str(bad)],
        stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=60)
    assert proc.returncode == 2
    assert "groups[0] (group 'x'): 'count' is a required" in proc.stderr


# -- one endpoint for the whole fleet ---------------------------------------

class TestFleetEndpoint:

    @pytest.fixture
    def sim_fleet(self, api):
        return agent.Fleet(fleet.uniform(2, prefix='fe'), scheduler_api=api)

    def test_run_instance_goes_to_the_node_named(self, sim_fleet, ctxt):
        endpoint = agent.FleetEndpoint(sim_fleet)
        endpoint.run_instance(ctxt, UUID1, 'fe-002', _spec(512, 1))
        assert sim_fleet.hosts['fe-002'].instances
        assert not sim_fleet.hosts['fe-001'].instances

    def test_terminate_finds_the_host_of_the_instance(self, sim_fleet, api,
                                                      ctxt):
        endpoint = agent.FleetEndpoint(sim_fleet)
        endpoint.run_instance(ctxt, UUID1, 'fe-002', _spec(512, 1))
        api.casts.clear()
        endpoint.terminate_instance(ctxt, UUID1)
        assert sim_fleet.hosts['fe-002'].instances == {}
        assert ('delete_instance_info', 'fe-002', UUID1) in api.casts

    def test_unknown_node_or_instance_is_one_warning(self, sim_fleet, api,
                                                     ctxt, caplog):
        endpoint = agent.FleetEndpoint(sim_fleet)
        endpoint.run_instance(ctxt, UUID1, 'elsewhere', _spec(512, 1))
        endpoint.terminate_instance(ctxt, UUID2)
        assert api.casts == []
        assert "names node 'elsewhere'" in caplog.text
        assert 'which no simulated host runs' in caplog.text

    def test_only_the_three_casts_and_the_probe_are_public(
            self, sim_fleet):
        endpoint = agent.FleetEndpoint(sim_fleet)
        public = {name for name in dir(endpoint)
                  if not name.startswith('_')
                  and inspect.ismethod(getattr(endpoint, name))}
        assert public == {'run_instance', 'terminate_instance',
                          'send_report', 'bindings_probe'}


class _Clock:
    """A monotonic clock that moves only when the reporter waits."""

    def __init__(self):
        self.start = self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def process_time(self) -> float:
        return 0.0


class _StopAfter:
    """The fleet's stop event: a wait moves ``clock`` on by what was
    asked, and the event is set ``seconds`` after the start."""

    def __init__(self, clock: _Clock, seconds: float):
        self.clock, self.seconds = clock, seconds

    def is_set(self) -> bool:
        return self.clock.now - self.clock.start >= self.seconds

    def wait(self, timeout: float) -> bool:
        assert timeout > 0, 'the reporter never spins'
        self.clock.now += timeout
        return self.is_set()


class TestReporting:

    def test_reports_are_paced_over_the_interval(self, api, monkeypatch):
        """Run on a clock of its own: the reporter's waits move it, so
        what is checked is where reports fall, not how fast the
        machine is."""
        clock = _Clock()
        monkeypatch.setattr(agent, 'time', clock)
        monkeypatch.setattr(agent, 'random', types.SimpleNamespace(
            Random=lambda: random.Random(7)))
        sim_fleet = agent.Fleet(fleet.uniform(20, prefix='pace'),
                                scheduler_api=api)
        sim_fleet._stopping = _StopAfter(clock, 3.5)
        reports = []
        api.update_service_capabilities = \
            lambda ctxt, state: reports.append((clock.now, state.host))
        sim_fleet._report_loop(1.0)
        first = reports[:20]
        assert len({host for _, host in first}) == 20, 'each host once'
        times = [at for at, _ in first]
        # Spread over the interval, not one burst.
        assert max(times) - min(times) > 0.5
        assert len(set(times)) >= 10
        assert all(at <= clock.start + 1.0 for at in times)
        # Then each host once per interval, give or take the jitter and
        # the reporter's tick.
        by_host: dict = {}
        for at, host in reports:
            by_host.setdefault(host, []).append(at)
        for host, ats in by_host.items():
            assert len(ats) >= 3, host
            for earlier, later in zip(ats, ats[1:]):
                gap = later - earlier
                assert 1.0 - agent.Fleet.JITTER - 1e-9 <= gap <= \
                    1.0 + agent.Fleet.JITTER + agent.Fleet.TICK + 1e-9

    def test_aggregates_wait_for_a_scheduler(self, api, monkeypatch,
                                             caplog):
        spec = fleet.uniform(2, prefix='late', availability_zone='az9')
        sim_fleet = agent.Fleet(spec, scheduler_api=api)
        answers = iter([False, False, True])
        monkeypatch.setattr(sim_fleet, '_scheduler_answers',
                            lambda: next(answers))
        monkeypatch.setattr(sim_fleet, 'PROBE_TIMEOUT', 0)
        sim_fleet._aggregates_loop(0.01)
        [(method, aggregates)] = api.casts
        assert method == 'update_aggregates'
        assert aggregates[0].name == 'az9'
        assert caplog.text.count('No scheduler answered') == 1

    def test_stop_request_ends_start_up_between_hosts(self, api):
        sim_fleet = agent.Fleet(fleet.uniform(50, prefix='halt'),
                                scheduler_api=api)
        sent = []

        def report(ctxt, state):
            sent.append(state.host)
            if len(sent) == 5:
                sim_fleet.request_stop()
        api.update_service_capabilities = report
        sim_fleet._first_reports()
        assert len(sent) == 5
        assert sim_fleet.started == 5


def _refused(tmp_path, *args) -> str:
    """The simulator's stderr for ``args``, which it must refuse (2)."""
    conf_file = tmp_path / 'sim.conf'
    conf_file.write_text('[DEFAULT]\ntransport_url = fake://\n')
    proc = subprocess.run(
        _command() + ['--config-file', str(conf_file)] + list(args),
        stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=60)
    assert proc.returncode == 2
    return proc.stderr


def test_process_refuses_more_reports_than_it_can_send(tmp_path):
    assert ('5000 hosts reporting every 1 s need 5000 reports/s, more '
            'than --max-report-rate 1000: set --report-interval to at '
            'least 5') in _refused(tmp_path, '--hosts', '5000',
                                   '--report-interval', '1')


def test_process_refuses_a_report_interval_of_service_down_time(tmp_path):
    """Hosts reporting every 60 s against a service_down_time of 60 s
    flap down and up: refused before anything starts."""
    err = _refused(tmp_path, '--hosts', '10', '--report-interval', '60')
    assert 'report_interval (60 s) is not below service_down_time (60 s)' \
        in err and 'flapping' in err


def test_process_refuses_no_hosts(tmp_path):
    assert '--hosts must be at least 1' in _refused(tmp_path, '--hosts',
                                                    '0')


def test_process_refuses_a_large_fleet_without_routing_keys(tmp_path):
    assert 'runs one RPC server per simulated host: at most 1000' \
        in _refused(tmp_path, '--hosts', '2000', '--report-interval', '60')


def test_process_stops_promptly_during_start_up(tmp_path):
    conf_file = tmp_path / 'sim.conf'
    conf_file.write_text('[DEFAULT]\ntransport_url = fake://\n'
                         'state_path = %s\n' % tmp_path)
    log = tmp_path / 'sim.log'
    proc = subprocess.Popen(
        _command() + ['--config-file', str(conf_file), '--hosts', '1000',
                      '--report-interval', '20', '--log-file', str(log)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE)
    _wait_for_line(log, 'Starting 1000 simulated host(s) compute-001..'
                   'compute-1000 (name prefix from the default', proc)
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    text = log.read_text()
    assert 'Stopped 1000 simulated host(s)' in text
    assert 'Simulating 1000' not in text, 'stopped before the end of start'


#: ``scheduler-compute-sim`` with a fleet that is interrupted by SIGTERM
#: while holding a lock its own stop takes, as a thread inside
#: ``Event.wait`` holds that event's lock: a handler that stops the fleet
#: or sets an event itself waits on that lock forever.
_SIGNAL_IN_LOCK = '''
import signal, sys, threading
from scheduler.cmd import compute_sim
from scheduler import broker_login, rpc, simulator

handlers = {}
signal.signal = lambda signo, handler: handlers.__setitem__(signo, handler)
busy = threading.Lock()


class Fleet:
    def __init__(self, spec, **kwargs):
        self.hosts = {host.name: host for host in spec.hosts}
        self.fatal = None

    def start(self, transport):
        with busy:
            handlers[signal.SIGTERM](signal.SIGTERM, None)

    def request_stop(self):
        with busy:
            pass

    def stop(self):
        pass


simulator.Fleet = Fleet
broker_login.check = lambda *args, **kwargs: None
rpc.get_transport = lambda *args, **kwargs: None
rpc.cleanup = lambda: None
sys.exit(compute_sim.main(sys.argv[1:]))
'''


@pytest.mark.parametrize('executor', ['eventlet', 'threading'])
def test_process_stops_on_a_signal_that_lands_inside_a_lock(tmp_path,
                                                            executor):
    conf_file = tmp_path / 'sim.conf'
    conf_file.write_text('[DEFAULT]\ntransport_url = fake://\n'
                         'state_path = %s\n' % tmp_path)
    log = tmp_path / 'sim.log'
    env = dict(os.environ, SCHEDULER_EXECUTOR=executor)
    try:
        done = subprocess.run(
            [sys.executable, '-c', _SIGNAL_IN_LOCK, '--config-file',
             str(conf_file), '--hosts', '2', '--prefix', 'sig',
             '--log-file', str(log)],
            stdin=subprocess.DEVNULL, capture_output=True, text=True,
            env=env, timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail('the simulator did not act on SIGTERM: %s'
                    % (log.read_text() if log.exists() else ''))
    assert done.returncode == 0, done.stderr
    text = log.read_text()
    assert 'Caught SIGTERM, stopping' in text
    assert 'Stopped 2 simulated host(s)' in text


class _LivenessAPI(RecordingSchedulerAPI):
    """A SchedulerAPI that can send liveness messages (API 1.6)."""

    def report(self, ctxt, host_state):
        self._record('report', host_state)
        return True

    def report_many(self, ctxt, host_states):
        self._record('report_many', len(host_states))
        return len(host_states)


class TestLivenessOnlyWhenServed:
    """A scheduler that cannot renew a host from its liveness message
    asks the compute for its full report (``send_report``): a host no
    RPC server serves would never hear it, and reconciliation (a
    deletion lost, usage the inventory does not have) would stall."""

    def test_a_host_no_server_serves_sends_full_reports(self, ctxt):
        api = _LivenessAPI()
        host = agent.SimulatedCompute(fleet.uniform(1).hosts[0], api)
        host.report(ctxt)
        assert api.methods() == ['update_service_capabilities']
        agent.ComputeEndpoint(host)
        host.report(ctxt)
        assert api.methods()[-1] == 'report'

    def test_a_fleet_reports_many_once_its_endpoint_serves_them(self, ctxt):
        api = _LivenessAPI()
        sim_fleet = agent.Fleet(fleet.uniform(2, prefix='lv'),
                                scheduler_api=api)
        sim_fleet._report_due(ctxt, ['lv-001', 'lv-002'])
        assert api.methods() == ['update_service_capabilities'] * 2
        agent.FleetEndpoint(sim_fleet)
        sim_fleet._report_due(ctxt, ['lv-001', 'lv-002'])
        assert api.methods()[-1] == 'report_many'


class _AskingAPI(_LivenessAPI):
    def __init__(self):
        super().__init__()
        self.wanted = []

    def want_full_report(self, host, node):
        self.wanted.append((host, node))


def test_an_asked_report_goes_with_the_reporter_not_the_server_thread(
        ctxt, monkeypatch):
    """``send_report`` from a scheduler is answered by the reporter at
    its next tick: answered on the RPC server's threads, a burst of
    questions took a pooled broker connection per concurrent answer."""
    api = _AskingAPI()
    sim_fleet = agent.Fleet(fleet.uniform(3, prefix='ask'),
                            scheduler_api=api)
    endpoint = agent.FleetEndpoint(sim_fleet)
    endpoint.send_report(ctxt, 'ask-002')
    endpoint.send_report(ctxt, 'ask-002')
    assert api.casts == [], 'nothing sent from the server thread'
    assert api.wanted == [('ask-002', 'ask-002')] * 2

    clock = _Clock()
    monkeypatch.setattr(agent, 'time', clock)
    sim_fleet._stopping = _StopAfter(clock, 0.01)
    # Every host's next report is an interval away: only the asked one
    # is due at the first tick, once.
    monkeypatch.setattr(sim_fleet, '_schedule',
                        lambda interval, rng: [(clock.now + 10, name)
                                               for name in sim_fleet.hosts])
    sim_fleet._report_loop(10.0)
    assert api.casts == [('report_many', 1)]
    assert sim_fleet._take_asked() == []


class TestSnapshotOfAnUnchangedHost:
    """A quiet host's report is the same state again: copying the whole
    HostState for each one was most of the simulator's time per report,
    so a copy is made only when the state changed."""

    def test_copied_once_until_the_state_changes(self, compute, ctxt,
                                                 monkeypatch):
        copies = []
        clone = objects.HostState.obj_clone

        def counting_clone(state):
            copies.append(state.host)
            return clone(state)
        monkeypatch.setattr(objects.HostState, 'obj_clone', counting_clone)
        first = compute.snapshot()
        first_at = first.updated_at
        second = compute.snapshot()
        assert len(copies) == 1
        assert second.updated_at >= first_at, 'stamped at each report'
        assert compute.run_instance(UUID1, _spec(memory_mb=1024, vcpus=1))
        assert len(copies) == 2, 'the build made a new copy'
        assert first.memory_mb_used == 0, 'a sent report is not changed'
        assert compute.snapshot().memory_mb_used == 1024
        assert len(copies) == 2
        assert compute.terminate_instance(UUID1)
        assert compute.snapshot().memory_mb_used == 0
        assert len(copies) == 3


class _CpuClock(_Clock):
    """``_Clock`` with a CPU time that moves only when told."""

    cpu = 0.0

    def process_time(self) -> float:
        return self.cpu


class TestRateStatement:
    """The simulator says what report rate it sustains, measured over its
    first report interval, and warns when the fleet needs more."""

    def test_the_line_names_the_need_and_the_rate(self):
        warn, text = agent.rate_statement(10000, 10, 800.0)
        assert warn
        assert text.startswith('10000 hosts every 10 s need 1000 '
                               'reports/s; this process sustains about '
                               '800 reports/s')
        assert 'set --report-interval to at least 13' in text
        warn, text = agent.rate_statement(10000, 10, 5000.0)
        assert not warn
        assert text.startswith('10000 hosts every 10 s need 1000 '
                               'reports/s; this process sustains about '
                               '5000 reports/s')

    def test_late_reports_are_warned_of(self):
        warn, text = agent.rate_statement(100, 10, 5000.0, late=3.0)
        assert warn
        assert 'but reports went up to 3.0 s late' in text
        assert not agent.rate_statement(100, 10, 5000.0, late=0.5)[0]

    def _run(self, monkeypatch, cost: float, caplog,
             stall: float = 0.0) -> list:
        """20 hosts every 1 s, each report taking ``cost`` seconds of
        the reporter's (fake) clock and CPU time, each wait ``stall``
        seconds more than asked; the statement's log records."""
        clock = _CpuClock()
        monkeypatch.setattr(agent, 'time', clock)
        api = _LivenessAPI()

        def report_many(ctxt, states):
            clock.now += cost * len(states)
            clock.cpu += cost * len(states)
            return len(states)
        api.report_many = report_many
        sim_fleet = agent.Fleet(fleet.uniform(20, prefix='rate'),
                                scheduler_api=api)
        agent.FleetEndpoint(sim_fleet)
        sim_fleet._stopping = _StopAfter(clock, 3.5)
        if stall:
            wait = sim_fleet._stopping.wait

            def stalled(timeout):
                clock.now += stall
                return wait(timeout)
            sim_fleet._stopping.wait = stalled
        caplog.set_level('INFO', logger=agent.LOG.logger.name)
        sim_fleet._report_loop(1.0)
        return [r for r in caplog.records if 'this process sustains'
                in r.getMessage()]

    def test_a_fleet_beyond_the_rate_is_warned_of_once(self, monkeypatch,
                                                       caplog):
        [record] = self._run(monkeypatch, 0.1, caplog)
        assert record.levelname == 'WARNING'
        assert record.getMessage().startswith(
            '20 hosts every 1 s need 20 reports/s; this process sustains '
            'about 10 reports/s')

    def test_a_fleet_within_the_rate_is_one_info_line(self, monkeypatch,
                                                      caplog):
        [record] = self._run(monkeypatch, 0.001, caplog)
        assert record.levelname == 'INFO'
        assert 'sustains about 1000 reports/s' in record.getMessage()

    def test_a_starved_process_is_warned_of(self, monkeypatch, caplog):
        [record] = self._run(monkeypatch, 0.001, caplog, stall=0.5)
        assert record.levelname == 'WARNING'
        assert 'sustains about 1000 reports/s' in record.getMessage()
        assert 's late: the machine does not give it the CPU it needs' \
            in record.getMessage()


def test_first_round_follows_the_order_of_the_first_reports(api,
                                                            monkeypatch):
    """The hosts that reported first at start-up report first again: a
    large fleet's start-up takes a while, and a random order left some
    early hosts a whole start-up plus an interval without a report."""
    clock = _Clock()
    monkeypatch.setattr(agent, 'time', clock)
    sim_fleet = agent.Fleet(fleet.uniform(50, prefix='order'),
                            scheduler_api=api)
    heap = sim_fleet._schedule(10.0, random.Random(3))
    by_time = [name for _at, name in sorted(heap)]
    assert by_time == list(sim_fleet.hosts)
    assert all(clock.now <= at < clock.now + 10.0 for at, _name in heap)
