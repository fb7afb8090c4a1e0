#!/usr/bin/env python3
"""Production-shaped figures: a varied fleet, a skewed request mix.

The fleet and the requests come from ``tools/bench/mixed_workload.py``
(seeded): several host types in three zones, aggregates with metadata
that flavors ask for, edge hosts started near full; tens of flavors,
hundreds of projects, image properties, zones, hints naming earlier
instances and server groups of every policy.  Claims are on, in the
default inventory (a SQLite file on disk) or in PostgreSQL (a database
created for the run and dropped after).  Every phase is bounded by a
request count and a duration; the run stops by itself.

    python tools/bench/bench_mixed.py --mode inprocess --hosts 1000
    python tools/bench/bench_mixed.py --mode rabbit --hosts 5000 \\
        --db sqlite --db postgresql --layout 1x2 --layout 2x1

``--mode inprocess``: the filter scheduler, its host manager and the
inventory in this process, no bus: median / p95 / p99 of
select_destinations for requests of 1 and of 10 instances, while host
reports are taken at the rate ``[scheduler] report_interval`` gives
(untimed, between requests).  For quick before/after comparisons.

``--mode rabbit``: real ``scheduler-service`` processes (``--layout``
SERVICESxWORKERS) over the shared RabbitMQ, fed by
``scheduler-compute-sim --fleet`` (reports every report_interval
seconds, builds cast to it after each placement), on topics of the
run's own, deleted after.  Printed: latency of select beside a no-op
call (``get_version_info``) on the same service from one caller;
no-op calls/s, placements/s, then no-op calls/s again from
``--callers`` callers against the same services in the same run (the
ratio against the mean of the two no-op rates, so that load moving on
a shared machine shows); the services' CPU (cores busy) and RSS.
"""

import argparse
import collections
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))

from oslo_config import cfg  # noqa: E402

from scheduler import context  # noqa: E402
from scheduler import exception  # noqa: E402
from tools.bench import bench_claims  # noqa: E402
from tools.bench import bench_select  # noqa: E402
from tools.bench import exchange  # noqa: E402
from tools.bench import mixed_workload as mix  # noqa: E402

CONF = cfg.CONF
RABBIT = bench_select.RABBIT


def _cpu_seconds(pids: list) -> float:
    """User + system CPU seconds of ``pids`` so far (0 for a gone one)."""
    tick = os.sysconf('SC_CLK_TCK')
    total = 0.0
    for pid in pids:
        try:
            with open('/proc/%d/stat' % pid) as f:
                fields = f.read().rpartition(')')[2].split()
            total += (int(fields[11]) + int(fields[12])) / tick
        except (OSError, IndexError, ValueError):
            continue
    return total


def _tree(pid: int) -> list:
    """``pid`` and its children (a service's workers)."""
    found = [pid]
    try:
        for task in os.listdir('/proc/%d/task' % pid):
            with open('/proc/%d/task/%s/children' % (pid, task)) as f:
                found += [int(child) for child in f.read().split()]
    except OSError:
        pass
    return found


def _transactions(url: str) -> int | None:
    """Transactions the database of ``url`` counted so far (PostgreSQL's
    ``pg_stat_database``; None elsewhere): every statement in autocommit
    and every ping is one, so per call they count round trips."""
    import sqlalchemy as sa
    if not url.startswith('postgresql'):
        return None
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:
            # The statistics of a backend reach the view within a second
            # or so: the phases are long enough for that not to matter.
            return conn.execute(sa.text(
                'SELECT xact_commit + xact_rollback FROM pg_stat_database '
                'WHERE datname = current_database()')).scalar()
    finally:
        engine.dispose()


def _rss_total(pids: list) -> float:
    total = 0.0
    for pid in pids:
        try:
            total += bench_select._rss_mb(pid)
        except OSError:
            continue
    return total


def _labelled(label: str, samples: list, wall: float,
              refused: int = 0) -> None:
    bench_select.summarize(label, samples, wall)
    if refused:
        print('%-44s %d of %d answered NoValidHost (in the figures)'
              % ('', refused, len(samples)))


# --- in process --------------------------------------------------------------

