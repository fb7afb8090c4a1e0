#!/usr/bin/env python3
"""Service CPU per host report: each worker takes every report (fanout,
API 1.4) or one worker takes it and the others read the inventory
(intake, API 1.5).  In process, on one SQLite file inventory.

For each fleet size, mode, number of workers (a service's workers or
services with one worker each: the same arithmetic) and kind of report
(``quiet``: the same state again; ``busy``: a changed usage), it runs
one report interval: every host reports once, every worker flushes its
backlog (as its periodic task does) and reads what the others wrote
(``refresh_changed_reports``, as before a request, and
``refresh_reports``, periodic: within one interval no time held gets
old enough to be read again), and prints the process CPU
time per report, the ratio to one worker, and the reports per second
one core takes at that cost (beyond which reports wait on the bus and
the lag grows).  Each report is decoded from its wire form (JSON, then
the HostState object) by each worker that takes it, as the RPC server
does; what the broker and oslo.messaging add before that (about
0.8 ms a message a worker, issue 26) is not in these figures, and is
paid once per report with the intake, once per worker with the fanout.

In process, a report from the intake is written as the service writes
it (``HostManager.update_from_report`` with ``shared``), in batches: the
reports of one write window (``report_writer.WINDOW``) at ``--rate``
reports a second for the deployment, shared among the workers, and
every worker reads the others' changes once a window (as a worker
serving requests does before each).

``--mode rabbit`` measures from outside instead, end to end: a real
``scheduler-service`` per ``--layout`` (SERVICESxWORKERS) on a throwaway
PostgreSQL inventory and the shared RabbitMQ, on topics of the run's
own; sender processes (this script, ``--send``, ``--senders`` of them)
cast every host's report once per ``--interval`` through
``SchedulerAPI``, to the intake or by the fanout (``--paths``); quiet
reports say the same again, busy ones a new usage each time. After a
warm-up round the services' process trees' CPU time (/proc) over
``--seconds`` is divided by the reports sent meanwhile (``--report-workers``
sets the services' ``[scheduler] report_workers``: how many workers of
each consume the report queues). Report lag: for
busy reports, from the compute's send to the inventory (each host's last
stored row: its write time less the report's own time). The services'
CPU with no report at all over the same time is printed too (``idle``:
periodic tasks and the bus's heartbeats), not taken off.

    python tools/bench/bench_reports.py
    python tools/bench/bench_reports.py --hosts 10000 100000 --workers 1 4 \
        --kinds quiet --rounds 1
    python tools/bench/bench_reports.py --mode rabbit --hosts 2000 \
        --interval 5 --layout 1x1 --layout 1x4 --seconds 40
"""

import argparse
import json
import logging
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))

from oslo_config import cfg  # noqa: E402
from oslo_utils import timeutils  # noqa: E402

from scheduler import config  # noqa: E402
from scheduler import context  # noqa: E402
from scheduler.db import api as db_api  # noqa: E402
from scheduler.db import migration  # noqa: E402
from scheduler.drivers import filter_scheduler  # noqa: E402
from scheduler import host_manager  # noqa: E402
from scheduler import manager as manager_mod  # noqa: E402
from scheduler.objects import host_state as host_state_obj  # noqa: E402
from scheduler import report_writer  # noqa: E402
from scheduler import rpc  # noqa: E402
from tools.bench import exchange  # noqa: E402
from scheduler.simulator import agent  # noqa: E402
from scheduler.simulator import fleet as fleet_mod  # noqa: E402

CONF = cfg.CONF


def _wire(states: list) -> list:
    """Each report as the bus carries it: a JSON text."""
    ser = rpc.RequestContextSerializer()
    ctxt = context.get_admin_context()
    return [json.dumps(ser.serialize_entity(ctxt, s)) for s in states]


def _decode(text: str, ser, ctxt):
    return ser.deserialize_entity(ctxt, json.loads(text))


