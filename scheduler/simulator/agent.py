"""Simulated compute agents: one per host of a fleet, on the message bus.

Each ``SimulatedCompute`` keeps one host's ``HostState`` and instances
and talks to the scheduler the way a compute agent does:

* it reports its state by ``SchedulerAPI.update_service_capabilities``
  (a fanout cast) when the fleet starts and every ``[scheduler]
  report_interval`` seconds, and right after each change;
* it serves ``run_instance`` and ``terminate_instance`` casts (version
  1.0 of ``scheduler.compute_rpcapi``) on
  ``Target(topic=[compute] topic, server=<host name>)``.  A build that
  does not fit the limits the scheduler sent (or, without limits, the
  host's totals times its allocation ratios) is refused: a warning is
  logged, ``failed_builds`` goes up by one (a successful build resets
  it, as in nova) and ``delete_instance_info`` tells the scheduler to
  drop its claim.  An accepted build is announced by
  ``update_instance_info``, a termination by ``delete_instance_info``.

``Fleet`` runs every host of a ``FleetSpec``: at start it casts
``update_aggregates`` with the fleet's aggregates (so the scheduler's
inventory knows the zones), starts one RPC server per host and reports.

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
import os
import threading

from oslo_config import cfg
from oslo_log import log as logging
import oslo_messaging
from oslo_utils import timeutils

from scheduler import context as ctx_mod
from scheduler import objects
from scheduler.objects import host_state as host_state_obj
from scheduler import rpc
from scheduler import rpcapi
from scheduler.simulator import fleet as fleet_mod

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
        metrics=dict(spec.metrics)).set_defaults()


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

    @property
    def silent(self) -> bool:
        return self.silence.is_silent(self.name)

    def snapshot(self) -> objects.HostState:
        """A copy of the state to send, stamped now."""
        with self._lock:
            state = self.state.obj_clone()
        state.updated_at = timeutils.utcnow(with_timezone=True)
        return state

    def report(self, ctxt=None) -> bool:
        """Send the state to the scheduler; False when silenced."""
        if self.silent:
            return False
        self.api.update_service_capabilities(
            ctxt or ctx_mod.get_admin_context(), self.snapshot())
        return True

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
    """The RPC endpoint of one simulated host (compute RPC API 1.0).

    Only the two casts of ``scheduler.compute_rpcapi`` are exposed:
    ``rpc.get_server`` dispatches nothing else.
    """

    target = oslo_messaging.Target(version='1.0')

    def __init__(self, compute: SimulatedCompute):
        self._compute = compute

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


class Fleet:
    """Every host of a FleetSpec, reporting and serving on one transport.

    ``start(transport)`` casts the aggregates, starts one RPC server per
    host, reports once and then every ``report_interval`` seconds (default
    ``[scheduler] report_interval``) until ``stop()``.  ``scheduler_api``
    replaces the SchedulerAPI (tests record with it).
    """

    def __init__(self, spec: fleet_mod.FleetSpec,
                 control_dir: str | None = None,
                 report_interval: float | None = None,
                 scheduler_api=None):
        self.spec = spec
        self.silence = SilenceSwitch(control_dir)
        self.report_interval = report_interval
        self._api = scheduler_api
        self.hosts: dict = {
            host.name: SimulatedCompute(host, scheduler_api, self.silence)
            for host in spec.hosts}
        self._servers: list = []
        self._stopping = threading.Event()
        self._reporter: threading.Thread | None = None

    def set_silent(self, name: str, silent: bool = True) -> None:
        if name not in self.hosts:
            raise KeyError(name)
        self.silence.set(name, silent)

    def start(self, transport=None) -> None:
        """Join the bus: aggregates, RPC servers, first report, timer.

        The scheduler must already listen: fanout casts reach only the
        schedulers that are up.
        """
        if self._api is None:
            self._api = rpcapi.SchedulerAPI(transport=transport)
        for compute in self.hosts.values():
            compute.api = self._api
        self.send_aggregates()
        for name, compute in self.hosts.items():
            target = oslo_messaging.Target(topic=CONF.compute.topic,
                                           server=name)
            self._servers.append(rpc.get_server(
                target, [ComputeEndpoint(compute)], transport=transport))
        _side_by_side(lambda server: server.start(), self._servers)
        reported = self.report_all()
        interval = self.report_interval or CONF.scheduler.report_interval
        LOG.info('Simulating %(count)d compute host(s) on topic %(topic)s; '
                 '%(reported)d reported; next reports every %(interval)s s',
                 {'count': len(self.hosts), 'topic': CONF.compute.topic,
                  'reported': reported, 'interval': interval})
        self._stopping.clear()
        self._reporter = threading.Thread(target=self._report_loop,
                                          args=(interval,),
                                          name='fleet-reporter', daemon=True)
        self._reporter.start()

    def send_aggregates(self) -> None:
        aggregates = self.spec.aggregates()
        if aggregates:
            self._api.update_aggregates(ctx_mod.get_admin_context(),
                                        aggregates)

    def report_all(self) -> int:
        """Report every host that is not silenced; return how many did."""
        ctxt = ctx_mod.get_admin_context()
        return sum(1 for compute in self.hosts.values()
                   if compute.report(ctxt))

    def _report_loop(self, interval: float) -> None:
        while not self._stopping.wait(interval):
            try:
                self.report_all()
            except Exception:
                # The bus may be down for a while: try again next time.
                LOG.exception('Could not send the fleet reports')

    def stop(self) -> None:
        """Stop reporting and serving; casts in flight finish first."""
        self._stopping.set()
        if self._reporter is not None:
            self._reporter.join(timeout=30)
            self._reporter = None
        _side_by_side(_halt, self._servers)
        self._servers = []


def _side_by_side(action, servers: list) -> None:
    """Run ``action`` on every server at once, wait for all, raise the
    first error.

    Over RabbitMQ starting a server waits for the broker and stopping one
    for its consumer's poll timeout (up to seconds): one after the other,
    a fleet of 50 would take that long 50 times.
    """
    errors: list = []

    def run(server):
        try:
            action(server)
        except Exception as e:
            errors.append(e)

    threads = [threading.Thread(target=run, args=(server,),
                                name='rpc-server-%d' % index)
               for index, server in enumerate(servers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


def _halt(server) -> None:
    try:
        server.stop()
        server.wait()
    except Exception:
        LOG.exception('Error stopping an RPC server of the fleet')