class InProcessFleet:
    """The fleet's compute side in process: the hosts, what was built on
    them, reported at the configured rate.

    A host's report is made when it is sent, from the fleet's
    description and what was built on the host, not kept: the bench
    shares its process with the scheduler it measures, and a versioned
    object kept per host would count several times the scheduler's own
    memory in the RSS printed (and its objects in every full garbage
    collection).
    """

    def __init__(self, spec, seed: int):
        self.hosts = list(spec.hosts)
        self.index = {host.name: n for n, host in enumerate(self.hosts)}
        #: Host index -> [memory_mb, vcpus, disk_gb, instance uuids]
        #: built on it, for the hosts with any.
        self.used: dict = {}
        for n, (host, mb, cpus, gb) in enumerate(mix.prefill(spec, seed)):
            self._build(host, mb, cpus, gb, 'prefill-%d' % n)
        self.sent = 0

    def __len__(self) -> int:
        return len(self.hosts)

    def _build(self, host: str, memory_mb: int, vcpus: int, disk_gb: int,
               instance: str) -> None:
        used = self.used.setdefault(self.index[host], [0, 0, 0, []])
        used[0] += memory_mb
        used[1] += vcpus
        used[2] += disk_gb
        used[3].append(instance)

    def state(self, index: int):
        """Host ``index``'s report as its compute would send it now."""
        from scheduler.simulator import agent
        host = self.hosts[index]
        state = agent.build_host_state(host)
        used = self.used.get(index)
        if used is not None:
            memory_mb, vcpus, disk_gb, instances = used
            state.memory_mb_used = memory_mb
            state.vcpus_used = vcpus
            state.local_gb_used = disk_gb
            if state.disk_available_least is not None:
                state.disk_available_least -= disk_gb
            state.num_instances = state.num_io_ops = len(instances)
            state.instance_uuids = list(instances)
        return state

    def report(self, manager, index: int) -> None:
        from oslo_utils import timeutils
        state = self.state(index % len(self.hosts))
        state.updated_at = timeutils.utcnow(with_timezone=True)
        manager.update_from_report(state)
        self.sent += 1

    def built(self, spec_obj, uuids: list, hosts: list,
              manager=None) -> None:
        """The computes build what was placed; each says so to
        ``manager`` (``update_instance_info``, as the service hears
        it after every build)."""
        flavor = spec_obj.flavor
        disk = 0 if spec_obj.is_bfv else flavor.root_gb
        for instance, host in zip(uuids, hosts):
            self._build(host, flavor.memory_mb, flavor.vcpus, disk,
                        instance)
            if manager is not None:
                manager.update_instance_info(host, [instance])


class RoundTrips:
    """What the inventory's engine sent: statements, pings and pool
    checkouts (each of them a wait for the database server), counted
    through SQLAlchemy's events."""

    def __init__(self):
        from scheduler.db import api
        import sqlalchemy as sa
        self.counts: collections.Counter = collections.Counter()
        engine = api.get_engine()
        sa.event.listen(engine, 'before_cursor_execute',
                        lambda *a: self.counts.update(['statements']))
        sa.event.listen(engine, 'checkout',
                        lambda *a: self.counts.update(['checkouts']))
        dialect = engine.dialect
        ping = dialect.do_ping

        def counted(dbapi_connection):
            self.counts['pings'] += 1
            return ping(dbapi_connection)
        # (A bench's probe: the pool pings through its dialect.)
        dialect.do_ping = counted

    def snapshot(self) -> collections.Counter:
        return collections.Counter(self.counts)


def inprocess_driver(hosts: int, seed: int, inventory_dir: str,
                     url: str | None = None):
    from scheduler import concurrency
    from scheduler.drivers import filter_scheduler
    from scheduler import host_manager
    concurrency.tune_garbage_collector()
    CONF.set_override('enabled_filters', mix.ENABLED_FILTERS,
                      group='filter_scheduler')
    before = bench_select._rss_mb(os.getpid())
    spec = mix.fleet(hosts)
    computes = InProcessFleet(spec, seed)
    #: The bench's own part of the RSS printed (the fleet's description).
    computes.rss_mb = bench_select._rss_mb(os.getpid()) - before
    if url is None:
        tmp = bench_select.file_inventory(inventory_dir)
    else:
        tmp = tempfile.mkdtemp(prefix='sched-bench-mixed-',
                               dir=inventory_dir)
        bench_claims._use(url)
    manager = host_manager.HostManager()
    t0 = time.perf_counter()
    manager.update_aggregates(spec.aggregates())
    for i in range(hosts):
        computes.report(manager, i)
        if i % bench_select.FLUSH_EVERY == bench_select.FLUSH_EVERY - 1:
            manager.flush()
    manager.flush()
    driver = filter_scheduler.FilterScheduler(host_manager=manager)
    return driver, computes, time.perf_counter() - t0, tmp