def _alive_wire(states: list) -> list:
    """Each host's liveness message (API 1.6) as the bus carries its
    arguments: a JSON text."""
    now = time.time()
    return [json.dumps({'nodes': [[s.host, s.nodename,
                                   host_state_obj.content_digest(s)]],
                        'sent_at': now}) for s in states]


def _take_alive(endpoints: list, wire: list, ser, ctxt) -> None:
    """Each liveness message decoded and taken by one worker's endpoint
    (``ReportsEndpoint.take_alive``), as the intake shares them."""
    for index, text in enumerate(wire):
        args = json.loads(text)
        endpoints[index % len(endpoints)].take_alive(
            ctxt, ser.deserialize_entity(ctxt, args['nodes']),
            args['sent_at'])


def _interval(workers: list, wire: list, fanout: bool,
              rate: float = 400.0, endpoints: list | None = None) -> float:
    """CPU seconds of one interval: every report taken, written, read.

    Fanout: every worker takes every report and writes what changed at
    its flush.  Intake: one worker takes each, writes the changed ones
    of each write window (``rate`` a second) in one batch, and the
    others read them before their next request
    (``refresh_changed_reports``); then every worker flushes (the
    times of quiet reports) and runs its periodic read
    (``refresh_reports``).  With ``endpoints`` (one a worker), ``wire`` holds
    liveness messages (API 1.6), shared among them as the intake
    shares reports.
    """
    ser = rpc.ServerSerializer()
    ctxt = context.get_admin_context()
    for worker in workers:
        worker._writer.window = 0.0
    batch = max(1, int(rate * report_writer.WINDOW))
    began = time.process_time()
    if endpoints:
        _take_alive(endpoints, wire, ser, ctxt)
        wire = []
    for start in range(0, len(wire), batch):
        chunk = wire[start:start + batch]
        if fanout:
            for text in chunk:
                for worker in workers:
                    worker.update_from_report(_decode(text, ser, ctxt))
            continue
        # As while a write is under way: the reports of the window wait,
        # then one write takes them all.
        for worker in workers:
            worker._writer._writing = True
        for index, text in enumerate(chunk, start):
            workers[index % len(workers)].update_from_report(
                _decode(text, ser, ctxt), shared=True)
        for worker in workers:
            left = worker._writer.take_all()
            worker._writer._writing = False
            if left:
                worker._write_taken(left)
        for worker in workers:
            worker.refresh_changed_reports()
    for worker in workers:
        worker.flush()
    for worker in workers:
        worker.refresh_reports()
    return time.process_time() - began


def _fleet(hosts: int, busy_round: int) -> list:
    spec = fleet_mod.uniform(hosts, prefix='bench', memory_mb=65536,
                             vcpus=32, local_gb=2000)
    states = []
    for host in spec.hosts:
        state = agent.build_host_state(host)
        # A busy round changes every host's usage; a quiet one repeats it.
        state.memory_mb_used = 512 * busy_round
        states.append(state)
    return states


def run(hosts: int, worker_counts: list, rounds: int,
        kinds: tuple = ('quiet', 'busy'), rate: float = 400.0,
        paths: tuple = ('fanout', 'intake')) -> None:
    for fanout in [path == 'fanout' for path in paths]:
        mode = 'fanout (1.4)' if fanout else 'intake (1.5)'
        base: dict = {}
        for count in worker_counts:
            with tempfile.TemporaryDirectory() as tmp:
                url = 'sqlite:///%s' % os.path.join(tmp, 'inventory.sqlite')
                CONF.set_override('connection', url, group='database')
                db_api.reset_engine()
                migration.db_sync()
                workers = [host_manager.HostManager()
                           for _ in range(count)]
                for worker in workers:
                    worker.load_from_inventory()
                # The fleet's first reports (not measured).
                _interval(workers, _wire(_fleet(hosts, 0)), fanout, rate)
                endpoints = [manager_mod.SchedulerManager(
                    driver=filter_scheduler.FilterScheduler(worker)
                ).reports for worker in workers]
                for kind in kinds:
                    if kind == 'alive' and fanout:
                        continue
                    spent = 0.0
                    for n in range(rounds):
                        busy = n + 1 if kind == 'busy' else 0
                        if kind == 'alive':
                            spent += _interval(
                                workers, _alive_wire(_fleet(hosts, 0)),
                                fanout, rate, endpoints)
                            continue
                        wire = _wire(_fleet(hosts, busy))
                        spent += _interval(workers, wire, fanout, rate)
                    per = spent / (rounds * hosts)
                    base.setdefault(kind, per)
                    print('%7d hosts  %-13s %d worker(s)  %-5s  %7.1f us '
                          'CPU/report  x%.2f of 1 worker  %8.0f reports/s '
                          'a core' % (hosts, mode, count, kind, per * 1e6,
                                      per / base[kind], 1 / per),
                          flush=True)
                db_api.reset_engine()


