"""Simulated compute agents: one per host of a fleet, on the message bus.

Each ``SimulatedCompute`` keeps one host's ``HostState`` and instances
and talks to the scheduler the way a compute agent does:

* it reports its state by ``SchedulerAPI.report`` when the fleet
  starts and every ``[scheduler] report_interval`` seconds, and right
  after each change: the full report when the state changed since the
  last one, else a liveness message (API 1.6; the fleet's due hosts in
  one, ``SchedulerAPI.report_many``);
* it serves ``send_report`` (compute API 1.1): a scheduler that does
  not hold the report a liveness message names asks for it;
* it serves ``run_instance`` and ``terminate_instance`` casts (version
  1.0 of ``scheduler.compute_rpcapi``) on
  ``Target(topic=[compute] topic, server=<host name>)``.  A build that
  does not fit the limits the scheduler sent (or, without limits, the
  host's totals times its allocation ratios) is refused: a warning is
  logged, ``failed_builds`` goes up by one (a successful build resets
  it, as in nova) and ``delete_instance_info`` tells the scheduler to
  drop its claim.  An accepted build is announced by
  ``update_instance_info``, a termination by ``delete_instance_info``.

``Fleet`` runs every host of a ``FleetSpec`` over one transport.

A host can be made to go silent, to test "a host goes down":

* from outside the process, with a control directory
  (``scheduler-compute-sim --control-dir DIR``): while the file
  ``DIR/<host name>.down`` exists, that host sends nothing to the
  scheduler (no reports, no instance news); remove the file and it
  reports again at the next interval;
* in process, with ``Fleet.set_silent(name, True)``.

A silent host still serves casts (its agent is cut off from the
scheduler, not dead), so after ``[scheduler] service_down_time`` the
scheduler considers it down, and when it speaks again its first report
brings the scheduler up to date.
"""

import collections
import heapq
import math
import os
import random
import threading
import time
import uuid

from oslo_config import cfg
from oslo_log import log as logging
import oslo_messaging
from oslo_utils import timeutils

from scheduler import context as ctx_mod
from scheduler import exception
from scheduler import objects
from scheduler.objects import host_state as host_state_obj
from scheduler import rpc
from scheduler import rpcapi
from scheduler.simulator import fleet as fleet_mod
from scheduler.simulator import routing

LOG = logging.getLogger(__name__)
CONF = cfg.CONF

#: How many received casts each host remembers (for demos and tests).
RECEIVED_KEPT = 1000


def build_host_state(spec: fleet_mod.HostSpec) -> objects.HostState:
    """The initial, empty state of ``spec``'s host.

    Ratios the fleet left out come from ``[compute]``, read now, so a
    configuration file given to the simulator applies.
    """
    def ratio(name):
        value = getattr(spec, name)
        return getattr(CONF.compute, name) if value is None else value

    return objects.HostState(
        host=spec.name, nodename=spec.name, uuid=spec.uuid,
        memory_mb=spec.memory_mb, local_gb=spec.local_gb, vcpus=spec.vcpus,
        cpu_allocation_ratio=ratio('cpu_allocation_ratio'),
        ram_allocation_ratio=ratio('ram_allocation_ratio'),
        disk_allocation_ratio=ratio('disk_allocation_ratio'),
        hypervisor_type=spec.hypervisor_type,
        hypervisor_version=spec.hypervisor_version,
        hypervisor_hostname=spec.name, host_ip=spec.host_ip,
        cpu_info=dict(spec.cpu_info),
        supported_instances=[list(t) for t in spec.supported_instances],
        metrics=dict(spec.metrics), stats=dict(spec.stats),
        disk_available_least=spec.disk_available_least).set_defaults()


def scheduler_answers(transport, timeout: float) -> bool:
    """Whether a scheduler answers on ``[scheduler] topic`` within
    ``timeout`` seconds."""
    try:
        rpcapi.SchedulerAPI(transport=transport, timeout=timeout) \
            .get_version_info(ctx_mod.get_admin_context())
        return True
    except oslo_messaging.MessagingTimeout:
        return False