def time_mixed_inprocess(driver, computes, requests: int, duration: float,
                         instances: int, seed: int,
                         trips: RoundTrips | None = None) -> tuple:
    """``(samples, CPU samples, wall, refused, reports taken, reports
    due)``: the
    wall-clock and the CPU seconds of ``requests`` drawn
    from the mix with ``instances`` instances each, for at most
    ``duration`` seconds.  Between two requests (untimed), the reports
    due at ``report_interval`` per host since the start are taken, and
    the inventory is flushed every ``periodic_task_interval``."""
    manager = driver.host_manager
    ctxt = context.get_admin_context()
    draws = mix.RequestMix(seed, instances=instances).draws(requests + 5)
    # A phase's own instances: a uuid placed in an earlier phase is
    # refused (InstanceAlreadyPlaced).
    state = mix.MixState(seed * 1000 + instances)
    per_second = len(computes) / CONF.scheduler.report_interval
    samples, cpu, refused = [], [], 0
    #: Round trips of the timed requests' selects and of their builds'
    #: confirmations.
    sent = {'select': collections.Counter(), 'confirm': collections.Counter()}

    def place(draw, timed):
        nonlocal refused
        uuids = state.new_uuids(draw.instances)
        spec = state.spec(draw, uuids)
        before = trips.snapshot() if trips else None
        c0, t0 = time.thread_time(), time.perf_counter()
        try:
            chosen = driver.select_destinations(ctxt, spec, uuids,
                                                return_alternates=True)
        except exception.NoValidHost:
            chosen = None
        if timed:
            samples.append(time.perf_counter() - t0)
            cpu.append(time.thread_time() - c0)
            if trips:
                sent['select'].update(trips.snapshot() - before)
        if chosen is None:
            refused += timed
            return
        hosts = [alts[0].service_host for alts in chosen]
        state.placed(draw, uuids, hosts)
        before = trips.snapshot() if trips else None
        computes.built(spec, uuids, hosts, manager)
        if timed and trips:
            sent['confirm'].update(trips.snapshot() - before)

    for draw in draws[:5]:       # untimed: columns built, caches warm
        place(draw, False)
    start = time.perf_counter()
    flushed = start
    reports = computes.sent
    for draw in draws[5:]:
        now = time.perf_counter()
        if now - start > duration:
            break
        due = int((now - start) * per_second) - (computes.sent - reports)
        # A process short of CPU cannot take every report due: at most
        # a tenth of a second's worth between two requests, so that the
        # phase still ends on time (the shortfall is printed).
        for _ in range(min(due, 1 + int(per_second / 10))):
            computes.report(manager, computes.sent)
        if now - flushed >= CONF.scheduler.periodic_task_interval:
            manager.flush()
            flushed = now
        place(draw, True)
    wall = time.perf_counter() - start
    return (samples, cpu, wall, refused, computes.sent - reports,
            int(wall * per_second), sent)


