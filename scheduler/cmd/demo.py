"""``scheduler-demo``: three drivers place instances on a simulated fleet.

    scheduler-demo                  # one process on fake://, a few seconds
    scheduler-demo --debug          # the same, with the filter walk logged
    scheduler-demo --transport-url rabbit://guest:guest@127.0.0.1:5672/

For each driver (filter_scheduler, chance_scheduler, ip_scheduler) the
demo runs a scheduler service and a simulated fleet of 50 hosts in two
availability zones (doc-*, ops-*, dev-*, big-* and arm-* hosts of
several sizes), waits until the scheduler knows every host, then acts as
a conductor: it asks ``SchedulerAPI`` for destinations (small, medium and
large flavors, a zone-pinned request, several instances with alternates,
requests from 10.1.x / 10.2.x / 192.0.2.x source addresses for the
ip_scheduler, a request that cannot fit), casts ``schedule_run_instance``
and watches the simulated computes start the instances, then terminates
them.  Every outcome is checked against what the driver should do; the
demo prints a table per driver and a summary, and exits 1 if any check
failed.

By default everything runs in this process on the ``fake://`` transport
and SQLite inventories in a temporary directory, one driver after the
other.  With a ``rabbit://`` ``--transport-url`` the scheduler runs as
``scheduler-service`` and the fleet as ``scheduler-compute-sim``:
separate processes with generated configuration files, all started
first, each driver's pair on its own topics and inventory.  The run has
its own control exchange and auto-delete queues, so that runs do not
meet and leave nothing behind on the broker.  This process then reads
the scheduler's inventory to see what it knows.  On failure the
processes' logs are kept and their directory printed.
"""

import argparse
import contextlib
import dataclasses
import json
import logging as std_logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import typing
import uuid

from oslo_config import cfg
from oslo_log import log as logging
import oslo_messaging

from scheduler.cli import output
from scheduler import compute_rpcapi
from scheduler import config
from scheduler import context as ctx_mod
from scheduler.db import api as db_api
from scheduler.db import migration
from scheduler import exception
from scheduler import objects
from scheduler import rpc
from scheduler import rpcapi
from scheduler import service as service_mod
from scheduler import simulator
from scheduler.simulator import fleet as fleet_mod

CONF = cfg.CONF

DRIVERS = ('filter_scheduler', 'chance_scheduler', 'ip_scheduler')

#: The demo's fleet, in the fleet file format (written out for the
#: simulator process in RabbitMQ mode).
DEMO_FLEET = {
    'aggregates': {'az1': {'availability_zone': 'az1'},
                   'az2': {'availability_zone': 'az2'},
                   'ssd': {'disk_type': 'ssd'}},
    'groups': [
        {'prefix': 'doc', 'count': 6, 'memory_mb': 32768, 'vcpus': 8,
         'local_gb': 400, 'availability_zone': 'az1'},
        {'prefix': 'doc', 'count': 4, 'memory_mb': 32768, 'vcpus': 8,
         'local_gb': 400, 'availability_zone': 'az2'},
        {'prefix': 'ops', 'count': 5, 'memory_mb': 65536, 'vcpus': 16,
         'local_gb': 800, 'availability_zone': 'az1',
         'aggregates': ['ssd']},
        {'prefix': 'ops', 'count': 5, 'memory_mb': 65536, 'vcpus': 16,
         'local_gb': 800, 'availability_zone': 'az2',
         'aggregates': ['ssd']},
        {'prefix': 'dev', 'count': 10, 'memory_mb': 16384, 'vcpus': 4,
         'local_gb': 200, 'ram_allocation_ratio': 1.5,
         'availability_zone': 'az1'},
        {'prefix': 'dev', 'count': 10, 'memory_mb': 16384, 'vcpus': 4,
         'local_gb': 200, 'ram_allocation_ratio': 1.5,
         'availability_zone': 'az2'},
        {'prefix': 'big', 'count': 3, 'memory_mb': 262144, 'vcpus': 64,
         'local_gb': 4000, 'availability_zone': 'az1'},
        {'prefix': 'big', 'count': 3, 'memory_mb': 262144, 'vcpus': 64,
         'local_gb': 4000, 'availability_zone': 'az2'},
        {'prefix': 'arm', 'count': 4, 'memory_mb': 65536, 'vcpus': 32,
         'local_gb': 1000, 'architecture': 'aarch64',
         'availability_zone': 'az2'},
    ],
}