class SilenceSwitch:
    """Which hosts must not talk to the scheduler.

    Set in process (``set``) or by ``<host>.down`` files in a control
    directory, read anew at every check so that a test can flip a host
    from outside the process.
    """

    SUFFIX = '.down'

    def __init__(self, control_dir: str | None = None):
        self.control_dir = control_dir
        self._silenced: set = set()
        self._announced: set = set()

    def set(self, name: str, silent: bool) -> None:
        if silent:
            self._silenced.add(name)
        else:
            self._silenced.discard(name)

    def is_silent(self, name: str) -> bool:
        silent = name in self._silenced or bool(
            self.control_dir and os.path.exists(
                os.path.join(self.control_dir, name + self.SUFFIX)))
        # Say it once per change, not at every report.
        if silent and name not in self._announced:
            self._announced.add(name)
            LOG.warning('Host %s is silenced: it stops reporting to the '
                        'scheduler', name)
        elif not silent and name in self._announced:
            self._announced.discard(name)
            LOG.warning('Host %s is no longer silenced: reporting again',
                        name)
        return silent


class SimulatedCompute:
    """One simulated host: its state, its instances, its news to the
    scheduler.

    ``api`` is anything with SchedulerAPI's ``update_service_capabilities``,
    ``update_instance_info`` and ``delete_instance_info``; tests pass a
    recorder.  Thread safe: the RPC server may run casts concurrently.
    """

    def __init__(self, spec: fleet_mod.HostSpec, api=None,
                 silence: SilenceSwitch | None = None):
        self.spec = spec
        self.name = spec.name
        self.api = api
        self.silence = silence or SilenceSwitch()
        self.state = build_host_state(spec)
        #: instance uuid -> (memory_mb, vcpus, disk_gb) it uses.
        self.instances: dict = {}
        #: (method, instance_uuid, accepted) of the casts received.
        self.received: collections.deque = collections.deque(
            maxlen=RECEIVED_KEPT)
        self._lock = threading.Lock()
        #: The copy of ``state`` that reports carry, made again only
        #: after a change (None): see ``snapshot``.
        self._sent: objects.HostState | None = None
        #: Whether an RPC server takes this host's ``send_report``
        #: (compute API 1.1): only then may it send liveness messages,
        #: because a scheduler that does not hold the report one names
        #: asks for the full report that way, and renews nothing until
        #: it comes.
        self.serves_send_report = False

    @property
    def silent(self) -> bool:
        return self.silence.is_silent(self.name)

    def snapshot(self) -> objects.HostState:
        """A copy of the state to send, stamped now.

        While the state does not change, the same copy comes back,
        stamped again: a quiet host's reports say the same thing, and a
        large fleet cannot afford a whole HostState copied per report.
        Whoever sends it sends it at once and keeps nothing of it, so
        stamping it again is safe; a build or a termination drops the
        copy (under the lock), so a report handed out never changes.

        Stamped under the lock: a report cloned before a build and
        stamped after a later snapshot would carry an older state under
        a newer time, and the scheduler keeps the newest report.
        """
        with self._lock:
            if self._sent is None:
                self._sent = self.state.obj_clone()
            state = self._sent
            state.updated_at = timeutils.utcnow(with_timezone=True)
        return state

    def report(self, ctxt=None) -> bool:
        """Send the state to the scheduler; False when silenced.

        Through ``SchedulerAPI.report`` when the api has it and the
        host serves ``send_report``: a state that says nothing new since
        the last full report goes as a liveness message (API 1.6).
        """
        if self.silent:
            return False
        ctxt = ctxt or ctx_mod.get_admin_context()
        report = (getattr(self.api, 'report', None)
                  if self.serves_send_report else None)
        if report is None:
            self.api.update_service_capabilities(ctxt, self.snapshot())
        else:
            report(ctxt, self.snapshot())
        return True

    def send_report(self, ctxt=None) -> None:
        """A scheduler asked for the full report (compute API 1.1)."""
        want = getattr(self.api, 'want_full_report', None)
        if want is not None:
            want(self.name, self.name)
        self.report(ctxt)

    # -- what the casts do ----------------------------------------------

    def run_instance(self, instance_uuid: str, spec_obj, limits=None,
                     ctxt=None) -> bool:
        """Start an instance if it fits; True when it runs here."""
        memory_mb, vcpus, disk_gb = host_state_obj.resources_of(spec_obj)
        with self._lock:
            if instance_uuid in self.instances:
                self.received.append(('run_instance', instance_uuid, True))
                LOG.info('%(host)s already runs instance %(uuid)s',
                         {'host': self.name, 'uuid': instance_uuid})
                return True
            problem = self._does_not_fit(memory_mb, vcpus, disk_gb, limits)
            self._sent = None
            if problem:
                self.state.failed_builds += 1
            else:
                self.state.apply_claim(memory_mb, vcpus, disk_gb,
                                       instance_uuid)
                self.state.failed_builds = 0
                self.instances[instance_uuid] = (memory_mb, vcpus, disk_gb)
            self.received.append(('run_instance', instance_uuid,
                                  not problem))
        ctxt = ctxt or ctx_mod.get_admin_context()
        if problem:
            LOG.warning('%(host)s refused instance %(uuid)s: %(problem)s',
                        {'host': self.name, 'uuid': instance_uuid,
                         'problem': problem})
            # The scheduler claimed it here: let it give the claim back
            # now rather than when the claim expires.
            self._tell('delete_instance_info', ctxt, self.name,
                       instance_uuid)
        else:
            LOG.info('%(host)s started instance %(uuid)s (%(mem)d MB, '
                     '%(cpu)d vCPUs, %(disk)d GB)',
                     {'host': self.name, 'uuid': instance_uuid,
                      'mem': memory_mb, 'cpu': vcpus, 'disk': disk_gb})
            self._tell('update_instance_info', ctxt, self.name,
                       [instance_uuid])
        self.report(ctxt)
        return not problem

    def terminate_instance(self, instance_uuid: str, ctxt=None) -> bool:
        """Free an instance's resources; False when it was not here."""
        with self._lock:
            usage = self.instances.pop(instance_uuid, None)
            if usage is not None:
                self.state.apply_claim(*usage, instance_uuid=instance_uuid,
                                       sign=-1)
                self._sent = None
            self.received.append(('terminate_instance', instance_uuid,
                                  usage is not None))
        ctxt = ctxt or ctx_mod.get_admin_context()
        if usage is None:
            LOG.warning('%(host)s has no instance %(uuid)s to terminate',
                        {'host': self.name, 'uuid': instance_uuid})
        else:
            LOG.info('%(host)s terminated instance %(uuid)s',
                     {'host': self.name, 'uuid': instance_uuid})
        # Also for an unknown instance: the scheduler may hold a claim.
        self._tell('delete_instance_info', ctxt, self.name, instance_uuid)
        if usage is not None:
            self.report(ctxt)
        return usage is not None

    def _does_not_fit(self, memory_mb: int, vcpus: int, disk_gb: int,
                      limits) -> str | None:
        """Why one more such instance exceeds the limits, or None."""
        if isinstance(limits, dict):
            limits = objects.SchedulerLimits.from_dict(limits)
        given = limits.to_dict() if limits is not None else {}
        state = self.state
        checks = [
            ('RAM', 'MB', memory_mb, state.memory_mb_used,
             given.get('memory_mb',
                       state.memory_mb * state.ram_allocation_ratio)),
            ('vCPUs', '', vcpus, state.vcpus_used,
             given.get('vcpu', state.vcpus * state.cpu_allocation_ratio)),
            ('disk', 'GB', disk_gb, state.local_gb_used,
             given.get('disk_gb',
                       state.local_gb * state.disk_allocation_ratio)),
        ]
        for what, unit, asked, used, limit in checks:
            if used + asked > limit:
                return ('%s: %d%s used + %d%s asked > limit %g%s'
                        % (what, used, unit, asked, unit, limit, unit))
        return None

    def _tell(self, method: str, ctxt, *args) -> None:
        if self.silent:
            return
        getattr(self.api, method)(ctxt, *args)


