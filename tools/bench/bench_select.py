#!/usr/bin/env python3
"""Time ``select_destinations`` in process and over RabbitMQ.

Prints, for each fleet size, milliseconds per request (median, p95) and
requests per second, plus the service's resident memory.  Only loopback
addresses are used; every loop is bounded.

    python tools/bench/bench_select.py                     # both modes
    python tools/bench/bench_select.py --mode inprocess --hosts 1000
    python tools/bench/bench_select.py --mode rabbit --requests 200
    python tools/bench/bench_select.py --mode rabbit --hosts 10000 \
        --executor threading --inventory-dir /tmp
    python tools/bench/bench_select.py --mode inprocess --hosts 100000 \
        --instances 1 --columnar on --requests 50
    python tools/bench/bench_select.py --mode inprocess --hosts 10000 \
        --server-group soft-anti-affinity

In process, requests of 1 and of 10 instances are timed with
``[filter_scheduler] columnar`` off (host by host) and on, and the
process's resident memory is printed with the fleet loaded.  With
``--server-group``, every request in process belongs to one server
group of that policy (its soft weigher weighs), whose members are the
instances the last requests placed, listed with their hosts as nova's
conductor lists them.  The
filter scheduler runs the configured filters and
weighers (the defaults unless ``--config-file`` says otherwise) on
``HostState`` objects in memory, claiming as it goes in an in-memory
SQLite inventory (each claim is a real transaction).  Over RabbitMQ, a
real ``scheduler-service`` process (``--executor`` eventlet or
threading) is fed the fleet by fanout casts and called through
``SchedulerAPI`` from this process; its SQLite inventory is also on
/dev/shm unless ``--inventory-dir`` says otherwise.
"""

import argparse
import atexit
import gc
import os
import shutil
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

from scheduler import config  # noqa: E402
from scheduler import context  # noqa: E402
from scheduler import objects  # noqa: E402
from tools.bench import exchange  # noqa: E402

CONF = cfg.CONF
RABBIT = 'rabbit://guest:guest@127.0.0.1:5672/'
#: Seconds the broker keeps a reply queue (the caller's; the service's,
#: if it makes calls) once its process is gone: a run deletes its
#: topic's queues itself, but the caller's reply queue stayed 30
#: minutes (oslo's default) after every run.
REPLY_QUEUES_TTL = 60


def make_fleet(count: int) -> tuple:
    """``count`` host states in two zones, with varied sizes."""
    return [host_state(i) for i in range(count)], make_zones(count)


def make_zones(count: int) -> list:
    """The two zones of a fleet of ``count`` hosts (even and odd)."""
    return [objects.Aggregate(
        id=1 + z, uuid=str(uuid.uuid4()), name='az%d' % (1 + z),
        hosts=[host_name(i) for i in range(z, count, 2)],
        metadata={'availability_zone': 'az%d' % (1 + z)}) for z in (0, 1)]


def host_name(i: int) -> str:
    return 'bench-%05d' % i