#: name -> (memory_mb, vcpus, root_gb, ephemeral_gb, swap MiB)
FLAVORS = {
    'm1.small': (2048, 1, 20, 0, 0),
    'm1.medium': (4096, 2, 40, 0, 1024),
    'm1.large': (16384, 8, 160, 0, 0),
    'x.huge': (1048576, 8, 20, 0, 0),
}

SELECT, RUN, TERMINATE = 'select', 'run', 'terminate'
PLACED, NO_VALID_HOST, REFUSED = 'placed', 'NoValidHost', 'refused'

#: Seconds to wait for the computes to act on a cast.
CAST_TIMEOUT = 20
#: Seconds to wait for the scheduler to know the whole fleet.
READY_TIMEOUT = 60

Check = typing.Callable[[str, fleet_mod.FleetSpec], typing.Optional[str]]


class DemoError(Exception):
    """A part of the demo could not start or stop."""


# -- the scenario -----------------------------------------------------------

def in_zone(zone: str) -> Check:
    def check(host, spec):
        actual = spec.availability_zone(host)
        return None if actual == zone else 'in zone %s, not %s' % (actual,
                                                                   zone)
    return check


def named(prefix: str) -> Check:
    def check(host, spec):
        return None if host.startswith(prefix + '-') else \
            'host name does not start with %s-' % prefix
    return check


def architecture(arch: str) -> Check:
    def check(host, spec):
        actual = spec.host(host).architecture
        return None if actual == arch else 'architecture %s' % actual
    return check


def vcpus_at_least(count: int) -> Check:
    def check(host, spec):
        actual = spec.host(host).vcpus
        return None if actual >= count else 'has only %d vCPUs' % actual
    return check


@dataclasses.dataclass
class Step:
    """One request of the scenario and what the driver should make of it."""

    label: str
    flavor: str = 'm1.small'
    num: int = 1
    how: str = SELECT
    zone: str | None = None
    arch: str | None = None
    remote: str | None = None
    admin: bool = False
    alternates: bool = False
    expect_alternates: bool = False
    ignore_prefix: str | None = None
    outcome: str = PLACED
    #: Text the NoValidHost message must contain.
    reason_has: str = ''
    check: Check | None = None
    note: str = ''


def scenario(driver: str) -> list:
    """The requests for ``driver``: each driver is held to what it does."""
    if driver == 'filter_scheduler':
        return [
            Step('m1.small'),
            Step('m1.medium (1 GiB swap)', 'm1.medium'),
            Step('m1.large: 8 vCPUs', 'm1.large', check=vcpus_at_least(8)),
            Step('m1.small in az2', zone='az2', check=in_zone('az2')),
            Step('3 x m1.small, alternates', num=3, alternates=True,
                 expect_alternates=True),
            Step('aarch64 image', arch='aarch64',
                 check=architecture('aarch64')),
            Step('1 TiB of RAM, as admin', 'x.huge', admin=True,
                 outcome=NO_VALID_HOST, reason_has='Filter results'),
            Step('2 x m1.medium, schedule_run_instance', 'm1.medium', num=2,
                 how=RUN),
            Step('terminate them', how=TERMINATE),
        ]
    if driver == 'chance_scheduler':
        return [
            Step('m1.small'),
            Step('m1.medium (1 GiB swap)', 'm1.medium'),
            Step('m1.large: 8 vCPUs', 'm1.large',
                 note='any host: no resource check'),
            Step('m1.small in az2', zone='az2',
                 note='any zone: the chance driver ignores zones'),
            Step('3 x m1.small, alternates', num=3, alternates=True,
                 expect_alternates=True),
            Step('1 TiB of RAM', 'x.huge',
                 note='chosen all the same: no resource check'),
            Step('1 TiB of RAM, schedule_run_instance', 'x.huge', how=RUN,
                 outcome=REFUSED),
            Step('2 x m1.medium, schedule_run_instance', 'm1.medium', num=2,
                 how=RUN),
            Step('terminate them', how=TERMINATE),
        ]
    if driver == 'ip_scheduler':
        return [
            Step('m1.small from 10.1.0.5', remote='10.1.0.5',
                 check=named('doc')),
            Step('m1.small from 10.2.7.9', remote='10.2.7.9',
                 check=named('ops')),
            Step('m1.medium from 192.0.2.10', 'm1.medium',
                 remote='192.0.2.10', check=named('dev')),
            Step('3 x m1.small from 10.1.3.3', num=3, remote='10.1.3.3',
                 alternates=True, check=named('doc'),
                 note='no alternates from this driver'),
            Step('from 192.0.2.10, every dev host ignored',
                 remote='192.0.2.10', ignore_prefix='dev',
                 outcome=NO_VALID_HOST, reason_has="prefix 'dev'"),
            Step('2 x m1.medium from 10.2.0.8, schedule_run_instance',
                 'm1.medium', num=2, remote='10.2.0.8', how=RUN,
                 check=named('ops')),
            Step('terminate them', how=TERMINATE),
        ]
    raise ValueError('no scenario for driver %r' % driver)