# --- end to end, over RabbitMQ ----------------------------------------------

def _sender_main(args) -> None:
    """``--send``: cast the reports of hosts ``--first`` to ``--first +
    --hosts`` once per interval, evenly spread, and keep the count sent
    in ``--count-file`` (written every second): the bench divides the
    services' CPU by it."""
    from scheduler import rpcapi
    config.parse_args([], default_config_files=[])
    exchange.use(args.exchange)
    CONF.set_override('transport_url', args.url)
    CONF.set_override('topic', args.topic, group='scheduler')
    CONF.set_override('report_intake', args.path == 'intake',
                      group='scheduler')
    logging.getLogger('scheduler').setLevel(logging.WARNING)
    api = rpcapi.SchedulerAPI(transport=rpc.get_transport(url=args.url))
    ctxt = context.get_admin_context()
    states = _fleet(args.first + args.hosts[0], 0)[args.first:]
    sent, started, told = 0, time.monotonic(), 0.0
    batch: list = []
    step = args.interval / len(states)
    while True:
        round_no = sent // len(states)
        state = states[sent % len(states)]
        if args.kind == 'busy':
            # A new usage in every report: every one is a change.
            state.memory_mb_used = 512 * (1 + round_no % 50)
        started = _keep_pace(started, sent, step, args.interval)
        pause = started + sent * step - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        # Made now, as a compute stamps each report.
        state.updated_at = timeutils.utcnow()
        if args.contexts == 'fresh':
            # As a compute's periodic run: a new context, a new request
            # id, for each report (nothing the service keeps can hang on
            # one context).
            ctxt = context.get_admin_context()
        # As a compute of this release: a report with nothing new goes
        # as a liveness message when the schedulers take them (1.6);
        # with --batch, as a compute of many nodes (or the simulator)
        # sends them: the quiet ones of a batch in one message.
        if args.batch > 1:
            batch.append(state)
            if len(batch) >= args.batch:
                api.report_many(ctxt, batch)
                batch = []
        else:
            api.report(ctxt, state)
        sent += 1
        now = time.monotonic()
        if now - told >= 1.0:
            told = now
            with open(args.count_file + '.tmp', 'w') as f:
                f.write('%d %f\n' % (sent, now))
            os.replace(args.count_file + '.tmp', args.count_file)


def _keep_pace(started: float, sent: int, step: float,
               interval: float) -> float:
    """The start of the sender's schedule: moved on when the sender
    fell more than an interval behind (starved of CPU, or its first
    round of full reports), so that it goes on at the fleet's rate
    instead of sending what it owes in a burst, as a late compute
    reports late rather than twice."""
    behind = time.monotonic() - (started + sent * step)
    return started + behind if behind > interval else started


def _count(path: str) -> int:
    try:
        with open(path) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def _service_cpu(procs: list) -> float:
    from tools.bench import bench_mixed
    return bench_mixed._cpu_seconds(
        [pid for proc in procs for pid in bench_mixed._tree(proc.pid)])


def _lags(hosts: int) -> list:
    """Each host's last stored report: seconds from the compute's send
    to the inventory."""
    from scheduler.db import hosts as hosts_db
    lags = []
    for row in hosts_db.host_reports_get_all():
        sent = row['report'].get('versioned_object.data', {}).get(
            'updated_at')
        if not sent or row['updated_at'] is None:
            continue
        sent_at = timeutils_parse(sent)
        lags.append((row['updated_at'] - sent_at).total_seconds())
    return lags