def host_state(i: int) -> objects.HostState:
    """Host ``i`` of a generated fleet, as its compute reports it."""
    name = host_name(i)
    return objects.HostState(
        host=name, nodename=name,
        uuid=str(uuid.uuid5(uuid.NAMESPACE_DNS, name)),
        memory_mb=262144 + 1024 * (i % 64), local_gb=4000 + i % 100,
        vcpus=64, cpu_allocation_ratio=4.0, ram_allocation_ratio=1.5,
        disk_allocation_ratio=1.0, hypervisor_type='kvm',
        hypervisor_version=8000000, hypervisor_hostname=name,
        host_ip='127.0.%d.%d' % ((i // 250) % 250, i % 250 + 1),
        supported_instances=[['x86_64', 'kvm', 'hvm']],
        num_instances=i % 7, num_io_ops=i % 5).set_defaults()


def make_spec(i: int, instances: int = 1,
              project: str = 'bench') -> objects.RequestSpec:
    return objects.RequestSpec(
        flavor=objects.Flavor(memory_mb=2048, vcpus=2, root_gb=20,
                              extra_specs={}),
        image=objects.ImageMeta(properties={'hw_architecture': 'x86_64'}),
        availability_zone='az%d' % (1 + i % 2), num_instances=instances,
        project_id=project, user_id='bench')


def _percentile(ms: list, fraction: float) -> float:
    """Of sorted ``ms``: the value ``fraction`` of them do not exceed."""
    return ms[min(len(ms) - 1, max(0, int(round(fraction * len(ms))) - 1))]


def summarize(label: str, samples: list, wall: float) -> None:
    """One line: median, p95, p99 and the slowest (a garbage
    collection of the young generation shows there, once every few
    hundred requests), and the rate."""
    ms = sorted(s * 1000 for s in samples)
    print('%-44s n=%-5d median %8.2f ms   p95 %8.2f ms   %8.1f req/s'
          '   p99 %.2f ms, max %.2f ms'
          % (label, len(ms), statistics.median(ms), _percentile(ms, 0.95),
             len(ms) / wall, _percentile(ms, 0.99), ms[-1]))
    sys.stdout.flush()


def memory_inventory() -> None:
    """A SQLite inventory in a file on a memory-backed file system
    (/dev/shm where there is one): claims are real transactions, with
    no disk to wait for, and the database's pages are not counted in
    the service's resident memory, as for a service whose inventory is a
    file or a server."""
    file_inventory('/dev/shm' if os.path.isdir('/dev/shm') else None)


def file_inventory(where: str | None = None) -> str:
    """A new SQLite inventory file in a new directory under ``where``
    (the system's temporary directory if None), removed at exit; returns
    the directory."""
    from scheduler.db import api
    from scheduler.db import migration
    tmp = tempfile.mkdtemp(prefix='sched-bench-', dir=where)
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)
    CONF.set_override('connection', 'sqlite:///%s/inventory.sqlite' % tmp,
                      group='database')
    api.reset_engine()
    migration.db_sync()
    return tmp


#: New nodes' reports written per flush while a fleet loads in process.
FLUSH_EVERY = 5000


def inprocess_driver(hosts: int):
    """A filter scheduler over ``hosts`` hosts in memory, claims in an
    in-memory SQLite inventory; with the seconds the fleet took to load.
    """
    from scheduler import concurrency
    from scheduler.drivers import filter_scheduler
    from scheduler import host_manager
    # The service's runtime settings, so the figures are comparable.
    concurrency.tune_garbage_collector()
    # A big fleet takes minutes to load: no host may age out meanwhile.
    CONF.set_override('service_down_time', 86400, group='scheduler')
    memory_inventory()
    manager = host_manager.HostManager()
    t0 = time.perf_counter()
    manager.update_aggregates(make_zones(hosts))
    # Reports arrive one by one and are written now and then, as in a
    # service (a fleet made up front would hold every wire object at
    # once, and the RSS printed would be the bench's).
    flushing = 0.0
    for i in range(hosts):
        manager.update_from_report(host_state(i))
        if i % FLUSH_EVERY == FLUSH_EVERY - 1 or i == hosts - 1:
            started = time.perf_counter()
            manager.flush()
            flushing += time.perf_counter() - started
    gc.collect()
    driver = filter_scheduler.FilterScheduler(host_manager=manager)
    #: Seconds of the load spent writing the new nodes' reports.
    driver.bench_flush_seconds = flushing
    return driver, time.perf_counter() - t0


def time_reports(driver, hosts: int, reports: int = 2000) -> None:
    """What one report and one aggregate change cost with ``hosts``
    hosts known: the host manager's work and the inventory write (a
    worker's RPC decoding of the report is not included).  A quiet
    node's report says what its last one said; a busy node's changes
    its usage."""
    manager = driver.host_manager
    count = min(reports, hosts)
    for label, change in (('quiet', 0), ('busy', 1)):
        again = [host_state(i) for i in range(count)]
        for state in again:
            state.num_io_ops += change
        t0 = time.perf_counter()
        for state in again:
            manager.update_from_report(state)
        taken = time.perf_counter() - t0
        t0 = time.perf_counter()
        manager.flush()
        written = time.perf_counter() - t0
        print('in process, %d hosts: one %s report %.0f us to take, %.0f '
              'us to write (flush, per report)'
              % (hosts, label, taken / count * 1e6, written / count * 1e6))
    agg = objects.Aggregate(id=99, uuid=str(uuid.uuid4()), name='bench-fast',
                            hosts=[host_name(i) for i in range(10)],
                            metadata={'cpu_allocation_ratio': '8.0'})
    t0 = time.perf_counter()
    manager.update_aggregates([agg])
    changed = time.perf_counter() - t0
    agg.hosts = [host_name(i) for i in range(count)]
    t0 = time.perf_counter()
    manager.update_aggregates([agg])
    grown = time.perf_counter() - t0
    manager.delete_aggregate(agg)
    print('in process, %d hosts: an aggregate of 10 hosts created in %.1f '
          'ms, grown to %d hosts in %.1f ms (memory and inventory)'
          % (hosts, changed * 1e3, count, grown * 1e3))
    del again
    gc.collect()


#: Members of the bench's server group: the instances of its last
#: requests (a request's own instances join it too).
GROUP_MEMBERS = 20


class ServerGroup:
    """One server group of ``policy`` that the requests join in turn:
    its members are the instances the last requests placed, its hosts
    theirs, as nova's conductor fills ``instance_group``."""

    def __init__(self, policy: str):
        self.policy = policy
        self.uuid = str(uuid.uuid4())
        self.placed: list = []

    def attach(self, spec, uuids: list) -> None:
        kept = self.placed[-GROUP_MEMBERS:]
        spec.instance_group = objects.InstanceGroup(
            uuid=self.uuid, name='bench', policy=self.policy,
            members=[u for u, _h in kept] + list(uuids),
            hosts=[h for _u, h in kept])

    def placed_on(self, uuids: list, selections: list) -> None:
        self.placed += [(u, alts[0].service_host)
                        for u, alts in zip(uuids, selections)]


def time_inprocess(driver, requests: int, instances: int = 1,
                   columnar: bool = True, new_shapes: bool = False,
                   churn: int = 0, policy: str | None = None) -> tuple:
    """``(samples in seconds, wall seconds)`` of in-process requests of
    ``instances`` instances each.

    The requests come in two shapes (two zones), each repeated: a shape
    that repeats is not what production traffic looks like.
    ``new_shapes``: each request is of a shape never seen (a project of
    its own).  ``churn``: that many busy reports (hosts taken in turn)
    are taken between two requests, untimed.  ``policy``: the requests join one
    server group of that policy (``ServerGroup``).
    """
    CONF.set_override('columnar', columnar, group='filter_scheduler')
    ctxt = context.get_admin_context()
    manager = driver.host_manager
    group = ServerGroup(policy) if policy else None

    def spec(i, uuids):
        made = make_spec(i, instances,
                         'bench-%d' % i if new_shapes else 'bench')
        if group is not None:
            group.attach(made, uuids)
        return made

    def place(i, uuids):
        selections = driver.select_destinations(ctxt, spec(i, uuids), uuids,
                                                return_alternates=True)
        if group is not None:
            group.placed_on(uuids, selections)

    # Untimed: the columns are built on the first request.
    for i in range(4):
        place(i, [str(uuid.uuid4()) for _ in range(instances)])
    hosts = len(manager.get_all_host_states())
    samples = []
    start = time.perf_counter()
    for i in range(requests):
        for n in range(churn):
            state = host_state((i * churn + n) % hosts)
            state.num_io_ops = (i + n) % 5
            manager.update_from_report(state)
        uuids = [str(uuid.uuid4()) for _ in range(instances)]
        request = spec(i, uuids)
        t0 = time.perf_counter()
        selections = driver.select_destinations(ctxt, request, uuids,
                                                return_alternates=True)
        samples.append(time.perf_counter() - t0)
        if group is not None:
            group.placed_on(uuids, selections)
    return samples, time.perf_counter() - start


def bench_inprocess(hosts: int, requests: int, instances: list,
                    modes: list, policy: str | None = None) -> None:
    driver, load_s = inprocess_driver(hosts)
    print('in process, %d hosts: fleet loaded in %.1f s, RSS %.0f MB'
          % (hosts, load_s, _rss_mb(os.getpid())))
    flushes = -(-hosts // FLUSH_EVERY)
    print('in process, %d hosts: writing new nodes\' reports took %.2f s '
          '(%d flush(es) of up to %d nodes, %.0f us a node)'
          % (hosts, driver.bench_flush_seconds, flushes, FLUSH_EVERY,
             driver.bench_flush_seconds / hosts * 1e6))
    time_reports(driver, hosts)
    for columnar in modes:
        for k in instances:
            samples, wall = time_inprocess(driver, requests, k, columnar)
            summarize('in process, %d hosts, k=%d, %s'
                      % (hosts, k, 'columnar' if columnar else 'per host'),
                      samples, wall)
            if policy:
                samples, wall = time_inprocess(driver, requests, k,
                                               columnar, policy=policy)
                summarize('in process, %d hosts, k=%d, %s, %s'
                          % (hosts, k, 'columnar' if columnar
                             else 'per host', policy), samples, wall)
    if True in modes:
        # The realistic rows: shapes that do not repeat, and hosts
        # that report between two requests.
        for label, kwargs in (('new shape each', {'new_shapes': True}),
                              ('10 reports between', {'churn': 10}),
                              ('100 reports between', {'churn': 100})):
            samples, wall = time_inprocess(driver, requests, 1, True,
                                           **kwargs)
            summarize('in process, %d hosts, k=1, %s'
                      % (hosts, label), samples, wall)
    print('in process, %d hosts: RSS %.0f MB after the requests'
          % (hosts, _rss_mb(os.getpid())))


def _rss_mb(pid: int) -> float:
    with open('/proc/%d/status' % pid) as f:
        for line in f:
            if line.startswith('VmRSS:'):
                return int(line.split()[1]) / 1024.0
    return float('nan')


def bench_rabbit(hosts: int, requests: int, concurrency: int,
                 executor: str = 'eventlet',
                 inventory_dir: str | None = None) -> None:
    """A ``scheduler-service`` under ``executor`` with its inventory (and
    log) in a new directory under ``inventory_dir``: by default the
    memory-backed file system the in-process figures use, so that the
    two compare decisions, not disks (a claim is a commit, and on a disk
    a commit waits for fsync).  The directory is removed after a run
    that went well, kept (with the service's log) after one that did
    not."""
    from scheduler import rpc
    from scheduler import rpcapi
    if inventory_dir is None and os.path.isdir('/dev/shm'):
        inventory_dir = '/dev/shm'   # where memory_inventory puts its own
    tmp = tempfile.mkdtemp(prefix='sched-bench-', dir=inventory_dir)
    topic = 'bench-%s' % uuid.uuid4().hex[:8]
    db = 'sqlite:///%s/inventory.sqlite' % tmp
    metrics_port = _free_port()
    conf_path = os.path.join(tmp, 'scheduler.conf')
    with open(conf_path, 'w') as f:
        f.write(exchange.default_section()
                + 'transport_url = %s\nhost = bench\n'
                'log_file = %s/scheduler.log\nstate_path = %s\n\n'
                '[scheduler]\ntopic = %s\nservice_down_time = 600\n'
                'periodic_task_interval = 2\nexecutor = %s\n\n'
                '[database]\nconnection = %s\n\n'
                '[oslo_messaging_rabbit]\nrabbit_transient_queues_ttl = %d\n'
                '\n[limits]\nmax_message_bytes = %d\n'
                'max_argument_items = %d\n\n'
                '[prometheus]\nenabled = true\nport = %d\n'
                % (RABBIT, tmp, tmp, topic, executor, db,
                   REPLY_QUEUES_TTL, _message_bytes(hosts),
                   max(100000, 2 * hosts), metrics_port))
    script = os.path.join(os.path.dirname(sys.executable),
                          'scheduler-service')
    proc = subprocess.Popen([script, '--config-file', conf_path],
                            stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL,
                            stderr=subprocess.STDOUT)
    CONF.set_override('transport_url', RABBIT)
    CONF.set_override('topic', topic, group='scheduler')
    CONF.set_override('rabbit_transient_queues_ttl', REPLY_QUEUES_TTL,
                      group='oslo_messaging_rabbit')
    finished = False
    try:
        api = rpcapi.SchedulerAPI(timeout=60)
        ctxt = context.get_admin_context()
        deadline = time.monotonic() + 60
        while True:
            try:
                # A short timeout: a call sent before the server declared
                # its queue is lost, not queued.
                rpcapi.SchedulerAPI(timeout=2).get_version_info(ctxt)
                break
            except Exception:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise SystemExit('scheduler-service did not start; see '
                                     '%s/scheduler.log' % tmp)
                time.sleep(0.5)
        rss_empty = _service_rss_mb(proc.pid)
        states, zones = make_fleet(hosts)
        api.update_aggregates(ctxt, zones)
        t0 = time.perf_counter()
        shown = t0
        for index, state in enumerate(states, 1):
            api.update_service_capabilities(ctxt, state)
            if time.perf_counter() - shown >= 2:
                shown = time.perf_counter()
                print('  loading the fleet: %d/%d reports cast'
                      % (index, hosts), file=sys.stderr, flush=True)
        cast_s = time.perf_counter() - t0
        # The service's own count (its scheduler_hosts gauge, set every
        # periodic_task_interval): an explain to ask would run over every
        # host, a per-host walk that at 100,000 hosts took seconds and
        # hundreds of MB each time it was asked.
        deadline = time.monotonic() + 300 + hosts / 200
        while True:
            known = _service_metrics(metrics_port).get(
                'scheduler_hosts{state="known"}', 0)
            if known >= hosts:
                break
            if time.monotonic() > deadline or proc.poll() is not None:
                raise SystemExit('the service did not take all reports; '
                                 'see %s/scheduler.log' % tmp)
            print('  loading the fleet: the service knows %d/%d hosts'
                  % (known, hosts), file=sys.stderr, flush=True)
            time.sleep(1)
        _wait_until_saved('%s/inventory.sqlite' % tmp, hosts)
        print('%-44s %d reports cast in %.1f s (%.0f/s); service RSS %.0f MB'
              ' empty, %.0f MB with the fleet'
              % ('over RabbitMQ, %d hosts:' % hosts, hosts, cast_s,
                 hosts / cast_s, rss_empty, _service_rss_mb(proc.pid)))
        print('%-44s executor %s, inventory in %s'
              % ('over RabbitMQ, %d hosts:' % hosts, executor, tmp))
        _next_to_noop(hosts, api, ctxt, requests, metrics_port)
        _timed_calls('over RabbitMQ, %d hosts, 1 caller' % hosts, api, ctxt,
                     requests, 1)
        _timed_calls('over RabbitMQ, %d hosts, %d callers'
                     % (hosts, concurrency), api, ctxt, requests, concurrency)
        print('%-44s %d claim(s) lost a race and were tried again'
              % ('over RabbitMQ, %d hosts:' % hosts,
                 _service_metrics(metrics_port).get(
                     'scheduler_claim_conflicts_total', float('nan'))))
        t0 = time.perf_counter()
        explained = api.explain(ctxt, make_spec(0))
        print('%-44s one explain (admin: a reason per rejected host) in '
              '%.2f s, %d hosts known; service RSS %.0f MB after it'
              % ('over RabbitMQ, %d hosts:' % hosts, time.perf_counter() - t0,
                 explained['hosts_known'], _service_rss_mb(proc.pid)))
        finished = True
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            print('scheduler-service did not stop within 60 s of SIGTERM; '
                  'killed (its log: %s/scheduler.log)' % tmp,
                  file=sys.stderr)
            finished = False
            proc.kill()
            proc.wait(10)
        _delete_queues(topic)
        rpc.cleanup()
        if finished:
            shutil.rmtree(tmp, ignore_errors=True)


def _message_bytes(hosts: int) -> int:
    """``[limits] max_message_bytes`` for the service: the default
    (1 MiB) refuses the aggregates cast of a fleet over about 60,000
    hosts (two zones of every other host), as it should a caller's;
    ``max_argument_items`` is raised alike."""
    return max(1 << 20, 40 * hosts)


def _delete_queues(topic: str) -> None:
    """Delete the queues and exchanges the service declared for
    ``topic`` (this run's own): left behind, they stay on the broker
    for good."""
    from scheduler import rpc
    rpc.tidy_service(topic, ['bench'])


def _service_rss_mb(pid: int) -> float:
    """The resident memory of the process that serves: ``pid`` itself
    under eventlet with one worker, its child under the threading
    executor (cotyledon's master forks even one worker, from a thread
    of its own: each thread's children are listed apart)."""
    children = []
    try:
        for task in os.listdir('/proc/%d/task' % pid):
            with open('/proc/%d/task/%s/children' % (pid, task)) as f:
                children += [int(child) for child in f.read().split()]
    except OSError:
        pass
    return max([_rss_mb(pid)] + [_rss_mb(child) for child in children])


def _wait_until_saved(path: str, hosts: int) -> None:
    """Wait for the service to have written every new node to its
    inventory: its first flush of a whole new fleet takes seconds, and
    holds SQLite's write lock meanwhile (claims wait), which is not the
    steady state being measured."""
    import sqlite3
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            with sqlite3.connect(path, timeout=30) as db:
                saved = db.execute('SELECT COUNT(*) FROM node_usage'
                                   ).fetchone()[0]
        except sqlite3.Error:
            saved = 0
        if saved >= hosts:
            # The periodic task's next round (2 s) finds nothing new.
            time.sleep(5)
            return
        print('  loading the fleet: %d/%d nodes saved' % (saved, hosts),
              file=sys.stderr, flush=True)
        time.sleep(1)
    raise SystemExit('the service did not save the fleet in 300 s')


def _next_to_noop(hosts: int, api, ctxt, requests: int,
                  metrics_port: int) -> None:
    """select_destinations beside a call that does nothing
    (``get_version_info``) on the same service and queue, one after the
    other from one caller: the ratio of their medians is what the
    decision adds to a round trip through the broker.  The service's own
    timing of select (its request duration metric: the manager method,
    not oslo.messaging's part) shows how much of that is the decision."""
    # Untimed: the service builds its columns on the first request.
    api.get_version_info(ctxt)
    api.select_destinations(ctxt, make_spec(0), [str(uuid.uuid4())],
                            return_alternates=True)
    inside = _manager_seconds(metrics_port)
    noop, select = [], []
    for i in range(requests):
        # The caller's own objects are made before the clock starts.
        spec, uuids = make_spec(i), [str(uuid.uuid4())]
        t0 = time.perf_counter()
        api.get_version_info(ctxt)
        t1 = time.perf_counter()
        api.select_destinations(ctxt, spec, uuids, return_alternates=True)
        t2 = time.perf_counter()
        noop.append(t1 - t0)
        select.append(t2 - t1)
    summarize('over RabbitMQ, %d hosts, no-op call' % hosts, noop,
              sum(noop))
    summarize('over RabbitMQ, %d hosts, select, same run' % hosts, select,
              sum(select))
    print('%-44s %.2f x the no-op call (medians)'
          % ('over RabbitMQ, %d hosts: select is' % hosts,
             statistics.median(select) / statistics.median(noop)))
    after = _manager_seconds(metrics_port)
    calls = after.get('count', 0) - inside.get('count', 0)
    seconds = after.get('sum', 0) - inside.get('sum', 0)
    print('%-44s %.3f ms a select in the manager method (mean of %d)'
          % ('over RabbitMQ, %d hosts: in the service' % hosts,
             seconds / calls * 1e3 if calls else float('nan'), calls))


def _free_port() -> int:
    """A loopback TCP port nothing listens on now (for the service's
    metrics endpoint)."""
    import socket
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def _manager_seconds(port: int) -> dict:
    """``{'sum': seconds, 'count': calls}`` of select_destinations in the
    service's ``scheduler_request_duration_seconds``."""
    found = _service_metrics(port)
    return {kind: found[name] for kind, name in (
        ('sum', 'scheduler_request_duration_seconds_sum'
                '{method="select_destinations"}'),
        ('count', 'scheduler_request_duration_seconds_count'
                  '{method="select_destinations"}')) if name in found}


def _service_metrics(port: int) -> dict:
    """``{'name{labels}': value}`` from the service's metrics endpoint
    ({} if it cannot be read: the figures are then NaN or 0)."""
    import urllib.request
    try:
        with urllib.request.urlopen('http://127.0.0.1:%d/metrics' % port,
                                    timeout=10) as reply:
            text = reply.read().decode('utf-8')
    except OSError as e:
        print('could not read the service\'s metrics: %s' % e,
              file=sys.stderr)
        return {}
    found = {}
    for line in text.splitlines():
        if line and not line.startswith('#'):
            name, _, value = line.rpartition(' ')
            try:
                found[name] = float(value)
            except ValueError:
                continue
    return found


def _timed_calls(label: str, api, ctxt, requests: int,
                 concurrency: int) -> None:
    samples: list = []
    lock = threading.Lock()
    per_thread = max(1, requests // concurrency)

    def worker(offset):
        for i in range(per_thread):
            t0 = time.perf_counter()
            api.select_destinations(ctxt, make_spec(offset + i),
                                    [str(uuid.uuid4())],
                                    return_alternates=True)
            with lock:
                samples.append(time.perf_counter() - t0)
    threads = [threading.Thread(target=worker, args=(n * per_thread,))
               for n in range(concurrency)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    summarize(label, samples, time.perf_counter() - start)


def load_config(paths: list) -> None:
    """The scheduler's options from ``paths`` (``--config-file``), no
    default files, no logging setup: what the benches run with."""
    conf_args = []
    for path in paths:
        conf_args += ['--config-file', path]
    config.parse_args(conf_args, default_config_files=[],
                      setup_logging=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--mode', choices=['inprocess', 'rabbit', 'all'],
                        default='all')
    parser.add_argument('--hosts', type=int, action='append',
                        help='fleet size (repeatable; default 1000, 10000)')
    parser.add_argument('--requests', type=int, default=200)
    parser.add_argument('--instances', type=int, action='append',
                        help='instances per request in process '
                             '(repeatable; default 1 and 10)')
    parser.add_argument('--columnar', choices=['on', 'off', 'both'],
                        default='both',
                        help='in process: [filter_scheduler] columnar')
    parser.add_argument('--concurrency', type=int, default=8)
    parser.add_argument('--executor', choices=['eventlet', 'threading'],
                        default='eventlet',
                        help='over RabbitMQ: the service\'s [scheduler] '
                             'executor')
    parser.add_argument('--inventory-dir',
                        help='over RabbitMQ: where the service\'s SQLite '
                             'inventory goes (default /dev/shm, as in '
                             'process; a directory on a disk adds its '
                             'fsync to every claim)')
    parser.add_argument('--server-group',
                        choices=['soft-affinity', 'soft-anti-affinity'],
                        help='in process: also time requests of a server '
                             'group of this policy')
    parser.add_argument('--config-file', action='append', default=[])
    args = parser.parse_args()
    load_config(args.config_file)
    for hosts in args.hosts or [1000, 10000]:
        if args.mode in ('inprocess', 'all'):
            bench_inprocess(hosts, args.requests, args.instances or [1, 10],
                            {'on': [True], 'off': [False],
                             'both': [False, True]}[args.columnar],
                            args.server_group)
        if args.mode in ('rabbit', 'all'):
            bench_rabbit(hosts, args.requests, args.concurrency,
                         args.executor, args.inventory_dir)


if __name__ == '__main__':
    main()
