#!/usr/bin/env python3
"""What claims cost: per database, and end to end over RabbitMQ.

Three parts, each printing numbers (no thresholds):

* ``--part claim``: the claim transaction alone (``scheduler.db.usage``)
  on SQLite, PostgreSQL and MariaDB: median and p95 of one claim, and of
  the freshness query every request makes (``changed_since``), over a
  table of ``--nodes`` nodes; with ``--group`` (repeated), claims of
  server groups' members (``--members`` placed already) alternated with
  ungrouped ones, each with its CPU time.  Throw-away databases,
  dropped after.
* ``--part cast``: what a ``schedule_run_instance`` cast adds to the
  inventory's work (``scheduler.cast_ledger``): the taken cast's row
  written (its own commit, the spec serialized), and the claim that
  settles it in its own transaction, next to the same claim without a
  row, alternated on one table of ``--nodes`` nodes, ``--claims``
  casts of one instance each.
* ``--part rabbit``: placements per second at ``--hosts`` hosts with 8
  and 32 concurrent callers, for 1 worker, 2 workers and 2 daemons x 2
  workers on one PostgreSQL inventory, next to the rate of a no-op RPC
  call (an echo endpoint in its own process, on oslo.messaging's
  threading executor) measured in the same run.

Only loopback addresses; every loop is bounded.

    python tools/bench/bench_claims.py --part claim
    python tools/bench/bench_claims.py --part claim --group none \\
        --group anti-affinity --group affinity --members 10
    python tools/bench/bench_claims.py --part cast --nodes 1000
    python tools/bench/bench_claims.py --part rabbit --hosts 5000
"""

import argparse
import concurrent.futures
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))

from oslo_config import cfg  # noqa: E402
import sqlalchemy as sa  # noqa: E402

from scheduler import config  # noqa: E402
from scheduler import context  # noqa: E402
from tools.bench import exchange  # noqa: E402

CONF = cfg.CONF
RABBIT = 'rabbit://guest:guest@127.0.0.1:5672/'
SERVERS = {
    'postgresql': ('postgresql+psycopg2://postgres@127.0.0.1:5432',
                   'postgres', 'DROP DATABASE IF EXISTS {} WITH (FORCE)', ''),
    'mariadb': ('mysql+pymysql://root@127.0.0.1:3306', '',
                'DROP DATABASE IF EXISTS {}', '?charset=utf8mb4'),
}


def _ms(samples: list) -> str:
    ms = sorted(s * 1000 for s in samples)
    p95 = ms[min(len(ms) - 1, int(round(0.95 * len(ms))) - 1)]
    return 'median %7.2f ms  p95 %7.2f ms' % (statistics.median(ms), p95)


@contextlib.contextmanager
def throwaway_database(kind: str, tmp: str):
    """A fresh database URL of ``kind`` (sqlite, postgresql, mariadb)."""
    if kind == 'sqlite':
        yield 'sqlite:///%s/bench-%s.sqlite' % (tmp, uuid.uuid4().hex[:6])
        return
    server, admin_db, drop, query = SERVERS[kind]
    admin = sa.create_engine('%s/%s' % (server, admin_db),
                             isolation_level='AUTOCOMMIT',
                             poolclass=sa.pool.NullPool)
    name = 'sched_bench_' + uuid.uuid4().hex[:10]
    with admin.connect() as conn:
        conn.execute(sa.text('CREATE DATABASE %s' % name))
    try:
        yield '%s/%s%s' % (server, name, query)
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(drop.format(name)))
        admin.dispose()


def _use(url: str) -> None:
    from scheduler.db import api
    from scheduler.db import migration
    CONF.set_override('connection', url, group='database')
    api.reset_engine()
    migration.db_sync()


def claims_of(mode: str, nodes: int, members: int):
    """``request(node)``: the next claim of a server group of ``mode``
    (``none``: no group) whose ``members`` members are placed first, on
    the last nodes: each on its own node (anti-affinity) or all on the
    last one (affinity, where every claim of the group goes)."""
    from scheduler.db import usage
    limits = {'memory_mb': 1 << 30, 'vcpu': 1 << 20, 'disk_gb': 1 << 30}
    group, placed = str(uuid.uuid4()), []

    def request(node: str) -> usage.ClaimRequest:
        uuid_ = str(uuid.uuid4())
        if mode == 'none':
            return usage.ClaimRequest(uuid_, node, node, 512, 1, 10,
                                      limits=limits)
        if mode == 'affinity':
            node = 'node%05d' % (nodes - 1)
        return usage.ClaimRequest(
            uuid_, node, node, 512, 1, 10, limits=limits, group_uuid=group,
            group_members=tuple(placed) + (uuid_,),
            group_max=0 if mode == 'affinity' else 1)

    for i in range(members):
        placed.append(usage.claim(request(
            'node%05d' % (nodes - 1 - i)))['instance_uuid'])
    return request