def timeutils_parse(text: str):
    return timeutils.normalize_time(timeutils.parse_isotime(text))


def _known(api, ctxt, workers: int) -> int:
    """Hosts known to the worker that answers (least of a few answers)."""
    from scheduler import objects
    spec = objects.RequestSpec(flavor=objects.Flavor(
        memory_mb=1, vcpus=1, root_gb=0, ephemeral_gb=0, swap=0,
        extra_specs={}))
    seen = []
    for _ in range(2 * workers):
        try:
            seen.append(api.explain(ctxt, spec)['hosts_known'])
        except Exception:
            seen.append(0)
    return min(seen)


def rabbit_run(hosts: int, services: int, workers: int, path: str,
               kind: str, args, tmp: str) -> dict:
    """One layout, path and kind of report: the figures."""
    from scheduler.db import api as db_api
    from scheduler import rpcapi
    from tools.bench import bench_claims
    from tools.bench import bench_select
    topic = 'bench-reports-%s' % uuid.uuid4().hex[:8]
    CONF.set_override('transport_url', bench_select.RABBIT)
    CONF.set_override('topic', topic, group='scheduler')
    # This process's reply queue (``_known``'s calls), and the
    # services', go a minute after they stop, not half an hour.
    CONF.set_override('rabbit_transient_queues_ttl',
                      bench_select.REPLY_QUEUES_TTL,
                      group='oslo_messaging_rabbit')
    count_file = os.path.join(tmp, 'sent-%s' % topic)
    with bench_claims.throwaway_database('postgresql', tmp) as url:
        procs = bench_claims._start_services(
            url, topic, services, workers, tmp,
            periodic=args.periodic_task_interval,
            extra='\n[limits]\nmax_argument_items = %d\n'
            '\n[oslo_messaging_rabbit]\nrabbit_transient_queues_ttl = %d\n'
            % (max(100000, 2 * hosts), bench_select.REPLY_QUEUES_TTL) + (
                '' if args.report_workers is None else
                '\n[scheduler]\nreport_workers = %d\n'
                % args.report_workers))
        senders = []
        try:
            CONF.set_override('connection', url, group='database')
            db_api.reset_engine()
            time.sleep(args.interval)
            cpu0 = _service_cpu(procs)
            time.sleep(args.seconds)
            idle = (_service_cpu(procs) - cpu0) / args.seconds
            share = -(-hosts // _senders(hosts, args))
            senders = [subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), '--send',
                 '--url', bench_select.RABBIT, '--topic', topic,
                 '--exchange', exchange.NAME,
                 '--first', str(first),
                 '--hosts', str(min(share, hosts - first)),
                 '--interval', str(args.interval), '--kind', kind,
                 '--path', path, '--batch', str(args.batch),
                 '--contexts', args.contexts, '--count-file',
                 '%s-%d' % (count_file, first)],
                stdin=subprocess.DEVNULL)
                for first in range(0, hosts, share)]
            counts = ['%s-%d' % (count_file, first)
                      for first in range(0, hosts, share)]
            api = rpcapi.SchedulerAPI(timeout=60)
            ctxt = context.get_admin_context()
            deadline = time.monotonic() + _load_time(hosts, args.interval)
            while _known(api, ctxt, services * workers) < hosts:
                if time.monotonic() > deadline or any(
                        sender.poll() is not None for sender in senders):
                    raise SystemExit('the fleet did not load; see %s'
                                     % tmp)
                time.sleep(1)
            # A warm-up round: every host reported once more.
            time.sleep(args.interval)
            sent0, cpu0, t0 = (sum(map(_count, counts)),
                               _service_cpu(procs), time.monotonic())
            time.sleep(args.seconds)
            sent1, cpu1, t1 = (sum(map(_count, counts)),
                               _service_cpu(procs), time.monotonic())
            lags = _lags(hosts) if kind == 'busy' else []
        finally:
            for sender in senders:
                sender.send_signal(signal.SIGTERM)
            for sender in senders:
                sender.wait(30)
            for proc in procs:
                proc.send_signal(signal.SIGTERM)
            for proc in procs:
                try:
                    proc.wait(60)
                except subprocess.TimeoutExpired:
                    proc.kill()
            _delete_queues(topic, services)
            db_api.reset_engine()
    wall = t1 - t0
    reports = max(1, sent1 - sent0)
    return {'per': (cpu1 - cpu0) / reports, 'cores': (cpu1 - cpu0) / wall,
            'rate': reports / wall, 'idle': idle, 'lags': lags}


