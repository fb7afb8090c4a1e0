"""The demo's conductor: asks for destinations and checks the answers."""

import time
import uuid


from scheduler.cli import output
from scheduler import compute_rpcapi
from scheduler import context as ctx_mod
from scheduler.demo import buses
from scheduler.demo import scenario as scenarios
from scheduler import exception
from scheduler import objects
from scheduler import rpcapi
from scheduler.simulator import fleet as fleet_mod


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
                if step.how == scenarios.SELECT:
                    self._select(step)
                elif step.how == scenarios.RUN:
                    self._schedule(step)
                else:
                    self._terminate(step)
            except Exception as e:
                self._row(step, result=self._fail(step,
                                                  output.error_line(e)))

    # -- one step each ----------------------------------------------------

    def _context(self, step: scenarios.Step) -> ctx_mod.RequestContext:
        return ctx_mod.RequestContext(
            user_id='demo', project_id='demo', remote_address=step.remote,
            is_admin=step.admin, roles=['admin'] if step.admin else
            ['member'])

    def _spec(self, step: scenarios.Step) -> objects.RequestSpec:
        ignore = None
        if step.ignore_prefix:
            ignore = [h.name for h in self.spec.hosts
                      if h.name.startswith(step.ignore_prefix + '-')]
        return objects.RequestSpec(
            project_id='demo', user_id='demo', num_instances=step.num,
            flavor=scenarios.make_flavor(step.flavor),
            image=objects.ImageMeta(properties={'hw_architecture': step.arch}
                                    if step.arch else {}),
            availability_zone=step.zone, ignore_hosts=ignore)

    def _select(self, step: scenarios.Step) -> None:
        uuids = [str(uuid.uuid4()) for _ in range(step.num)]
        try:
            result = self.api.select_destinations(
                self._context(step), self._spec(step), uuids,
                return_objects=True, return_alternates=step.alternates)
        except exception.NoValidHost as e:
            self._no_valid_host(step, e)
            return
        if step.outcome != scenarios.PLACED:
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
                      'ok: %s' % step.note if step.note else 'ok')

    def _no_valid_host(self, step: scenarios.Step, error) -> None:
        # Over RabbitMQ str() of a remote error ends with its traceback.
        message = error.format_message()
        if step.outcome != scenarios.NO_VALID_HOST:
            self._row(step, result=self._fail(step, message))
        elif step.reason_has not in message:
            self._row(step, result=self._fail(
                step, 'NoValidHost without %r: %s' % (step.reason_has,
                                                      message)))
        else:
            self.expected_errors += 1
            self.notes.append('%s: %s' % (step.label, message))
            self._row(step, result='ok: NoValidHost, as expected')

    def _schedule(self, step: scenarios.Step) -> None:
        uuids = [str(uuid.uuid4()) for _ in range(step.num)]
        failed_before = self.observer.failed_builds()
        self.api.schedule_run_instance(self._context(step), self._spec(step),
                                       uuids)
        if step.outcome == scenarios.REFUSED:
            def refused():
                now = self.observer.failed_builds()
                return [h for h, n in now.items()
                        if n > failed_before.get(h, 0)]
            if not scenarios.wait_for(lambda: bool(refused()),
                                      scenarios.CAST_TIMEOUT):
                self._row(step, result=self._fail(
                    step, 'no compute reported a failed build'))
                return
            self.expected_errors += 1
            host = refused()[0]
            self._row(step, host=host,
                      zone=self.spec.availability_zone(host),
                      result='ok: refused by the compute, as expected')
            return
        if not scenarios.wait_for(
                lambda: len(self.observer.placements(uuids)) == len(uuids),
                scenarios.CAST_TIMEOUT):
            found = self.observer.placements(uuids)
            self._row(step, result=self._fail(
                step, '%d of %d instances running after %g s'
                % (len(found), len(uuids), scenarios.CAST_TIMEOUT)))
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

    def _terminate(self, step: scenarios.Step) -> None:
        if not self.started:
            self._row(step, result=self._fail(step, 'nothing to terminate'))
            return
        ctxt = ctx_mod.get_admin_context()
        started, self.started = self.started, {}
        for inst, host in started.items():
            self.compute_api.terminate_instance(ctxt, host, inst)
        uuids = list(started)
        if not scenarios.wait_for(
                lambda: not self.observer.placements(uuids),
                scenarios.CAST_TIMEOUT):
            self._row(step, result=self._fail(
                step, 'still running: %s' % sorted(
                    self.observer.placements(uuids).values())))
            return
        for index, (inst, host) in enumerate(started.items()):
            self._row(step, index, host, self.spec.availability_zone(host),
                      result='ok: terminated')

    # -- bookkeeping ------------------------------------------------------

    def _check(self, step: scenarios.Step, host: str) -> str | None:
        return step.check(host, self.spec) if step.check else None

    def _fail(self, step: scenarios.Step, problem: str) -> str:
        self.failures.append('%s, %s: %s' % (self.driver, step.label,
                                             problem))
        return 'FAILED: %s' % problem

    def _row(self, step: scenarios.Step, index: int | None = None,
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


def run_driver(bus: buses.LocalBus | buses.RabbitBus, driver: str,
               spec: fleet_mod.FleetSpec, stream) -> Caller:
    """Run ``driver``'s scenario on ``bus`` and print its table."""
    started = time.monotonic()
    try:
        observer = bus.start(driver)
        expected = (len(spec.hosts), len(spec.aggregate_metadata))
        if not scenarios.wait_for(
                lambda: all(k >= e for k, e in zip(observer.known(),
                                                   expected)),
                scenarios.READY_TIMEOUT, interval=0.1):
            hosts, aggregates = observer.known()
            raise scenarios.DemoError(
                '%s: after %d s the scheduler knows %d of %d hosts and %d of '
                '%d aggregates' % (driver, scenarios.READY_TIMEOUT, hosts,
                                   expected[0], aggregates, expected[1]))
        ready = time.monotonic() - started
        caller = Caller(driver, bus.transport, observer, spec)
        caller.run(scenarios.scenario(driver))
    finally:
        bus.stop(driver)
    stream.write('\n== %s == (the scheduler knew all %d hosts after %.1f s)\n'
                 % (driver, len(spec.hosts), ready))
    output.emit(caller.rows, COLUMNS, stream=stream)
    for note in caller.notes:
        stream.write('  NoValidHost for %s\n' % note)
    caller.seconds = time.monotonic() - started
    return caller