def bench_claim(kinds: list, nodes: int, claims: int, tmp: str,
                groups: list, members: int) -> None:
    from scheduler.db import api
    from scheduler.db import usage
    from oslo_utils import timeutils
    print('The claim transaction (%d nodes, %d claims, one caller; '
          'grouped: %d members placed, %s alternated):'
          % (nodes, claims, members, ', '.join(groups)))
    for kind in kinds:
        try:
            with throwaway_database(kind, tmp) as url:
                _use(url)
                now = timeutils.utcnow()
                usage.apply_reports([usage.NodeReport(
                    'node%05d' % i, 'node%05d' % i, 0, 0, 0, 0, now,
                    frozenset()) for i in range(nodes)])
                makers = {g: claims_of(g, nodes, members) for g in groups}
                claim_s = {g: [] for g in groups}
                cpu_s = {g: [] for g in groups}
                fresh_s = []
                seq = max(r['seq'] for r in usage.usage_get_all())
                for i in range(claims):
                    # Off the members' nodes: no anti-affinity refusal.
                    node = 'node%05d' % (i * 7919 % (nodes - members - 1))
                    for g in groups:
                        request = makers[g](node)
                        c0, t0 = time.process_time(), time.perf_counter()
                        usage.claim(request)
                        # This process's CPU for a claim: what the
                        # machine's load does not inflate.
                        cpu_s[g].append(time.process_time() - c0)
                        claim_s[g].append(time.perf_counter() - t0)
                    t1 = time.perf_counter()
                    rows = usage.changed_since(seq)
                    fresh_s.append(time.perf_counter() - t1)
                    seq = max([seq] + [r['seq'] for r in rows])
                for g in groups:
                    print('  %-11s %-13s claim %s   CPU %4.0f us a claim'
                          % (kind, g, _ms(claim_s[g]),
                             statistics.mean(cpu_s[g]) * 1e6))
                print('  %-11s freshness query %s' % (kind, _ms(fresh_s)))
                api.reset_engine()
        except Exception as e:  # a server that is down: say so, go on
            print('  %-11s skipped: %s' % (kind, str(e).splitlines()[0]))


def _cast_args() -> dict:
    """A cast's arguments, as a conductor sends them."""
    from scheduler import objects
    objects.register_all()
    spec = objects.RequestSpec(
        flavor=objects.Flavor(memory_mb=512, vcpus=1, root_gb=10),
        num_instances=1, project_id='bench', user_id='bench',
        scheduler_hints={'group': ['anti-affinity-bench']})
    return {'spec_obj': spec, 'instance_uuids': [str(uuid.uuid4())],
            'request_spec': None, 'filter_properties': None}


def bench_cast(kinds: list, nodes: int, claims: int, tmp: str) -> None:
    from scheduler import cast_ledger
    from scheduler.db import api
    from scheduler.db import taken_casts
    from scheduler.db import usage
    from oslo_utils import timeutils
    print('A taken cast\'s row (%d nodes, %d casts, one caller): written, '
          'and settled by the claim' % (nodes, claims))
    ctxt = context.RequestContext(user_id='bench', project_id='bench')
    limits = {'memory_mb': 1 << 30, 'vcpu': 1 << 20, 'disk_gb': 1 << 30}
    for kind in kinds:
        try:
            with throwaway_database(kind, tmp) as url:
                _use(url)
                usage.apply_reports([usage.NodeReport(
                    'node%05d' % i, 'node%05d' % i, 0, 0, 0, 0,
                    timeutils.utcnow(), frozenset()) for i in range(nodes)])
                record_s, settled_s, plain_s = [], [], []
                for i in range(claims):
                    node = 'node%05d' % (i * 7919 % nodes)
                    args = _cast_args()
                    uuid_ = args['instance_uuids'][0]
                    t0 = time.perf_counter()
                    taken = cast_ledger.record(ctxt, args)
                    t1 = time.perf_counter()
                    with taken_casts.serving(taken):
                        usage.claim(usage.ClaimRequest(
                            uuid_, node, node, 512, 1, 10, limits=limits))
                    t2 = time.perf_counter()
                    usage.claim(usage.ClaimRequest(
                        str(uuid.uuid4()), node, node, 512, 1, 10,
                        limits=limits))
                    t3 = time.perf_counter()
                    record_s.append(t1 - t0)
                    settled_s.append(t2 - t1)
                    plain_s.append(t3 - t2)
                added = [r + s - p for r, s, p in
                         zip(record_s, settled_s, plain_s)]
                print('  %-11s row written %s\n  %-11s claim + settle %s\n'
                      '  %-11s claim alone    %s\n  %-11s added a cast '
                      '%s' % (kind, _ms(record_s), '', _ms(settled_s), '',
                              _ms(plain_s), '', _ms(added)))
                api.reset_engine()
        except Exception as e:  # a server that is down: say so, go on
            print('  %-11s skipped: %s' % (kind, str(e).splitlines()[0]))