def bench_inprocess(hosts: int, args) -> None:
    db = (args.db or ['sqlite'])[0]
    if db == 'sqlite':
        _bench_inprocess(hosts, args, None)
        return
    tmp = tempfile.mkdtemp(prefix='sched-bench-mixed-',
                           dir=args.inventory_dir)
    try:
        with bench_claims.throwaway_database(db, tmp) as url:
            _bench_inprocess(hosts, args, url)
            from scheduler.db import api
            api.reset_engine()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _bench_inprocess(hosts: int, args, url: str | None) -> None:
    driver, computes, load_s, tmp = inprocess_driver(
        hosts, args.seed, args.inventory_dir, url)
    trips = RoundTrips()
    print('in process, %d hosts (%d types, 3 zones, %d aggregates): '
          'loaded in %.1f s, RSS %.0f MB (the bench\'s fleet %.0f MB of '
          'it); inventory %s'
          % (hosts, len(mix.HOST_TYPES), len(mix.AGGREGATES) + 3, load_s,
             bench_select._rss_mb(os.getpid()), computes.rss_mb,
             '%s/inventory.sqlite' % tmp if url is None
             else url.partition('://')[0]))
    for k in args.instances or [1, 10]:
        cpu0 = _cpu_seconds([os.getpid()])
        (samples, cpu, wall, refused, reports, due,
         sent) = time_mixed_inprocess(driver, computes, args.requests,
                                      args.duration, k, args.seed, trips)
        _labelled('in process, %d hosts, mix, k=%d' % (hosts, k), samples,
                  wall, refused)
        # On a loaded machine the wall clock counts the time the process
        # waited for a core; its own CPU time per request does not.
        _labelled('in process, %d hosts, mix, k=%d, CPU time' % (hosts, k),
                  cpu, sum(cpu))
        print('%-44s %d reports taken meanwhile (%.0f/s; %d due); CPU '
              '%.2f cores; RSS %.0f MB'
              % ('', reports, reports / wall, due,
                 (_cpu_seconds([os.getpid()]) - cpu0) / wall,
                 bench_select._rss_mb(os.getpid())))
        n = max(1, len(samples))
        print('%-44s database a request: select %s; its builds\' '
              'confirmations %s'
              % ('', ', '.join('%.2f %s' % (sent['select'][what] / n, what)
                               for what in ('statements', 'pings',
                                            'checkouts')),
                 ', '.join('%.2f %s' % (sent['confirm'][what] / n, what)
                           for what in ('statements', 'pings',
                                        'checkouts'))))
    shutil.rmtree(tmp, ignore_errors=True)


# --- over RabbitMQ -----------------------------------------------------------