#: Reports a second one sender process keeps up with on a loaded
#: machine: one cast each, or (``--batch``) a digest each and one
#: liveness message a batch.
SENDER_RATE = {'single': 250, 'batched': 2000}


def _senders(hosts: int, args) -> int:
    """``--senders``, else enough sender processes for the fleet's rate:
    a sender that falls behind sends fewer reports than the figures
    assume and the fleet's hosts go down."""
    if args.senders:
        return args.senders
    per = SENDER_RATE['batched' if args.batch > 1 else 'single']
    return max(1, -(-int(hosts / args.interval) // per))


def _load_time(hosts: int, interval: float) -> float:
    """How long the fleet's first full reports may take to reach every
    worker: the services take them one by one, behind the senders'
    first round."""
    return 120 + 3 * interval + hosts / 50


def _delete_queues(topic: str, services: int) -> None:
    rpc.tidy_service(topic, ['bench-%d' % n for n in range(services)])


def bench_rabbit(args) -> None:
    hosts = args.hosts[0]
    print('%d hosts reporting every %g s (%.0f reports/s), services\' CPU '
          'over %d s after a warm-up round, PostgreSQL, shared RabbitMQ%s'
          % (hosts, args.interval, hosts / args.interval, args.seconds,
             '' if args.report_workers is None else
             ', report_workers = %d' % args.report_workers))
    print('%d sender process(es), %s, %s' % (
        _senders(hosts, args), 'the quiet nodes of %d reports in one '
        'liveness message' % args.batch if args.batch > 1
        else 'one message a report',
        'a new context a report' if args.contexts == 'fresh'
        else 'one context a sender'))
    for path in args.paths:
        for kind in args.kinds:
            base = None
            for layout in args.layout:
                services, workers = (int(n) for n in layout.split('x'))
                load = os.getloadavg()[0]
                # Kept when the run fails: the services' logs say why.
                tmp = tempfile.mkdtemp(prefix='sched-bench-reports-')
                got = rabbit_run(hosts, services, workers, path, kind, args,
                                 tmp)
                shutil.rmtree(tmp, ignore_errors=True)
                base = base or got['per']
                lag = ''
                if got['lags']:
                    lags = sorted(got['lags'])
                    lag = '  lag to inventory median %.2f s p95 %.2f s ' \
                        'max %.2f s' % (statistics.median(lags),
                                        lags[int(0.95 * (len(lags) - 1))],
                                        lags[-1])
                print('%-6s %-5s %dx%d  %6.0f us CPU/report  x%.2f  %.2f '
                      'cores (idle %.3f)  %5.0f reports/s  load %.1f%s'
                      % (path, kind, services, workers, got['per'] * 1e6,
                         got['per'] / base, got['cores'], got['idle'],
                         got['rate'], load, lag), flush=True)
                warning = _behind(got, hosts / args.interval, args.interval)
                if warning:
                    print('       NOT A FIGURE: %s' % warning, flush=True)


def _behind(got: dict, asked: float, interval: float) -> str:
    """Why a run's CPU a report is not the cost of a report, if it is
    not: the CPU is divided by the reports sent, so senders short of
    the rate asked (a loaded machine) or services behind them (reports
    waiting on the bus, the lag past an interval) make it a figure of
    the load, lower than what a report costs when every one is taken
    as it comes (a backlog is written in larger batches)."""
    why = []
    if got['rate'] < 0.9 * asked:
        why.append('the senders reached %.0f of the %.0f reports/s asked'
                   % (got['rate'], asked))
    if got['lags'] and statistics.median(got['lags']) > interval:
        why.append('the median lag to the inventory (%.1f s) is past the '
                   'interval: the services were behind'
                   % statistics.median(got['lags']))
    return '; '.join(why)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--mode', choices=['inprocess', 'rabbit'],
                        default='inprocess')
    parser.add_argument('--hosts', type=int, nargs='+',
                        default=[2000, 10000])
    parser.add_argument('--workers', type=int, nargs='+', default=[1, 2, 4])
    parser.add_argument('--rounds', type=int, default=2)
    parser.add_argument('--kinds', nargs='+', default=['quiet', 'busy'],
                        choices=['quiet', 'busy', 'alive'],
                        help='in process: alive is a liveness message '
                        '(API 1.6) of a quiet host, intake only')
    parser.add_argument('--rate', type=float, default=400.0,
                        help='in process: reports a second of the '
                        'deployment (how many a write window gathers)')
    parser.add_argument('--layout', action='append',
                        help='rabbit: SERVICESxWORKERS (repeatable; '
                        'default 1x1 and 1x4)')
    parser.add_argument('--paths', nargs='+', default=['intake', 'fanout'],
                        choices=['intake', 'fanout'],
                        help='how reports reach the workers (a fleet of '
                        '100,000 hosts takes minutes a path in process)')
    parser.add_argument('--interval', type=float, default=5.0,
                        help='rabbit: seconds between two reports of a host')
    parser.add_argument('--seconds', type=int, default=40,
                        help='rabbit: seconds measured')
    parser.add_argument('--periodic-task-interval', type=int, default=10,
                        help="rabbit: the services' flush interval")
    parser.add_argument('--batch', type=int, default=1,
                        help='rabbit: nodes a sender reports at once '
                        '(SchedulerAPI.report_many: the quiet ones in one '
                        'liveness message, as the simulator sends them)')
    parser.add_argument('--contexts', choices=['fresh', 'shared'],
                        default='fresh',
                        help='rabbit: a new request context for each '
                        'report, as a compute makes one for each periodic '
                        'run (default), or one context for every report '
                        'of a sender')
    parser.add_argument('--report-workers', type=int, default=None,
                        help="rabbit: the services' [scheduler] "
                        'report_workers (default: theirs; 0: every worker '
                        'consumes the report queues)')
    parser.add_argument('--senders', type=int,
                        help='rabbit: sender processes (the hosts shared '
                        'among them); default: enough for the fleet\'s '
                        'rate (%d reports/s each, %d with --batch)'
                        % (SENDER_RATE['single'], SENDER_RATE['batched']))
    # The sender (a process of its own).
    parser.add_argument('--send', action='store_true',
                        help=argparse.SUPPRESS)
    parser.add_argument('--url', help=argparse.SUPPRESS)
    parser.add_argument('--topic', help=argparse.SUPPRESS)
    parser.add_argument('--exchange', help=argparse.SUPPRESS)
    parser.add_argument('--kind', help=argparse.SUPPRESS)
    parser.add_argument('--path', help=argparse.SUPPRESS)
    parser.add_argument('--count-file', help=argparse.SUPPRESS)
    parser.add_argument('--first', type=int, default=0,
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.send:
        _sender_main(args)
        return
    config.parse_args([], default_config_files=[])
    # One line a new host per worker would drown the figures.
    logging.getLogger('scheduler').setLevel(logging.WARNING)
    print('load average: %.2f %.2f %.2f' % os.getloadavg())
    if args.mode == 'rabbit':
        args.layout = args.layout or ['1x1', '1x4']
        bench_rabbit(args)
        return
    for hosts in args.hosts:
        run(hosts, args.workers, args.rounds, tuple(args.kinds), args.rate,
            tuple(args.paths))


if __name__ == '__main__':
    main()