class ComputeEndpoint:
    """The RPC endpoint of one simulated host (compute RPC API 1.1).

    Used where each host has its own RPC server (transports without
    routing keys, such as ``fake://``).  Only the two casts of
    ``scheduler.compute_rpcapi`` are exposed: ``rpc.get_server``
    dispatches nothing else.
    """

    target = oslo_messaging.Target(version='1.1')

    def __init__(self, compute: SimulatedCompute):
        self._compute = compute
        compute.serves_send_report = True

    @oslo_messaging.expose
    def send_report(self, ctxt, node=None):
        self._compute.send_report(ctxt)

    @oslo_messaging.expose
    def run_instance(self, ctxt, instance_uuid, node=None, spec_obj=None,
                     limits=None):
        if node and node != self._compute.name:
            LOG.warning('%(host)s got run_instance for node %(node)s; it '
                        'has only itself', {'host': self._compute.name,
                                            'node': node})
        self._compute.run_instance(instance_uuid, spec_obj, limits, ctxt)

    @oslo_messaging.expose
    def terminate_instance(self, ctxt, instance_uuid):
        self._compute.terminate_instance(instance_uuid, ctxt)


class FleetEndpoint:
    """The one RPC endpoint of a whole fleet (compute RPC API 1.1).

    Every host's casts arrive here (see ``scheduler.simulator.routing``):
    ``run_instance`` goes to the host named by its ``node`` argument
    (a simulated host is its own only node), ``terminate_instance`` to
    the host that runs the instance.
    """

    target = oslo_messaging.Target(version='1.1')

    def __init__(self, fleet: 'Fleet'):
        self._fleet = fleet
        for compute in fleet.hosts.values():
            compute.serves_send_report = True

    @oslo_messaging.expose
    def send_report(self, ctxt, node=None):
        """A scheduler asks for the full report of ``node`` (1.1): its
        liveness message named a report the scheduler does not hold."""
        compute = self._fleet.hosts.get(node)
        if compute is None:
            LOG.warning('send_report for node %r, which this fleet does '
                        'not simulate', node)
            return
        self._fleet.report_soon(compute)

    @oslo_messaging.expose
    def run_instance(self, ctxt, instance_uuid, node=None, spec_obj=None,
                     limits=None):
        compute = self._fleet.hosts.get(node)
        if compute is None:
            LOG.warning('run_instance for instance %(uuid)s names node '
                        '%(node)r, which this fleet does not simulate',
                        {'uuid': instance_uuid, 'node': node})
            return
        compute.run_instance(instance_uuid, spec_obj, limits, ctxt)

    @oslo_messaging.expose
    def terminate_instance(self, ctxt, instance_uuid):
        compute = self._fleet.host_running(instance_uuid)
        if compute is None:
            LOG.warning('terminate_instance for instance %s, which no '
                        'simulated host runs', instance_uuid)
            return
        compute.terminate_instance(instance_uuid, ctxt)

    @oslo_messaging.expose
    def bindings_probe(self, ctxt):
        """The fleet's own probe: it arrived, so the bindings are there
        (``routing.BindingGuard``)."""


