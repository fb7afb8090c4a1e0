"""The soak: services, a fleet and callers while everything fails.

    python -m tools.soak --executor eventlet --duration 600

Two services of two workers each on one inventory behind a TCP proxy
(a throw-away database on the machine's PostgreSQL, or MariaDB with
``--db mariadb``), a simulated fleet of three kinds of hosts
reporting every 5 s, conductor-style callers, and a fault schedule
that runs every fault twice (``tools.soak.faults``), all on the soak's
own RabbitMQ node.  The inventory is sampled every few seconds and
once more at the end; then one line per invariant is printed, ``HELD``
or ``BROKEN`` with examples (``tools.soak.invariants``); every
distinct violation goes to ``violations.txt`` beside the logs.  Exit status 1
when an invariant broke, 2 when the soak could not run.

Progress goes to stderr; the verdict to stdout.  Not part of the test
suite: it takes minutes and loads the machine.
"""

import argparse
import os
import sys
import tempfile
import threading
import time
import warnings

# eventlet's notice when an oslo module imports it: noise here.
warnings.filterwarnings('ignore', message=r'\s*Eventlet is deprecated')

from scheduler import config  # noqa: E402 (after the filter)
from tools.soak import cluster as cluster_mod  # noqa: E402
from tools.soak import faults as faults_mod  # noqa: E402
from tools.soak import fleet as fleet_mod  # noqa: E402
from tools.soak import invariants  # noqa: E402
from tools.soak import logs  # noqa: E402
from tools.soak import traffic as traffic_mod  # noqa: E402

MIN_DURATION = 120
MAX_DURATION = 3600
#: Seconds of traffic before the first fault, and of quiet traffic
#: after the last one's planned start.
WARMUP = 20
#: Seconds after the traffic stops for casts to be served, before the
#: final sample.
DRAIN = 20
#: Seconds between two inventory samples.
SAMPLE_EVERY = 3
#: Seconds after a fault ends during which calls still count it.
SETTLE = 5


def _say(message: str) -> None:
    sys.stderr.write('[soak %s] %s\n' % (time.strftime('%H:%M:%S'),
                                         message))
    sys.stderr.flush()


def parse(argv: list) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog='python -m tools.soak', description=__doc__.split('\n')[0])
    parser.add_argument('--executor', choices=('eventlet', 'threading'),
                        default='eventlet',
                        help="the services' [scheduler] executor "
                             '(default eventlet)')
    parser.add_argument('--db', choices=tuple(cluster_mod.BACKENDS),
                        default='postgresql',
                        help='the inventory\'s server, on 127.0.0.1 '
                             '(default postgresql)')
    parser.add_argument('--duration', type=int, default=600,
                        help='seconds of traffic and faults, %d-%d '
                             '(default 600)' % (MIN_DURATION, MAX_DURATION))
    parser.add_argument('--hosts', type=int, default=150,
                        help='simulated hosts, 3-1000 (default 150)')
    parser.add_argument('--callers', type=int, default=5,
                        help='caller threads, 1-20 (default 5)')
    parser.add_argument('--seed', type=int, default=1,
                        help="the callers' random seed (default 1)")
    parser.add_argument('--workdir',
                        help='where logs and configs go (default: a new '
                             'directory under /tmp, kept)')
    args = parser.parse_args(argv)
    if not MIN_DURATION <= args.duration <= MAX_DURATION:
        parser.error('--duration must be within %d-%d s'
                     % (MIN_DURATION, MAX_DURATION))
    if not 3 <= args.hosts <= 1000 or not 1 <= args.callers <= 20:
        parser.error('--hosts within 3-1000, --callers within 1-20')
    return args


class Sampler:
    """Samples the inventory every ``SAMPLE_EVERY`` s into the checker."""

    def __init__(self, cluster, checker: invariants.Checker,
                 evidence: invariants.Evidence, lock, sim_log):
        self.cluster = cluster
        self.checker = checker
        self.evidence = evidence
        self.lock = lock
        self.sim_log = sim_log
        self.db_peak = 0
        self.server_peak = 0
        self.errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name='soak-sample',
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_EVERY):
            try:
                self.once()
            except Exception as e:  # the next sample may work
                self.errors += 1
                _say('sample failed: %r' % e)

    def view(self) -> invariants.Evidence:
        """A copy of the evidence so far, for one check."""
        with self.lock:
            return invariants.Evidence(
                told=dict(self.evidence.told),
                faults=list(self.evidence.faults),
                events=list(self.sim_log.events),
                released=set(self.evidence.released))

    def once(self) -> None:
        snap = invariants.read_snapshot(self.cluster.engine, time.time())
        self.sim_log.refresh()
        self.checker.sample(snap, self.view())
        ours, server = self.cluster.db_connections()
        self.db_peak = max(self.db_peak, ours)
        self.server_peak = max(self.server_peak, server)