class RabbitRun:
    """Services, a simulated fleet and a caller, on topics of their own."""

    def __init__(self, hosts: int, db: str, services: int, workers: int,
                 args):
        self.hosts, self.db = hosts, db
        self.services, self.workers = services, workers
        self.args = args
        run = uuid.uuid4().hex[:8]
        self.topic = 'bench-mixed-%s' % run
        self.compute_topic = 'bench-mixed-compute-%s' % run
        self.fleet_server = 'fleet-%s' % run
        self.tmp = tempfile.mkdtemp(prefix='sched-bench-mixed-',
                                    dir=args.inventory_dir)
        self.procs: list = []
        self.sim = None
        self.spec = mix.fleet(hosts)

    def _extra_config(self) -> str:
        return ('\n[filter_scheduler]\nenabled_filters = %s\n\n'
                '[compute]\ntopic = %s\n\n'
                '[oslo_messaging_rabbit]\nrabbit_transient_queues_ttl = %d\n'
                '\n[limits]\nmax_message_bytes = %d\n'
                'max_argument_items = %d\n'
                % (','.join(mix.ENABLED_FILTERS), self.compute_topic,
                   bench_select.REPLY_QUEUES_TTL,
                   bench_select._message_bytes(self.hosts),
                   max(100000, 2 * self.hosts)))

    def start(self, url: str) -> None:
        import json
        CONF.set_override('transport_url', RABBIT)
        CONF.set_override('topic', self.topic, group='scheduler')
        CONF.set_override('topic', self.compute_topic, group='compute')
        CONF.set_override('rabbit_transient_queues_ttl',
                          bench_select.REPLY_QUEUES_TTL,
                          group='oslo_messaging_rabbit')
        self.procs = bench_claims._start_services(
            url, self.topic, self.services, self.workers, self.tmp,
            extra=self._extra_config())
        fleet_path = os.path.join(self.tmp, 'fleet.json')
        with open(fleet_path, 'w') as f:
            json.dump(mix.fleet_document(self.hosts), f)
        sim_conf = os.path.join(self.tmp, 'sim.conf')
        with open(sim_conf, 'w') as f:
            f.write(exchange.default_section()
                    + 'transport_url = %s\nlog_file = %s/sim.log\n'
                    '\n[scheduler]\ntopic = %s\nservice_down_time = 600\n'
                    # Reports to the intake queue (API 1.5): each taken by
                    # one worker, as a large deployment would run it.
                    'report_intake = true\n'
                    % (RABBIT, self.tmp, self.topic) + self._extra_config())
        sim = os.path.join(os.path.dirname(sys.executable),
                           'scheduler-compute-sim')
        self.sim = subprocess.Popen(
            [sim, '--config-file', sim_conf, '--fleet', fleet_path,
             '--server-name', self.fleet_server,
             '--report-interval', str(self.args.report_interval)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT)

    def wait_fleet(self, api, ctxt) -> float:
        """Seconds until every worker knows every host and the zones."""
        t0 = time.perf_counter()
        deadline = time.monotonic() + (self.args.load_timeout
                                       or 300 + self.hosts / 50)
        probe = mix.MixState(0).spec(mix.RequestMix(0).draw(), ['x'])
        probe.availability_zone = 'az1'
        probe.instance_group = probe.scheduler_hints = None
        good = 0
        while good < 3 * self.services * self.workers:
            if time.monotonic() > deadline or self.sim.poll() is not None:
                raise SystemExit('the fleet did not load; see %s/*.log'
                                 % self.tmp)
            try:
                found = api.explain(ctxt, probe)
                known, passed = found['hosts_known'], found['passed']
            except Exception as e:
                known, passed = 0, str(e)
            if known >= self.hosts and passed:
                good += 1
                continue
            good = 0
            print('  loading the fleet: a worker knows %d/%d hosts'
                  % (known, self.hosts), file=sys.stderr, flush=True)
            time.sleep(2)
        return time.perf_counter() - t0

    def prefill(self, ctxt) -> int:
        """Build the near-full hosts' instances through the simulator."""
        from scheduler import compute_rpcapi
        from scheduler import objects
        computes = compute_rpcapi.ComputeAPI()
        made = mix.prefill(self.spec, self.args.seed)
        for n, (host, mb, cpus, gb) in enumerate(made):
            spec = objects.RequestSpec(flavor=objects.Flavor(
                memory_mb=mb, vcpus=cpus, root_gb=gb, extra_specs={}))
            computes.run_instance(ctxt, host, host,
                                  str(uuid.uuid5(uuid.NAMESPACE_DNS,
                                                 'prefill-%d' % n)), spec)
        return len(made)

    def pids(self) -> list:
        found = []
        for proc in self.procs:
            found += _tree(proc.pid)
        return found

    def stop(self) -> None:
        for proc in [self.sim] + self.procs:
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in [self.sim] + self.procs:
            if proc is None:
                continue
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                print('process %d did not stop within 60 s; killed'
                      % proc.pid, file=sys.stderr)
                proc.kill()
                proc.wait(10)
        self._delete_queues()

    def _delete_queues(self) -> None:
        from scheduler import rpc
        rpc.tidy_service(
            self.topic, ['bench-%d' % n for n in range(self.services)],
            [self.compute_topic,
             '%s.%s' % (self.compute_topic, self.fleet_server)])


def _callers(count: int, duration: float, limit: int, call) -> tuple:
    """``(samples, wall, failures)`` of ``call(i)`` from ``count``
    threads, until ``limit`` calls or ``duration`` seconds."""
    samples: list = []
    failures = [0]
    lock = threading.Lock()
    issued = iter(range(limit))
    stop_at = time.perf_counter() + duration

    def worker():
        while time.perf_counter() < stop_at:
            with lock:
                i = next(issued, None)
            if i is None:
                return
            t0 = time.perf_counter()
            ok = call(i)
            taken = time.perf_counter() - t0
            with lock:
                samples.append(taken)
                failures[0] += not ok
    threads = [threading.Thread(target=worker) for _ in range(count)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return samples, time.perf_counter() - start, failures[0]


def bench_rabbit(hosts: int, db: str, services: int, workers: int,
                 args) -> None:
    from scheduler import compute_rpcapi
    from scheduler import rpc
    from scheduler import rpcapi
    run = RabbitRun(hosts, db, services, workers, args)
    where = '%d hosts, %s, %dx%d' % (hosts, db, services, workers)
    finished = False
    with bench_claims.throwaway_database(db, run.tmp) as url:
        try:
            run.start(url)
            api = rpcapi.SchedulerAPI(timeout=120)
            computes = compute_rpcapi.ComputeAPI()
            ctxt = context.get_admin_context()
            loaded = run.wait_fleet(api, ctxt)
            filled = run.prefill(ctxt)
            # A round of reports carries the prefilled instances; the
            # last seconds of it, with no call, give what the services
            # spend taking reports alone (their idle CPU).
            time.sleep(max(0, args.report_interval - 5))
            pids = run.pids()
            idle_cpu0, idle_t0 = _cpu_seconds(pids), time.perf_counter()
            idle_tx0 = _transactions(url)
            time.sleep(5)
            idle_wall = time.perf_counter() - idle_t0
            idle = (_cpu_seconds(pids) - idle_cpu0) / idle_wall
            idle_tx = None if idle_tx0 is None else \
                (_transactions(url) - idle_tx0) / idle_wall
            print('over RabbitMQ, %s: fleet known in %.0f s, %d instances '
                  'prefilled; services RSS %.0f MB (%d processes), CPU '
                  '%.2f cores with no call (reports)'
                  % (where, loaded, filled, _rss_total(pids), len(pids),
                     idle))
            if idle_tx is not None:
                print('%-44s database: %.0f transactions/s with no call'
                      % ('', idle_tx))
            mixer = mix.RequestMix(args.seed, instances=args.rabbit_k)
            draws = mixer.draws(2 * args.requests + 20)
            state = mix.MixState(args.seed)
            errors: collections.Counter = collections.Counter()
            errors_lock = threading.Lock()

            def select(i):
                draw = draws[i % len(draws)]
                uuids = state.new_uuids(draw.instances)
                spec = state.spec(draw, uuids)
                t0 = time.perf_counter()
                try:
                    chosen = api.select_destinations(
                        ctxt, spec, uuids, return_alternates=True)
                except exception.NoValidHost:
                    return False, time.perf_counter() - t0
                except Exception as e:
                    # A typed error (InventoryUnavailable, a timeout) is
                    # a figure too: counted, and the caller goes on.
                    with errors_lock:
                        errors[type(e).__name__] += 1
                    return False, time.perf_counter() - t0
                taken = time.perf_counter() - t0
                hosts_ = [alts[0].service_host for alts in chosen]
                state.placed(draw, uuids, hosts_)
                for instance, alts in zip(uuids, chosen):
                    computes.run_instance(ctxt, alts[0].service_host,
                                          alts[0].nodename, instance, spec)
                return True, taken

            for i in range(10):          # untimed warm-up
                api.get_version_info(ctxt)
                select(i)
            # One caller, select and no-op in turn on the same service.
            noop, sel, refused = [], [], 0
            stop_at = time.perf_counter() + args.duration
            for i in range(10, 10 + args.requests):
                if time.perf_counter() > stop_at:
                    break
                t0 = time.perf_counter()
                api.get_version_info(ctxt)
                noop.append(time.perf_counter() - t0)
                ok, taken = select(i)
                sel.append(taken)
                refused += not ok
            _labelled('over RabbitMQ, %s, no-op, 1 caller' % where, noop,
                      sum(noop))
            _labelled('over RabbitMQ, %s, select, 1 caller' % where, sel,
                      sum(sel), refused)
            print('%-44s select p50 %.2f x, p99 %.2f x the no-op call'
                  % ('', statistics.median(sel) / statistics.median(noop),
                     bench_select._percentile(sorted(sel), 0.99)
                     / bench_select._percentile(sorted(noop), 0.99)))
            # Many callers: no-op calls/s, placements/s, then no-op
            # calls/s again: on a shared machine the load moves between
            # phases, and the ratio is taken against the mean of the two
            # no-op rates around the placements (both printed).
            rates = {}
            offset = 10 + args.requests

            def noop(i):
                return api.get_version_info(ctxt) or True
            for label, call in (
                    ('no-op', noop),
                    ('select', lambda i: select(offset + i)[0]),
                    ('no-op again', noop)):
                pids = run.pids()
                cpu0 = _cpu_seconds(pids)
                side0 = _cpu_seconds([os.getpid(), run.sim.pid])
                tx0 = _transactions(url)
                samples, wall, failed = _callers(
                    args.callers, args.duration, args.requests, call)
                cpu = (_cpu_seconds(pids) - cpu0) / wall
                side = _cpu_seconds([os.getpid(), run.sim.pid]) - side0
                tx = None if tx0 is None else _transactions(url) - tx0
                rates[label] = (len(samples) - failed) / wall
                _labelled('over RabbitMQ, %s, %s, %d callers'
                          % (where, label, args.callers), samples, wall,
                          failed)
                # Service CPU per call: what the machine's load does not
                # inflate, unlike the wall clock.
                calls = max(1, len(samples))
                print('%-44s %.1f %s/s; services CPU %.2f cores (%.1f ms a '
                      'call, %.1f ms above the no-call CPU), RSS %.0f MB; '
                      'callers + simulator %.1f ms a call'
                      % ('', rates[label], 'calls' if label != 'select'
                         else 'placements' if args.rabbit_k == 1
                         else 'requests placed', cpu,
                         cpu * wall / calls * 1e3,
                         max(0.0, cpu - idle) * wall / calls * 1e3,
                         _rss_total(run.pids()), side / calls * 1e3))
                if tx is not None:
                    print('%-44s database: %.1f transactions a call, %.1f '
                          'above the no-call rate'
                          % ('', tx / calls,
                             max(0.0, tx - idle_tx * wall) / calls))
            if errors:
                print('%-44s errors other than NoValidHost (counted as '
                      'failures above): %s' % ('', ', '.join(
                          '%s x%d' % kv for kv in sorted(errors.items()))))
            noop_rate = (rates['no-op'] + rates['no-op again']) / 2
            print('%-44s placements/s = %.2f x no-op calls/s (%d callers; '
                  'no-op %.0f/s before, %.0f/s after the placements)'
                  % ('over RabbitMQ, %s:' % where,
                     rates['select'] / noop_rate, args.callers,
                     rates['no-op'], rates['no-op again']))
            finished = True
        finally:
            run.stop()
            rpc.cleanup()
    if finished:
        shutil.rmtree(run.tmp, ignore_errors=True)
    else:
        print('logs kept in %s' % run.tmp, file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--mode', choices=['inprocess', 'rabbit'],
                        required=True)
    parser.add_argument('--hosts', type=int, action='append',
                        help='fleet size (repeatable; default 1000 in '
                             'process, 5000 over RabbitMQ)')
    parser.add_argument('--requests', type=int, default=1000,
                        help='at most this many requests per phase')
    parser.add_argument('--duration', type=float, default=60.0,
                        help='at most this many seconds per phase')
    parser.add_argument('--instances', type=int, action='append',
                        help='in process: instances per request '
                             '(repeatable; default 1 and 10)')
    parser.add_argument('--rabbit-k', type=int, default=1,
                        help='over RabbitMQ: instances per request '
                             '(0: drawn from the mix)')
    parser.add_argument('--callers', type=int, default=32)
    parser.add_argument('--db', action='append',
                        choices=['sqlite', 'postgresql'],
                        help='inventory (default sqlite, a file on '
                             'disk); over RabbitMQ repeatable, in process '
                             'the first is used')
    parser.add_argument('--layout', action='append',
                        help='over RabbitMQ: SERVICESxWORKERS '
                             '(repeatable; default 1x2)')
    parser.add_argument('--report-interval', type=int, default=10,
                        help='seconds between two reports of a host')
    parser.add_argument('--seed', type=int, default=25)
    parser.add_argument('--inventory-dir', default=None,
                        help='where the SQLite inventory file goes '
                             '(default: the system\'s temporary '
                             'directory, on disk)')
    parser.add_argument('--load-timeout', type=float, default=0,
                        help='over RabbitMQ: seconds the fleet may take to '
                             'load (default 300 + hosts / 50; more on a '
                             'loaded machine)')
    parser.add_argument('--config-file', action='append', default=[])
    args = parser.parse_args()
    args.rabbit_k = args.rabbit_k or None
    bench_select.load_config(args.config_file)
    CONF.set_override('report_interval', args.report_interval,
                      group='scheduler')
    if args.mode == 'inprocess':
        for hosts in args.hosts or [1000]:
            bench_inprocess(hosts, args)
        return
    for hosts in args.hosts or [5000]:
        for db in args.db or ['sqlite']:
            for layout in args.layout or ['1x2']:
                services, _, workers = layout.partition('x')
                bench_rabbit(hosts, db, int(services), int(workers), args)


if __name__ == '__main__':
    main()