class Progress:
    """Counts reports and says, now and then, how the fleet is doing."""

    def __init__(self, every: float):
        self.every = every
        self.reports = 0
        self._mark = time.monotonic()
        self._marked_reports = 0

    def due(self) -> bool:
        return time.monotonic() - self._mark >= self.every

    def rate(self) -> float:
        """Reports per second since the previous call (or the start)."""
        now = time.monotonic()
        elapsed = max(now - self._mark, 1e-6)
        rate = (self.reports - self._marked_reports) / elapsed
        self._mark, self._marked_reports = now, self.reports
        return rate


class SendRate:
    """What the first report interval says of this process's pace.

    The rate it sustains is the reports it sent over the CPU time the
    whole process spent meanwhile (reporting, serving casts, the bus's
    heartbeats): what one core gives it.  Not wall time: most of a
    send's wall time is the broker's confirm, which costs nothing while
    the process waits, and a late reporter puts more hosts in each
    liveness message, so wall time would only say how busy the fleet
    already is.  What the machine does not give it shows as ``late``:
    how long after its time the latest host's report went.
    """

    def __init__(self):
        self.reports = 0
        self.late = 0.0
        self._cpu = time.process_time()

    def add(self, reports: int, late: float) -> None:
        self.reports += reports
        self.late = max(self.late, late)

    def sustained(self) -> float | None:
        """Reports a second on one core, or None before any was sent."""
        cpu = time.process_time() - self._cpu
        if not self.reports or cpu <= 0:
            return None
        return self.reports / cpu