def make_flavor(name: str) -> objects.Flavor:
    memory_mb, vcpus, root_gb, ephemeral_gb, swap = FLAVORS[name]
    return objects.Flavor(flavorid=name, name=name, memory_mb=memory_mb,
                          vcpus=vcpus, root_gb=root_gb,
                          ephemeral_gb=ephemeral_gb, swap=swap,
                          extra_specs={})


def wait_for(predicate: typing.Callable[[], bool], timeout: float,
             interval: float = 0.05) -> bool:
    """Poll ``predicate`` until it holds or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


# -- what the scheduler and the computes know -------------------------------

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
    CONF.set_override('topic', 'demo-%s-%s' % (tag, driver),
                      group='scheduler')
    CONF.set_override('topic', 'demo-%s-%s-compute' % (tag, driver),
                      group='compute')
    CONF.set_override('connection', inventory_url(workdir, driver),
                      group='database')
    db_api.reset_engine()


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
    as its scenario is done.  The run has its own control exchange, and
    auto-delete queues, so nothing is left on the broker afterwards.
    """

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
            json.dump(DEMO_FLEET, f, indent=2)
        #: driver -> [(script, Popen, log file)]
        self._procs: dict = {}
        self._signalled: set = set()
        CONF.set_override('control_exchange', self.exchange)
        self.transport = rpc.get_transport()
        # Declare the exchange as the processes do (registered by the
        # driver when the transport was made; used from the first send).
        CONF.set_override('amqp_auto_delete', True,
                          group='oslo_messaging_rabbit')

    @property
    def has_logs(self) -> bool:
        return bool(self._procs)

    def describe(self) -> str:
        return '%s, scheduler-service and scheduler-compute-sim processes' \
            % re.sub(r':[^:@/]*@', ':***@', self.url)

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
        """Fail fast: oslo.messaging would retry an absent broker forever."""
        for host in oslo_messaging.TransportURL.parse(CONF, self.url).hosts:
            try:
                socket.create_connection((host.hostname, host.port or 5672),
                                         timeout=5).close()
            except OSError as e:
                raise DemoError('cannot reach the broker at %s:%s: %s'
                                % (host.hostname, host.port or 5672, e))

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
            % {'url': self.url, 'exchange': self.exchange,
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
        probe = rpcapi.SchedulerAPI(transport=self.transport, timeout=1)
        ctxt = ctx_mod.get_admin_context()
        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            try:
                probe.get_version_info(ctxt)
                return
            except oslo_messaging.MessagingTimeout:
                pass
            if proc.poll() is not None:
                raise DemoError('scheduler-service (%s) exited with %s; see '
                                '%s' % (driver, proc.returncode, log_file))
            if time.monotonic() > deadline:
                raise DemoError('scheduler-service (%s) did not answer within '
                                '%d s; see %s' % (driver, READY_TIMEOUT,
                                                  log_file))

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
        rpc.cleanup()
        return problems


# -- the caller ---------------------------------------------------------------

class Caller:
    """Sends the scenario's requests as a conductor would, checks each."""

    def __init__(self, driver: str, transport, observer,
                 spec: fleet_mod.FleetSpec):
        self.driver = driver
        self.spec = spec
        self.observer = observer
        self.api = rpcapi.SchedulerAPI(transport=transport, timeout=30)
        self.compute_api = compute_rpcapi.ComputeAPI(transport=transport)
        self.rows: list = []
        self.notes: list = []
        self.failures: list = []
        self.placed = 0
        self.expected_errors = 0
        self.seconds = 0.0
        self.started: dict = {}

    def run(self, steps: list) -> None:
        for step in steps:
            try:
                if step.how == SELECT:
                    self._select(step)
                elif step.how == RUN:
                    self._schedule(step)
                else:
                    self._terminate(step)
            except Exception as e:
                self._row(step, result=self._fail(step,
                                                  output.error_line(e)))

    # -- one step each ----------------------------------------------------

    def _context(self, step: Step) -> ctx_mod.RequestContext:
        return ctx_mod.RequestContext(
            user_id='demo', project_id='demo', remote_address=step.remote,
            is_admin=step.admin, roles=['admin'] if step.admin else
            ['member'])

    def _spec(self, step: Step) -> objects.RequestSpec:
        ignore = None
        if step.ignore_prefix:
            ignore = [h.name for h in self.spec.hosts
                      if h.name.startswith(step.ignore_prefix + '-')]
        return objects.RequestSpec(
            project_id='demo', user_id='demo', num_instances=step.num,
            flavor=make_flavor(step.flavor),
            image=objects.ImageMeta(properties={'hw_architecture': step.arch}
                                    if step.arch else {}),
            availability_zone=step.zone, ignore_hosts=ignore)

    def _select(self, step: Step) -> None:
        uuids = [str(uuid.uuid4()) for _ in range(step.num)]
        try:
            result = self.api.select_destinations(
                self._context(step), self._spec(step), uuids,
                return_objects=True, return_alternates=step.alternates)
        except exception.NoValidHost as e:
            self._no_valid_host(step, e)
            return
        if step.outcome != PLACED:
            self._row(step, result=self._fail(step, 'placed, expected %s'
                                              % step.outcome))
            return
        if len(result) != step.num:
            self._row(step, result=self._fail(
                step, '%d destinations for %d instances' % (len(result),
                                                            step.num)))
            return
        for index, alts in enumerate(result):
            first = alts[0]
            problem = self._check(step, first.service_host)
            if not problem and step.expect_alternates and len(alts) < 2:
                problem = 'no alternates'
            self.placed += 1
            self._row(step, index, first.service_host,
                      first.availability_zone,
                      [a.service_host for a in alts[1:]],
                      self._fail(step, problem) if problem else
                      self._ok(step))

    def _no_valid_host(self, step: Step, error) -> None:
        # Over RabbitMQ str() of a remote error ends with its traceback.
        message = error.format_message()
        if step.outcome != NO_VALID_HOST:
            self._row(step, result=self._fail(step, message))
        elif step.reason_has not in message:
            self._row(step, result=self._fail(
                step, 'NoValidHost without %r: %s' % (step.reason_has,
                                                      message)))
        else:
            self.expected_errors += 1
            self.notes.append('%s: %s' % (step.label, message))
            self._row(step, result='ok: NoValidHost, as expected')

    def _schedule(self, step: Step) -> None:
        uuids = [str(uuid.uuid4()) for _ in range(step.num)]
        failed_before = self.observer.failed_builds()
        self.api.schedule_run_instance(self._context(step), self._spec(step),
                                       uuids)
        if step.outcome == REFUSED:
            def refused():
                now = self.observer.failed_builds()
                return [h for h, n in now.items()
                        if n > failed_before.get(h, 0)]
            if not wait_for(lambda: bool(refused()), CAST_TIMEOUT):
                self._row(step, result=self._fail(
                    step, 'no compute reported a failed build'))
                return
            self.expected_errors += 1
            host = refused()[0]
            self._row(step, host=host,
                      zone=self.spec.availability_zone(host),
                      result='ok: refused by the compute, as expected')
            return
        if not wait_for(lambda: len(self.observer.placements(uuids))
                        == len(uuids), CAST_TIMEOUT):
            found = self.observer.placements(uuids)
            self._row(step, result=self._fail(
                step, '%d of %d instances running after %g s'
                % (len(found), len(uuids), CAST_TIMEOUT)))
            return
        placements = self.observer.placements(uuids)
        for index, inst in enumerate(uuids):
            host = placements[inst]
            self.started[inst] = host
            self.placed += 1
            problem = self._check(step, host)
            self._row(step, index, host, self.spec.availability_zone(host),
                      result=self._fail(step, problem) if problem else
                      'ok: run_instance received by %s' % host)

    def _terminate(self, step: Step) -> None:
        if not self.started:
            self._row(step, result=self._fail(step, 'nothing to terminate'))
            return
        ctxt = ctx_mod.get_admin_context()
        started, self.started = self.started, {}
        for inst, host in started.items():
            self.compute_api.terminate_instance(ctxt, host, inst)
        uuids = list(started)
        if not wait_for(lambda: not self.observer.placements(uuids),
                        CAST_TIMEOUT):
            self._row(step, result=self._fail(
                step, 'still running: %s' % sorted(
                    self.observer.placements(uuids).values())))
            return
        for index, (inst, host) in enumerate(started.items()):
            self._row(step, index, host, self.spec.availability_zone(host),
                      result='ok: terminated')

    # -- bookkeeping ------------------------------------------------------

    def _check(self, step: Step, host: str) -> str | None:
        return step.check(host, self.spec) if step.check else None

    def _ok(self, step: Step) -> str:
        return 'ok: %s' % step.note if step.note else 'ok'

    def _fail(self, step: Step, problem: str) -> str:
        self.failures.append('%s, %s: %s' % (self.driver, step.label,
                                             problem))
        return 'FAILED: %s' % problem

    def _row(self, step: Step, index: int | None = None,
             host: str | None = None, zone: str | None = None,
             alternates: list | None = None, result: str = '') -> None:
        first = index in (None, 0)
        self.rows.append({
            'request': step.label if first else '',
            'source': (step.remote or '') if first else '',
            '#': None if index is None else index + 1,
            'host': host, 'zone': zone, 'alternates': alternates,
            'result': result})


# -- the command --------------------------------------------------------------

COLUMNS = ['request', 'source', '#', 'host', 'zone', 'alternates', 'result']


def run_driver(bus: LocalBus | RabbitBus, driver: str,
               spec: fleet_mod.FleetSpec, stream) -> Caller:
    """Run ``driver``'s scenario on ``bus`` and print its table."""
    started = time.monotonic()
    try:
        observer = bus.start(driver)
        expected = (len(spec.hosts), len(spec.aggregate_metadata))
        if not wait_for(lambda: all(k >= e for k, e in zip(
                observer.known(), expected)), READY_TIMEOUT, interval=0.1):
            hosts, aggregates = observer.known()
            raise DemoError('%s: after %d s the scheduler knows %d of %d '
                            'hosts and %d of %d aggregates'
                            % (driver, READY_TIMEOUT, hosts, expected[0],
                               aggregates, expected[1]))
        ready = time.monotonic() - started
        caller = Caller(driver, bus.transport, observer, spec)
        caller.run(scenario(driver))
    finally:
        bus.stop(driver)
    stream.write('\n== %s == (the scheduler knew all %d hosts after %.1f s)\n'
                 % (driver, len(spec.hosts), ready))
    output.emit(caller.rows, COLUMNS, stream=stream)
    for note in caller.notes:
        stream.write('  NoValidHost for %s\n' % note)
    caller.seconds = time.monotonic() - started
    return caller


def setup_logging(debug: bool) -> None:
    """WARNING and up unless ``--debug``, which shows the filter walk."""
    logging.setup(CONF, 'scheduler')
    if debug:
        return
    names = [''] + [entry.split('=')[0] for entry in CONF.default_log_levels]
    for name in names:
        logger = std_logging.getLogger(name)
        if logger.level < std_logging.WARNING:
            logger.setLevel(std_logging.WARNING)
    # Refused builds are expected here and reported in the table.
    std_logging.getLogger('scheduler.simulator').setLevel(std_logging.ERROR)


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog='scheduler-demo',
        description='Run the filter, chance and IP schedulers against a '
                    'simulated fleet and check where they place instances.')
    parser.add_argument('--config-file', action='append', default=[],
                        help='configuration file (may be repeated): its '
                             'options (filters, weighers, [ip_scheduler], '
                             'logging...) apply to the demo\'s services; '
                             'the demo still sets topics, inventories and '
                             'state_path itself')
    parser.add_argument('--transport-url',
                        help='fake:// (the default, unless a config file '
                             'sets transport_url: everything in this '
                             'process) or a rabbit:// URL (separate '
                             'service and simulator processes)')
    parser.add_argument('--driver', action='append', choices=DRIVERS,
                        help='run only this driver (may be repeated)')
    parser.add_argument('--keep', action='store_true',
                        help='keep the working directory (logs, '
                             'inventories, configuration files)')
    parser.add_argument('--debug', action='store_true',
                        help='log at DEBUG, including the filter walk')
    return parser


