"""Where the demo's scheduler and fleet run: in this process or as
processes on RabbitMQ, and how the demo observes them."""

import json
import os
import signal
import socket
import subprocess
import sys
import time

from oslo_config import cfg
import oslo_messaging

from scheduler import broker_login
from scheduler.db import api as db_api
from scheduler.db import migration
from scheduler.demo import scenario as scenarios
from scheduler import rpc
from scheduler import service as service_mod
from scheduler import simulator
from scheduler.simulator import agent
from scheduler.simulator import fleet as fleet_mod
from scheduler import urls

CONF = cfg.CONF


class LocalObserver:
    """Looks at the in-process scheduler and fleet directly."""

    def __init__(self, service: service_mod.Service, fleet: simulator.Fleet):
        self._hosts = service.manager.driver.host_manager
        self._fleet = fleet

    def known(self) -> tuple:
        """(hosts up, aggregates) the scheduler knows."""
        return (len(self._hosts.get_up_host_states()),
                len(self._hosts.aggregates()))

    def placements(self, uuids: list) -> dict:
        """instance uuid -> the host whose compute runs it."""
        return {inst: name for name, compute in self._fleet.hosts.items()
                for inst in compute.instances if inst in uuids}

    def failed_builds(self) -> dict:
        return {name: compute.state.failed_builds
                for name, compute in self._fleet.hosts.items()}


class InventoryObserver:
    """Reads the scheduler's inventory: the processes run elsewhere.

    A placement counts once the scheduler marked it active, which it
    does when the compute reports the instance: proof that the compute
    received ``run_instance``.
    """

    def known(self) -> tuple:
        return len(db_api.host_reports_get_all()), len(
            db_api.aggregate_get_all())

    def placements(self, uuids: list) -> dict:
        return {row['instance_uuid']: row['host']
                for row in db_api.instance_get_all()
                if row['instance_uuid'] in uuids
                and row['status'] == db_api.ACTIVE}

    def failed_builds(self) -> dict:
        out = {}
        for row in db_api.host_reports_get_all():
            data = row['report'].get('versioned_object.data', {})
            out[row['host']] = int(data.get('failed_builds') or 0)
        return out


# -- where the scheduler and the fleet run ----------------------------------

def use_driver(driver: str, tag: str, workdir: str) -> None:
    """Point this process at ``driver``'s topics and inventory."""
    CONF.set_override('driver', driver, group='scheduler')
    CONF.set_override('topic', driver_topic(tag, driver), group='scheduler')
    CONF.set_override('topic', 'demo-%s-%s-compute' % (tag, driver),
                      group='compute')
    CONF.set_override('connection', inventory_url(workdir, driver),
                      group='database')
    db_api.reset_engine()


def driver_topic(tag: str, driver: str) -> str:
    return 'demo-%s-%s' % (tag, driver)


def inventory_url(workdir: str, driver: str) -> str:
    return 'sqlite:///%s' % os.path.join(workdir, '%s.sqlite' % driver)


class LocalBus:
    """The scheduler service and the fleet in this process, on fake://.

    One driver at a time: ``start`` brings up its service and fleet,
    ``stop`` takes them down again.
    """

    def __init__(self, spec: fleet_mod.FleetSpec, workdir: str, tag: str):
        self.spec = spec
        self.workdir = workdir
        self.tag = tag
        # One transport for everything: fake:// delivers only within it.
        self.transport = rpc.get_transport()
        self._service = None
        self._fleet = None

    #: Nothing worth keeping for a post mortem.
    has_logs = False

    def describe(self) -> str:
        return 'fake:// in this process'

    def prepare(self, drivers: list) -> None:
        """Nothing to do ahead: each driver starts when its turn comes."""

    def start(self, driver: str) -> LocalObserver:
        use_driver(driver, self.tag, self.workdir)
        migration.db_sync()
        self._service = service_mod.Service.create(transport=self.transport)
        self._service.start()
        self._fleet = simulator.Fleet(self.spec)
        self._fleet.start(self.transport)
        return LocalObserver(self._service, self._fleet)

    def stop(self, driver: str) -> None:
        if self._fleet is not None:
            self._fleet.stop()
            self._fleet = None
        if self._service is not None:
            self._service.stop()
            self._service = None
        db_api.reset_engine()

    def finish(self) -> list:
        self.stop('')
        rpc.cleanup()
        return []


