#!/usr/bin/env python3
"""CPU time of the mixed workload's decisions, the same every run.

``bench_mixed.py --mode inprocess`` takes host reports between requests
at the rate the wall clock says are due, so on a loaded machine two runs
see different reports and make different placements.  This one takes no
reports once the fleet is loaded (``[scheduler] service_down_time`` is
raised so that no host goes down meanwhile) and seeds the host choice
per request: two trees given the same arguments place the same
instances, and what differs is the CPU time each took.  To compare a
change with its base in the same hour, run both side by side (each on
its own tree) and compare the figures; the hash of the answers (every
destination and alternate of every request) says that they decided
alike.

    python tools/bench/bench_mixed_cpu.py --hosts 10000 --requests 150
    python /tmp/base/tools/bench/bench_mixed_cpu.py --hosts 10000 &
    python tools/bench/bench_mixed_cpu.py --hosts 10000

Figures are the thread's CPU time per request (``time.thread_time``),
the first five requests of each phase untimed.
"""

import argparse
import hashlib
import os
import random
import shutil
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from scheduler import context  # noqa: E402
from scheduler import exception  # noqa: E402
from tools.bench import bench_mixed  # noqa: E402
from tools.bench import mixed_workload as mix  # noqa: E402

WARM_UP = 5


def phase(driver, computes, requests: int, instances: int,
          seed: int) -> tuple:
    """``(CPU seconds per timed request, instances placed, hash of the
    answers)``."""
    ctxt = context.get_admin_context()
    draws = mix.RequestMix(seed, instances=instances).draws(
        requests + WARM_UP)
    state = mix.MixState(seed * 1000 + instances)
    cpu, placed, answers = [], 0, hashlib.sha256()
    for i, draw in enumerate(draws):
        uuids = state.new_uuids(draw.instances)
        spec = state.spec(draw, uuids)
        random.seed(i)
        started = time.thread_time()
        try:
            chosen = driver.select_destinations(ctxt, spec, uuids,
                                                return_alternates=True)
        except exception.NoValidHost:
            chosen = None
        if i >= WARM_UP:
            cpu.append(time.thread_time() - started)
        answers.update(repr(chosen and [
            [(s.service_host, s.nodename) for s in alternates]
            for alternates in chosen]).encode())
        if chosen:
            hosts = [alternates[0].service_host for alternates in chosen]
            placed += len(hosts)
            state.placed(draw, uuids, hosts)
            computes.built(spec, uuids, hosts)
    return cpu, placed, answers.hexdigest()[:16]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--hosts', type=int, default=10000)
    parser.add_argument('--requests', type=int, default=150)
    parser.add_argument('--instances', type=int, action='append',
                        help='instances per request (repeatable; '
                             'default 1 and 10)')
    parser.add_argument('--seed', type=int, default=25)
    parser.add_argument('--inventory-dir', default=None)
    args = parser.parse_args()
    bench_mixed.CONF([], project='scheduler')
    bench_mixed.CONF.set_override('service_down_time', 10 ** 9,
                                  group='scheduler')
    random.seed(args.seed)
    driver, computes, load_s, tmp = bench_mixed.inprocess_driver(
        args.hosts, args.seed, args.inventory_dir)
    print('%s: %d hosts loaded in %.0f s (wall)'
          % (ROOT, args.hosts, load_s))
    for k in args.instances or [1, 10]:
        cpu, placed, answers = phase(driver, computes, args.requests, k,
                                     args.seed)
        cpu.sort()
        print('k=%d n=%d CPU median %.2f ms mean %.2f ms p90 %.2f ms '
              'p99 %.2f ms total %.2f s; %d instances placed, answers %s'
              % (k, len(cpu), 1e3 * statistics.median(cpu),
                 1e3 * statistics.mean(cpu), 1e3 * cpu[int(len(cpu) * .9)],
                 1e3 * cpu[int(len(cpu) * .99)], sum(cpu), placed, answers),
              flush=True)
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == '__main__':
    main()