# --- over RabbitMQ -----------------------------------------------------------

ECHO_SERVER = textwrap.dedent('''
    import sys
    from scheduler import concurrency
    concurrency.setup([])
    import oslo_messaging
    from oslo_config import cfg
    from scheduler import config
    # The scheduler's own defaults (its control exchange, above all).
    config.parse_args([], default_config_files=[], setup_logging=False)

    class Echo:
        @oslo_messaging.expose
        def echo(self, ctxt, value):
            return value

    transport = oslo_messaging.get_rpc_transport(cfg.CONF, url=sys.argv[1])
    server = oslo_messaging.get_rpc_server(
        transport, oslo_messaging.Target(topic=sys.argv[2], server='echo'),
        [Echo()], executor=concurrency.EXECUTOR,
        access_policy=oslo_messaging.ExplicitRPCAccessPolicy)
    server.start()
    print('ready', flush=True)
    sys.stdin.read()    # serve until the benchmark closes our stdin
    server.stop()
    server.wait()
''')


def _concurrent(calls: int, callers: int, call) -> float:
    """Calls per second of ``call(i)`` from ``callers`` threads."""
    with concurrent.futures.ThreadPoolExecutor(callers) as pool:
        start = time.perf_counter()
        list(pool.map(call, range(calls)))
        return calls / (time.perf_counter() - start)


def _noop_rate(calls: int, callers: int) -> float:
    import oslo_messaging

    from scheduler import rpc
    topic = 'bench-echo-%s' % uuid.uuid4().hex[:8]
    # Native threads: the server's main thread blocks on stdin.
    proc = subprocess.Popen([sys.executable, '-c', ECHO_SERVER, RABBIT,
                             topic], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True,
                            env=dict(os.environ,
                                     SCHEDULER_EXECUTOR='threading'))
    try:
        if proc.stdout.readline().strip() != 'ready':
            raise SystemExit('the echo server did not start')
        client = oslo_messaging.get_rpc_client(
            rpc.get_transport(), oslo_messaging.Target(topic=topic),
            timeout=30)
        # A call sent before the server declared its queue is lost:
        # probe with a short timeout until one is answered.
        for _ in range(30):
            try:
                client.prepare(timeout=2).call({}, 'echo', value=0)
                break
            except oslo_messaging.MessagingTimeout:
                continue
        return _concurrent(calls, callers,
                           lambda i: client.call({}, 'echo', value=i))
    finally:
        proc.stdin.close()
        proc.wait(30)


def _start_services(url: str, topic: str, daemons: int, workers: int,
                    tmp: str, extra: str = '', periodic: int = 2) -> list:
    """``daemons`` services of ``workers`` workers on ``topic``, their
    configuration files ending with ``extra`` (sections of its own),
    their periodic tasks every ``periodic`` seconds."""
    procs = []
    for index in range(daemons):
        path = os.path.join(tmp, 'sched-%d.conf' % index)
        with open(path, 'w') as f:
            f.write(exchange.default_section()
                    + 'transport_url = %s\nhost = bench-%d\n'
                    'log_file = %s/sched-%d.log\nstate_path = %s\n\n'
                    '[scheduler]\ntopic = %s\nworkers = %d\n'
                    'service_down_time = 600\nperiodic_task_interval = %d\n\n'
                    '[database]\nconnection = %s\n%s'
                    % (RABBIT, index, tmp, index, tmp, topic, workers,
                       periodic, url, extra))
        script = os.path.join(os.path.dirname(sys.executable),
                              'scheduler-service')
        procs.append(subprocess.Popen(
            [script, '--config-file', path], stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT))
        # One at a time: the first runs the migrations.
        _wait_answer(procs[-1], tmp)
    return procs