class RabbitBus:
    """``scheduler-service`` and ``scheduler-compute-sim`` processes.

    Every driver's pair of processes starts at once in ``prepare`` (a
    process takes seconds to start, and as long to stop), each on its
    own topics and inventory; a driver's processes get SIGTERM as soon
    as its scenario is done.  The run has its own control exchange,
    auto-delete topic queues, and reply and fanout queues the broker
    drops ``TRANSIENT_QUEUES_TTL`` seconds after their process stopped
    (oslo.messaging's default keeps them 30 minutes), so nothing is left
    on the broker shortly afterwards.
    """

    #: Seconds the broker keeps a stopped process's reply and fanout
    #: queues (``[oslo_messaging_rabbit] rabbit_transient_queues_ttl``).
    TRANSIENT_QUEUES_TTL = 30

    def __init__(self, url: str, workdir: str, tag: str, debug: bool,
                 config_files: list | None = None):
        self.url = url
        #: The operator's files first; each process's own file wins.
        self._base_args = [arg for path in config_files or []
                           for arg in ('--config-file', path)]
        self.workdir = workdir
        self.tag = tag
        self.debug = debug
        self.exchange = 'scheduler-demo-%s' % tag
        self._fleet_file = os.path.join(workdir, 'fleet.json')
        with open(self._fleet_file, 'w', encoding='utf-8') as f:
            json.dump(scenarios.DEMO_FLEET, f, indent=2)
        #: driver -> [(script, Popen, log file)]
        self._procs: dict = {}
        self._signalled: set = set()
        CONF.set_override('control_exchange', self.exchange)
        CONF.set_override('rabbit_transient_queues_ttl',
                          self.TRANSIENT_QUEUES_TTL,
                          group='oslo_messaging_rabbit')
        self.transport = rpc.get_transport()
        # Declare the exchange as the processes do (registered by the
        # driver when the transport was made; used from the first send).
        CONF.set_override('amqp_auto_delete', True,
                          group='oslo_messaging_rabbit')

    @property
    def has_logs(self) -> bool:
        return bool(self._procs)

    def describe(self) -> str:
        return ('%s, scheduler-service and scheduler-compute-sim processes'
                % urls.masked_url(self.url))

    def prepare(self, drivers: list) -> None:
        """Start every driver's service, then each one's fleet."""
        self._check_broker()
        started = time.monotonic()
        configs = {}
        for driver in drivers:
            use_driver(driver, self.tag, self.workdir)
            configs[driver] = self._write_config(driver)
            self._spawn(driver, 'scheduler-service',
                        self._base_args + ['--config-file',
                                           configs[driver]])
        for driver in drivers:
            use_driver(driver, self.tag, self.workdir)
            self._wait_for_service(driver)
            self._spawn(driver, 'scheduler-compute-sim',
                        self._base_args + ['--config-file', configs[driver],
                                           '--fleet', self._fleet_file])
        sys.stdout.write('Started %d scheduler-service and %d '
                         'scheduler-compute-sim processes in %.1f s; logs '
                         'in %s\n' % (len(drivers), len(drivers),
                                      time.monotonic() - started,
                                      self.workdir))

    def _check_broker(self) -> None:
        """Fail fast: oslo.messaging would retry an absent broker forever,
        and a refused login is one line here rather than a traceback."""
        for host in oslo_messaging.TransportURL.parse(CONF, self.url).hosts:
            try:
                socket.create_connection((host.hostname, host.port or 5672),
                                         timeout=5).close()
            except OSError as e:
                raise scenarios.DemoError(
                    'cannot reach the broker at %s:%s: %s'
                    % (host.hostname, host.port or 5672, e))
        # Its services would exit on a refused login; say it once, here.
        try:
            broker_login.check(attempts=1)
        except broker_login.LoginRefused as e:
            raise scenarios.DemoError(str(e))

    def _write_config(self, driver: str) -> str:
        path = os.path.join(self.workdir, '%s.conf' % driver)
        text = (
            '[DEFAULT]\ntransport_url = %(url)s\n'
            'control_exchange = %(exchange)s\nstate_path = %(dir)s\n\n'
            '[scheduler]\ndriver = %(driver)s\ntopic = %(topic)s\n'
            'report_interval = 5\nperiodic_task_interval = 1\n\n'
            '[compute]\ntopic = %(compute)s\n\n'
            '[database]\nconnection = %(db)s\n\n'
            '[oslo_messaging_rabbit]\namqp_auto_delete = true\n'
            'rabbit_transient_queues_ttl = %(ttl)d\n'
            % {'url': self.url, 'exchange': self.exchange,
               'ttl': self.TRANSIENT_QUEUES_TTL,
               'dir': self.workdir, 'driver': driver,
               'topic': CONF.scheduler.topic, 'compute': CONF.compute.topic,
               'db': inventory_url(self.workdir, driver)})
        with open(path, 'w', encoding='utf-8') as f:
            f.write(text)
        return path

    def _spawn(self, driver: str, script: str, args: list) -> None:
        path = os.path.join(os.path.dirname(sys.executable), script)
        if os.access(path, os.X_OK):
            command = [path]
        else:
            module = script.replace('scheduler-', '').replace('-', '_')
            command = [sys.executable, '-c',
                       'import sys; from scheduler.cmd.%s import main; '
                       'sys.exit(main())' % module]
        log_file = os.path.join(self.workdir, '%s-%s.log' % (driver, script))
        command += args + ['--log-file', log_file]
        if self.debug:
            command.append('--debug')
        with open(log_file + '.stderr', 'w') as err:
            proc = subprocess.Popen(command, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=err)
        self._procs.setdefault(driver, []).append((script, proc, log_file))

    def _wait_for_service(self, driver: str) -> None:
        """Until the service answers: the fleet's first casts need it."""
        _script, proc, log_file = self._procs[driver][0]
        deadline = time.monotonic() + scenarios.READY_TIMEOUT
        while not agent.scheduler_answers(self.transport, 1):
            if proc.poll() is not None:
                raise scenarios.DemoError(
                    'scheduler-service (%s) exited with %s; see %s'
                    % (driver, proc.returncode, log_file))
            if time.monotonic() > deadline:
                raise scenarios.DemoError(
                    'scheduler-service (%s) did not answer within %d s; see %s'
                    % (driver, scenarios.READY_TIMEOUT, log_file))

    def start(self, driver: str) -> InventoryObserver:
        use_driver(driver, self.tag, self.workdir)
        return InventoryObserver()

    def stop(self, driver: str) -> None:
        """SIGTERM the driver's processes, fleet first; waited in finish().

        Once each: oslo.service takes a second SIGTERM as "die now".
        """
        for _script, proc, _log in reversed(self._procs.get(driver, [])):
            if proc.pid not in self._signalled and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                self._signalled.add(proc.pid)

    def finish(self) -> list:
        """Stop and wait for every process; a problem per bad exit."""
        for driver in self._procs:
            self.stop(driver)
        problems = []
        for driver, procs in self._procs.items():
            for script, proc, log_file in procs:
                try:
                    code = proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    code = proc.wait()
                if code != 0:
                    problems.append('%s (%s) exited with %s; see %s'
                                    % (script, driver, code, log_file))
            # Auto-delete takes an exchange away with its last binding;
            # one a fleet declared by a last report after its service's
            # queues went never had one, and would stay.
            rpc.tidy_service(driver_topic(self.tag, driver))
        rpc.cleanup()
        return problems


# -- the caller ---------------------------------------------------------------