def rate_statement(hosts: int, interval: float, sustained: float,
                   late: float = 0.0) -> tuple:
    """``(warn, text)``: the report rate ``hosts`` reporting every
    ``interval`` seconds need, the rate this process ``sustained``, and
    when it falls short (or its reports went ``late`` by more than
    their jitter), what to change.

    Said once, when the first report interval is over: a fleet beyond
    its process's rate reports late, and past ``service_down_time``
    its hosts are judged down and come back (they flap), which looks
    like a scheduler fault unless the simulator says so.
    """
    need = hosts / interval
    text = ('%d hosts every %g s need %.0f reports/s; this process '
            'sustains about %.0f reports/s on one core (its CPU time over '
            'its first report interval)'
            % (hosts, interval, need, sustained))
    if need > sustained:
        return True, ('%s: hosts will report late and may be judged '
                      'down; set --report-interval to at least %d, or '
                      'split the fleet over several simulators'
                      % (text, math.ceil(hosts / sustained)))
    if late > interval * Fleet.JITTER:
        return True, ('%s, but reports went up to %.1f s late: the '
                      'machine does not give it the CPU it needs (load '
                      'average %.1f); hosts may be judged down'
                      % (text, late, os.getloadavg()[0]))
    return False, text


class Fleet:
    """Every host of a FleetSpec, reporting and serving on one transport.

    ``start(transport)`` starts the fleet's RPC server (one per process;
    one per host only on transports without routing keys), sends each
    host's first report, then reports every host once per
    ``report_interval`` seconds (default ``[scheduler]
    report_interval``), paced evenly over the interval with
    +/- ``JITTER`` so that reports do not come in bursts.  The fleet's
    aggregates are cast as soon as a scheduler answers on the topic:
    a fanout cast reaches only schedulers that are up, and a fleet that
    starts first must not lose them.  ``request_stop()`` (safe from a
    signal handler) makes ``start()`` return early and the reporter
    quit; ``stop()`` then releases everything.  ``scheduler_api``
    replaces the SchedulerAPI (tests record with it).
    """

    #: Each report comes interval * (1 +/- JITTER) after the previous.
    JITTER = 0.1
    #: The reporter sends what is due at most this often (seconds).
    TICK = 0.05
    #: The reporter wakes at least this often (seconds), to send the
    #: full reports schedulers asked for (``report_soon``).
    ASKED_WAIT = 0.2
    #: Progress lines: every this many seconds while starting, then
    #: every PROGRESS_EVERY while running.
    STARTUP_PROGRESS_EVERY = 2.0
    PROGRESS_EVERY = 60.0
    #: How long to wait for a scheduler's answer before the aggregates
    #: are cast (and between two tries).
    PROBE_TIMEOUT = 5
    #: Seconds between two checks that the broker still routes every
    #: host's casts to the fleet's queue (``routing.BindingGuard``).
    BINDING_CHECK_EVERY = 2.0

    def __init__(self, spec: fleet_mod.FleetSpec,
                 control_dir: str | None = None,
                 report_interval: float | None = None,
                 scheduler_api=None, server_name: str | None = None):
        self.spec = spec
        self.silence = SilenceSwitch(control_dir)
        self.report_interval = report_interval
        self._api = scheduler_api
        self.server_name = server_name or 'fleet-%s' % uuid.uuid4().hex[:12]
        self.hosts: dict = {
            host.name: SimulatedCompute(host, scheduler_api, self.silence)
            for host in spec.hosts}
        self.started = 0
        self._transport = None
        self._servers: list = []
        self._bound = False
        self.bindings: routing.BindingGuard | None = None
        self._stopping = threading.Event()
        self._threads: list = []
        #: Hosts a scheduler asked to report in full (``report_soon``),
        #: sent by the reporter at its next tick.
        self._asked: set = set()
        self._asked_lock = threading.Lock()
        self.progress = Progress(self.STARTUP_PROGRESS_EVERY)
        #: Why the fleet stopped by itself (a scheduler too old for
        #: this client's messages), for the command to exit non-zero.
        self.fatal: Exception | None = None

    def set_silent(self, name: str, silent: bool = True) -> None:
        if name not in self.hosts:
            raise KeyError(name)
        self.silence.set(name, silent)

    def host_running(self, instance_uuid: str) -> SimulatedCompute | None:
        for compute in self.hosts.values():
            if instance_uuid in compute.instances:
                return compute
        return None

    def request_stop(self) -> None:
        """Ask ``start()`` and the reporter to finish; signal safe."""
        self._stopping.set()

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def start(self, transport=None) -> None:
        """Join the bus: RPC server, first reports, reporter, aggregates.

        Returns early, with only part of the fleet started, when
        ``request_stop()`` is called meanwhile; ``stop()`` cleans up
        either way.
        """
        self._transport = transport
        if self._api is None:
            self._api = rpcapi.SchedulerAPI(transport=transport)
        for compute in self.hosts.values():
            compute.api = self._api
        interval = self.report_interval or CONF.scheduler.report_interval
        topic = CONF.compute.topic
        if routing.needs_server_per_host(CONF):
            self._start_server_per_host(transport, topic)
        else:
            self._start_fleet_server(transport, topic)
        if self.stopping:
            return
        self._first_reports()
        if self.stopping:
            return
        LOG.info('Simulating %(count)d compute host(s) on topic %(topic)s; '
                 '%(reported)d reported; next reports every %(interval)s s '
                 '(+/- %(jitter)d%%), paced',
                 {'count': len(self.hosts), 'topic': topic,
                  'reported': self.progress.reports, 'interval': interval,
                  'jitter': self.JITTER * 100})
        self.progress.every = self.PROGRESS_EVERY
        self._spawn(self._report_loop, 'fleet-reporter', interval)
        self._spawn(self._aggregates_loop, 'fleet-aggregates', interval)
        if self.bindings is not None:
            self._spawn(self._bindings_loop, 'fleet-bindings')

    def _spawn(self, target, name: str, *args) -> None:
        thread = threading.Thread(target=target, args=args, name=name,
                                  daemon=True)
        thread.start()
        self._threads.append(thread)

    def _start_fleet_server(self, transport, topic: str) -> None:
        target = oslo_messaging.Target(topic=topic, server=self.server_name)
        server = rpc.get_server(target, [FleetEndpoint(self)],
                                transport=transport)
        server.start()
        self._servers.append(server)
        self._bound = True
        bound = routing.bind_hosts(CONF, topic, self.server_name,
                                   self.hosts, stopping=self._stopping)
        self.bindings = routing.BindingGuard(CONF, transport, topic,
                                             self.server_name, self.hosts)
        LOG.info('One RPC server (%(queue)s) serves the casts of '
                 '%(count)d simulated host(s)',
                 {'queue': routing.queue_name(topic, self.server_name),
                  'count': bound})

    def _start_server_per_host(self, transport, topic: str) -> None:
        for name, compute in self.hosts.items():
            if self.stopping:
                return
            target = oslo_messaging.Target(topic=topic, server=name)
            server = rpc.get_server(target, [ComputeEndpoint(compute)],
                                    transport=transport)
            server.start()
            self._servers.append(server)

    def _first_reports(self) -> None:
        """Every host reports once, as fast as the bus takes them."""
        ctxt = ctx_mod.get_admin_context()
        total = len(self.hosts)
        self.progress.rate()
        for compute in self.hosts.values():
            if self.stopping:
                LOG.info('Stopped starting after %(started)d/%(total)d '
                         'hosts', {'started': self.started,
                                   'total': total})
                return
            if compute.report(ctxt):
                self.progress.reports += 1
            self.started += 1
            if self.progress.due():
                LOG.info('Started %(started)d/%(total)d hosts '
                         '(%(rate).0f reports/s)',
                         {'started': self.started, 'total': total,
                          'rate': self.progress.rate()})

    def send_aggregates(self) -> None:
        aggregates = self.spec.aggregates()
        if aggregates:
            self._api.update_aggregates(ctx_mod.get_admin_context(),
                                        aggregates)

    def _scheduler_answers(self) -> bool:
        return not isinstance(self._api, rpcapi.SchedulerAPI) or \
            scheduler_answers(self._transport, self.PROBE_TIMEOUT)

    def _aggregates_loop(self, interval: float) -> None:
        """Cast the aggregates once a scheduler is there to hear them."""
        if not self.spec.aggregate_metadata:
            return
        warned = False
        while not self.stopping:
            try:
                if self._scheduler_answers():
                    self.send_aggregates()
                    LOG.info('Sent the fleet\'s %d aggregate(s) to the '
                             'scheduler', len(self.spec.aggregate_metadata))
                    return
            except Exception as e:
                LOG.warning('Could not send the fleet aggregates: %s', e)
            if not warned:
                LOG.warning('No scheduler answered on topic %(topic)s '
                            'within %(timeout)d s: the fleet\'s aggregates '
                            'will be sent when one does',
                            {'topic': CONF.scheduler.topic,
                             'timeout': self.PROBE_TIMEOUT})
                warned = True
            self._stopping.wait(max(interval, self.PROBE_TIMEOUT))

    def _bindings_loop(self) -> None:
        """Bind the hosts' routing keys again whenever they are lost."""
        while not self._stopping.wait(self.BINDING_CHECK_EVERY):
            try:
                self.bindings.check(stopping=self._stopping)
            except Exception:
                LOG.exception('Checking the fleet queue bindings failed')

    def _schedule(self, interval: float, rng: random.Random) -> list:
        """Each host's next report time, spread evenly over one interval
        in the order of the first reports (each at a random point of its
        own share): the start-up of a large fleet takes a while, and the
        hosts that reported first have waited longest."""
        now = time.monotonic()
        share = interval / max(1, len(self.hosts))
        heap = [(now + share * (index + rng.random()), name)
                for index, name in enumerate(self.hosts)]
        heapq.heapify(heap)
        return heap

    def report_soon(self, compute: SimulatedCompute) -> None:
        """Send ``compute``'s full report at the reporter's next tick.

        For ``send_report``, from the RPC server's threads: the reporter
        sends it with the hosts due then, on the connection it already
        holds, rather than each server thread taking a pooled connection.
        """
        want = getattr(self._api, 'want_full_report', None)
        if want is not None:
            want(compute.name, compute.name)
        with self._asked_lock:
            self._asked.add(compute.name)

    def _take_asked(self) -> list:
        with self._asked_lock:
            asked, self._asked = self._asked, set()
        return sorted(asked)

    def _report_loop(self, interval: float) -> None:
        rng = random.Random()
        heap = self._schedule(interval, rng)
        ctxt = ctx_mod.get_admin_context()
        rate = SendRate()
        measure_until = time.monotonic() + interval
        while heap and not self.stopping:
            now = time.monotonic()
            names = self._take_asked()
            asked = set(names)
            late = 0.0
            while heap and heap[0][0] <= now and not self.stopping:
                due, name = heapq.heappop(heap)
                late = max(late, now - due)
                if name not in asked:
                    names.append(name)
                spread = rng.uniform(1 - self.JITTER, 1 + self.JITTER)
                heapq.heappush(heap, (max(due, now) + interval * spread,
                                      name))
            sent = self.progress.reports
            try:
                self._report_due(ctxt, names)
            except exception.SchedulerTooOld as e:
                # Not the bus: no later report can get through.
                self.fatal = e
                self.request_stop()
                return
            if measure_until is not None:
                rate.add(self.progress.reports - sent, late)
                if time.monotonic() >= measure_until:
                    measure_until = self._say_rate(interval, rate)
            if self.progress.due():
                LOG.info('%(count)d simulated host(s) reporting: '
                         '%(rate).1f reports/s',
                         {'count': len(self.hosts),
                          'rate': self.progress.rate()})
            wait = heap[0][0] - time.monotonic() if heap else self.TICK
            self._stopping.wait(min(max(wait, self.TICK), self.ASKED_WAIT))

    def _say_rate(self, interval: float, rate: SendRate) -> float | None:
        """Log the rate statement; None once said, else (nothing was
        sent yet: every host silent) when to try again."""
        sustained = rate.sustained()
        if sustained is None:
            return time.monotonic() + interval
        warn, text = rate_statement(len(self.hosts), interval, sustained,
                                    rate.late)
        (LOG.warning if warn else LOG.info)('%s', text)
        return None

    def _report_due(self, ctxt, names: list) -> None:
        """Report the hosts ``names`` (due now).

        Through ``SchedulerAPI.report_many`` when the api has it (and
        the hosts serve ``send_report``, as they do once started): the
        liveness of the quiet ones in one message (API 1.6), as a
        compute of many nodes sends it, and the full report of each
        changed one.  Otherwise host by host.  A host that cannot send
        (the bus is down for a while) sends at its next time.
        """
        report_many = getattr(self._api, 'report_many', None)
        if report_many is None or not all(
                self.hosts[name].serves_send_report for name in names):
            for name in names:
                try:
                    if self.hosts[name].report(ctxt):
                        self.progress.reports += 1
                except exception.SchedulerTooOld:
                    raise
                except Exception as e:
                    LOG.warning('Could not send the report of %s: %s',
                                name, e)
            return
        states = [self.hosts[name].snapshot() for name in names
                  if not self.hosts[name].silent]
        if not states:
            return
        try:
            report_many(ctxt, states)
            self.progress.reports += len(states)
        except exception.SchedulerTooOld:
            raise
        except Exception as e:
            LOG.warning('Could not send the reports of %d host(s): %s',
                        len(states), e)

    def stop(self) -> None:
        """Stop reporting and serving; casts in flight finish first."""
        self._stopping.set()
        for thread in self._threads:
            thread.join(timeout=30)
        self._threads = []
        rpc.stop_servers(self._servers)
        self._servers = []
        if self._bound:
            routing.delete_queue(CONF, CONF.compute.topic, self.server_name)
            routing.tidy_up(CONF, CONF.compute.topic)
            self._bound = False