def _wait_answer(proc, tmp: str) -> None:
    from scheduler import rpcapi
    deadline = time.monotonic() + 90
    while True:
        try:
            rpcapi.SchedulerAPI(timeout=2).get_version_info(
                context.get_admin_context())
            return
        except Exception:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise SystemExit('scheduler-service did not start; see '
                                 '%s/*.log' % tmp)
            time.sleep(0.5)


def bench_rabbit(hosts: int, calls: int, tmp: str) -> None:
    from scheduler import rpc
    from scheduler import rpcapi
    from tools.bench import bench_select
    CONF.set_override('transport_url', RABBIT)
    print('Placements per second over RabbitMQ, %d hosts, PostgreSQL '
          'inventory (%d calls per figure):' % (hosts, calls))
    noop = {n: _noop_rate(calls, n) for n in (8, 32)}
    print('  %-26s %8.0f calls/s with 8 callers, %8.0f with 32'
          % ('no-op RPC call', noop[8], noop[32]))
    states, zones = bench_select.make_fleet(hosts)
    for daemons, workers in ((1, 1), (1, 2), (2, 2)):
        topic = 'bench-claims-%s' % uuid.uuid4().hex[:8]
        CONF.set_override('topic', topic, group='scheduler')
        with throwaway_database('postgresql', tmp) as url:
            procs = _start_services(url, topic, daemons, workers, tmp)
            try:
                api = rpcapi.SchedulerAPI(timeout=120)
                ctxt = context.get_admin_context()
                for state in states:
                    api.update_service_capabilities(ctxt, state)
                deadline = time.monotonic() + 300
                while api.explain(ctxt, bench_select.make_spec(0))[
                        'hosts_known'] < hosts:
                    if time.monotonic() > deadline:
                        raise SystemExit('the fleet did not load')
                    time.sleep(1)
                # The zones, once every worker's servers are surely up (a
                # cast to a fanout queue not declared yet is lost).
                while not api.explain(ctxt, bench_select.make_spec(0))[
                        'passed']:
                    if time.monotonic() > deadline:
                        raise SystemExit('the zones did not arrive')
                    api.update_aggregates(ctxt, zones)
                    time.sleep(2)
                rates = {}
                for callers in (8, 32):
                    rates[callers] = _concurrent(
                        calls, callers,
                        lambda i: api.select_destinations(
                            ctxt, bench_select.make_spec(i),
                            [str(uuid.uuid4())], return_alternates=True))
                print('  %-26s %8.1f placements/s with 8 callers '
                      '(%.3f x no-op), %8.1f with 32 (%.3f x no-op)'
                      % ('%d daemon(s) x %d worker(s)' % (daemons, workers),
                         rates[8], rates[8] / noop[8], rates[32],
                         rates[32] / noop[32]))
            finally:
                for proc in procs:
                    proc.terminate()
                for proc in procs:
                    proc.wait(60)
    rpc.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--part', choices=['claim', 'cast', 'rabbit', 'all'],
                        default='all')
    parser.add_argument('--db', action='append',
                        choices=['sqlite', 'postgresql', 'mariadb'],
                        help='claim and cast parts: databases (default: '
                             'all three)')
    parser.add_argument('--group', action='append',
                        choices=['none', 'anti-affinity', 'affinity'],
                        help='claim part: whose claims, alternated '
                             '(default: none, ungrouped)')
    parser.add_argument('--members', type=int, default=10,
                        help='claim part: a group\'s members placed '
                             'before its claims are timed')
    parser.add_argument('--nodes', type=int, default=5000)
    parser.add_argument('--claims', type=int, default=500)
    parser.add_argument('--hosts', type=int, default=5000)
    parser.add_argument('--calls', type=int, default=400)
    parser.add_argument('--inventory-dir', default=None,
                        help='where the SQLite file goes (default: the '
                             'system\'s temporary directory; /dev/shm '
                             'leaves the disk\'s flushes out)')
    args = parser.parse_args()
    config.parse_args([], default_config_files=[], setup_logging=False)
    tmp = tempfile.mkdtemp(prefix='sched-bench-claims-',
                           dir=args.inventory_dir)
    if args.part in ('claim', 'all'):
        bench_claim(args.db or ['sqlite', 'postgresql', 'mariadb'],
                    args.nodes, args.claims, tmp, args.group or ['none'],
                    args.members)
    if args.part in ('cast', 'all'):
        bench_cast(args.db or ['sqlite', 'postgresql', 'mariadb'],
                   args.nodes, args.claims, tmp)
    if args.part in ('rabbit', 'all'):
        bench_rabbit(args.hosts, args.calls, tmp)


if __name__ == '__main__':
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))
    main()