def soak(args: argparse.Namespace, workdir: str) -> int:
    fleet_file = os.path.join(workdir, 'fleet.json')
    spec = fleet_mod.write(fleet_file, args.hosts)
    cluster = cluster_mod.Cluster(workdir, args.executor, fleet_file)
    with cluster_mod.inventory_database(args.db) as db_url:
        try:
            _say('starting broker, services (%s, %s) and %d hosts in %s'
                 % (args.executor, args.db, args.hosts, workdir))
            cluster.start(db_url)
            config.parse_args(['--config-file', cluster.caller_config()],
                              default_config_files=[])
            cluster.wait_for_fleet(len(spec.hosts))
            return _run(args, cluster, spec)
        finally:
            cluster.stop_all()


def _run(args, cluster, spec) -> int:
    evidence = invariants.Evidence()
    sim_log = logs.SimLog(cluster.sim_log)
    checker = invariants.Checker(
        fleet_mod.capacities(spec), grace=cluster.report_interval,
        settle=SETTLE, expiry_window=cluster.claim_expiry_window())
    traffic = traffic_mod.Traffic(evidence, sim_log, callers=args.callers,
                                  target_running=int(args.hosts * 3.5),
                                  seed=args.seed)
    sampler = Sampler(cluster, checker, evidence, traffic.lock, sim_log)
    t0 = time.monotonic()
    end = t0 + args.duration
    schedule = faults_mod.plan(t0 + WARMUP, end - WARMUP)
    faults = faults_mod.Faults(cluster, evidence, traffic.lock, schedule,
                               _say)
    _say('traffic for %d s, %d faults' % (args.duration, len(schedule)))
    traffic.start()
    sampler.start()
    faults.start()
    while time.monotonic() < end:
        time.sleep(min(30, max(0.1, end - time.monotonic())))
        _say('%d calls, %d casts, %d running, %d samples' % (
            len(evidence.calls), len(evidence.casts),
            len(sim_log.running_now()), checker.samples))
    faults.stop()
    traffic.stop()
    drained_before = time.time()
    _say('traffic stopped; %d s for the casts in flight' % DRAIN)
    time.sleep(DRAIN)
    sampler.stop()
    sampler.once()
    _say('stopping the services')
    evidence.exits.extend(cluster.stop_services())
    sim_log.refresh()
    evidence.events = list(sim_log.events)
    evidence.log_lines, evidence.logged_uuids = logs.scan_service_logs(
        cluster.workdir, 'sched-')
    checker.finish(evidence, drained_before)
    checker.write_violations(os.path.join(cluster.workdir,
                                          'violations.txt'))
    return _report(args, checker, evidence, sampler, faults)


def _report(args, checker, evidence, sampler, faults) -> int:
    outcomes: dict = {}
    for call in evidence.calls:
        outcomes[call.outcome] = outcomes.get(call.outcome, 0) + 1
    methods: dict = {}
    for cast in evidence.casts:
        methods[cast.method] = methods.get(cast.method, 0) + 1
    kinds: dict = {}
    for fault in evidence.faults:
        kinds[fault.kind] = kinds.get(fault.kind, 0) + 1
    print('soak: executor %s, database %s, %d s, %d hosts, %d callers' % (
        args.executor, args.db, args.duration, args.hosts, args.callers))
    print('calls: %s' % ', '.join('%s %d' % kv for kv in
                                  sorted(outcomes.items())))
    print('casts: %s' % ', '.join('%s %d' % kv for kv in
                                  sorted(methods.items())))
    print('faults: %s%s' % (', '.join('%s x%d' % kv for kv in
                                      sorted(kinds.items())),
                            '; failed: %s' % '; '.join(faults.errors)
                            if faults.errors else ''))
    print('inventory: %d samples (%d failed), database connections peak '
          '%d (whole shared server %d), placements outliving their '
          'instance at the end %d (%d of those ended during a fault)' % (
              checker.samples, sampler.errors, sampler.db_peak,
              sampler.server_peak, checker.orphans_now,
              checker.orphans_now_in_fault))
    results = checker.results()
    for _name, _held, line in results:
        print(line)
    return 0 if all(held for _n, held, _l in results) else 1


def main(argv: list | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    workdir = args.workdir or tempfile.mkdtemp(prefix='soak-')
    os.makedirs(workdir, exist_ok=True)
    try:
        return soak(args, workdir)
    except Exception as e:  # the soak could not run: say why
        _say('soak could not run: %r (logs in %s)' % (e, workdir))
        return 2
    finally:
        _say('logs in %s' % workdir)


if __name__ == '__main__':
    sys.exit(main())
