#!/usr/bin/env python3
"""Claims from many green threads of one worker on a few busy nodes.

What a worker of the service does under ``--callers`` concurrent
requests, without the bus: each green thread reads what changed
(``changed_since``), works the CPU for ``--work-ms`` (the filters and
weighers), then claims on one of ``--nodes`` nodes (a skewed mix sends
most requests to a few best hosts).  The worker's connection budget is
the service's (``[database]`` defaults).  Printed: claims per second,
this process's CPU per claim, the longest a claim waited (pool and row
locks included) and the requests that failed.  Numbers only, no
thresholds.

    python tools/bench/bench_claim_contention.py --db postgresql
    python tools/bench/bench_claim_contention.py --group same --callers 8
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))

from scheduler import concurrency  # noqa: E402

concurrency.monkey_patch()

import argparse  # noqa: E402
import collections  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402

import eventlet  # noqa: E402
from oslo_utils import timeutils  # noqa: E402

from scheduler import config  # noqa: E402
from tools.bench import bench_claims  # noqa: E402


def _busy(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def run(kind: str, args, tmp: str) -> None:
    from scheduler.db import api
    from scheduler.db import usage
    with bench_claims.throwaway_database(kind, tmp) as url:
        bench_claims._use(url)
        nodes = ['hot%02d' % i for i in range(args.nodes)]
        usage.apply_reports([usage.NodeReport(
            n, n, 0, 0, 0, 0, timeutils.utcnow(), frozenset())
            for n in nodes])
        limits = {'memory_mb': 1 << 30, 'vcpu': 1 << 20, 'disk_gb': 1 << 30}
        done, failed = [0], collections.Counter()
        waits: list = []
        stop_at = time.monotonic() + args.duration
        # Anti-affinity groups of no placed member: the claims wait on
        # the group's row and are never refused.
        shared = bench_claims.claims_of('anti-affinity', 0, 0)

        def caller(index: int) -> None:
            seq, i = 0, index
            own = bench_claims.claims_of('anti-affinity', 0, 0)
            make = {'none': None, 'same': shared, 'each': own}[args.group]
            while time.monotonic() < stop_at:
                i += 1
                try:
                    rows = usage.changed_since(seq)
                    seq = max([seq] + [r['seq'] for r in rows])
                    _busy(args.work_ms / 1000)
                    node = nodes[(i * 7) % len(nodes)]
                    t0 = time.monotonic()
                    usage.claim(make(node) if make else usage.ClaimRequest(
                        str(uuid.uuid4()), node, node, 512, 1, 10,
                        limits=limits))
                    waits.append(time.monotonic() - t0)
                    done[0] += 1
                except Exception as e:  # a figure too
                    failed[type(e).__name__] += 1

        cpu0, t0 = time.process_time(), time.monotonic()
        pool = eventlet.GreenPool(args.callers)
        for index in range(args.callers):
            pool.spawn(caller, index * 1000)
        pool.waitall()
        wall, cpu = time.monotonic() - t0, time.process_time() - cpu0
        waits.sort()
        print('  %-11s group %s, %d callers, %d nodes, %.1f ms of work: '
              '%.1f claims/s, CPU %.2f ms a claim (incl. the work), '
              'claim median %.1f ms max %.1f ms, failed %s'
              % (kind, args.group, args.callers, args.nodes, args.work_ms,
                 done[0] / wall, cpu / max(1, done[0]) * 1e3,
                 waits[len(waits) // 2] * 1e3 if waits else 0,
                 waits[-1] * 1e3 if waits else 0,
                 dict(failed) or 0), flush=True)
        api.reset_engine()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--db', action='append',
                        choices=['sqlite', 'postgresql', 'mariadb'])
    parser.add_argument('--callers', type=int, default=32)
    parser.add_argument('--nodes', type=int, default=4)
    parser.add_argument('--work-ms', type=float, default=2.0)
    parser.add_argument('--duration', type=float, default=10.0)
    parser.add_argument('--group', choices=['none', 'same', 'each'],
                        default='none',
                        help='claims of no server group, of one group for '
                             'all callers (they take turns on its row), '
                             'or of a group each')
    args = parser.parse_args()
    config.parse_args([], default_config_files=[], setup_logging=False)
    tmp = tempfile.mkdtemp(prefix='sched-bench-contention-')
    for kind in args.db or ['postgresql']:
        run(kind, args, tmp)


if __name__ == '__main__':
    main()