def main(argv: list | None = None) -> int:
    args = make_parser().parse_args(sys.argv[1:] if argv is None else argv)
    conf_args = ['--debug'] if args.debug else []
    for path in args.config_file:
        conf_args += ['--config-file', path]
    config.parse_args(conf_args, default_config_files=[],
                      setup_logging=False, prog='scheduler-demo')
    if not args.transport_url:
        # oslo.messaging's own default is rabbit://: only a URL the
        # operator wrote in a config file moves the demo off fake://.
        set_by_user = (CONF.get_location('transport_url').location
                       == cfg.Locations.user)
        args.transport_url = (CONF.transport_url if set_by_user
                              else 'fake://')
    setup_logging(args.debug)
    started = time.monotonic()
    spec = fleet_mod.parse(DEMO_FLEET, source='demo fleet')
    workdir = tempfile.mkdtemp(prefix='scheduler-demo-')
    tag = uuid.uuid4().hex[:8]
    CONF.set_override('transport_url', args.transport_url)
    CONF.set_override('state_path', workdir)
    if args.transport_url.startswith('fake:'):
        bus = LocalBus(spec, workdir, tag)
    else:
        bus = RabbitBus(args.transport_url, workdir, tag, args.debug,
                        args.config_file)
    stream = sys.stdout
    zones = sorted({spec.availability_zone(h.name) for h in spec.hosts})
    stream.write('scheduler-demo: %d simulated hosts in zones %s; %s\n'
                 % (len(spec.hosts), ', '.join(zones), bus.describe()))
    callers, problems = [], []
    drivers = args.driver or list(DRIVERS)
    try:
        bus.prepare(drivers)
        for driver in drivers:
            callers.append(run_driver(bus, driver, spec, stream))
    except (DemoError, oslo_messaging.MessagingException) as e:
        problems.append(str(e))
    finally:
        problems += bus.finish()
    elapsed = time.monotonic() - started

    stream.write('\nSummary\n')
    output.emit([{'driver': c.driver, 'requests': len(scenario(c.driver)),
                  'instances placed': c.placed,
                  'expected errors': c.expected_errors,
                  'failed': len(c.failures),
                  'seconds': '%.1f' % c.seconds} for c in callers],
                ['driver', 'requests', 'instances placed', 'expected errors',
                 'failed', 'seconds'], stream=stream)
    failures = [f for c in callers for f in c.failures] + problems
    for failure in failures:
        stream.write('FAILED: %s\n' % failure)
    keep = args.keep or bool(failures and bus.has_logs)
    if keep:
        stream.write('Logs and inventories are in %s\n' % workdir)
    else:
        with contextlib.suppress(OSError):
            shutil.rmtree(workdir)
    if failures:
        stream.write('%d check(s) failed (%.1f s).\n' % (len(failures),
                                                         elapsed))
        return 1
    stream.write('Every check passed: %d drivers in %.1f s.\n'
                 % (len(callers), elapsed))
    return 0


if __name__ == '__main__':
    sys.exit(main())
