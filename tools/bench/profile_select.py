#!/usr/bin/env python3
"""Where one in-process ``select_destinations`` spends its time.

bench_select.py says how long a decision takes; this says where.  It
loads the same generated fleet (bench_select's ``inprocess_driver``),
warms up, then times each stage of the filter scheduler with a wrapper
around it, per request, and prints the stages by cost:

    python tools/bench/profile_select.py --hosts 1000 --instances 10
    python tools/bench/profile_select.py --hosts 10000 --cprofile 25

The wrappers cost about a microsecond per call, so the stages add up
to a little more than the median printed first, which is timed without
them.  Stages nest (``claim_many`` includes ``db.claim_many``), and
``filter`` and ``weigh`` are split into the first instance of a request
and the later ones.  ``--cprofile N`` then prints the N functions with
the most time of their own, over the same requests.
"""

import argparse
import collections
import contextlib
import cProfile
import os
import pstats
import statistics
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_select  # noqa: E402

from scheduler import columns  # noqa: E402
from scheduler import context  # noqa: E402
from scheduler.db import usage  # noqa: E402
from scheduler import driver as driver_mod  # noqa: E402
from scheduler.drivers import filter_scheduler  # noqa: E402
from scheduler import host_manager  # noqa: E402
from scheduler import request_limits  # noqa: E402

#: (owner, attribute, stage name): what is timed.
STAGES = (
    (filter_scheduler.FilterScheduler, 'column_candidates', 'candidates'),
    (filter_scheduler.FilterScheduler, '_plan_one', 'plan_one'),
    (filter_scheduler.FilterScheduler, '_after_choice', 'after_choice'),
    (filter_scheduler.FilterScheduler, '_selections', 'selections'),
    (host_manager.HostManager, 'refresh_usage', 'refresh'),
    (host_manager.HostManager, 'claim_many', 'claim_many'),
    (host_manager.HostManager, 'refresh_changed_reports',
     'refresh.reports'),
    (host_manager.HostManager, 'plan_claim', 'plan_claim'),
    (usage, 'claim_many', 'db.claim_many'),
    (request_limits, 'collect', 'limits.collect'),
    (driver_mod, 'selection_for', 'selection_for'),
)


def _timed(spent: dict, name, function):
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            spent[name(*args, **kwargs) if callable(name) else name] += \
                time.perf_counter() - start
    return wrapper


def _later(prefix: str):
    """A stage name that tells the first instance from the later ones."""
    def name(cands, *args, **kwargs):
        return prefix + (' (later)' if cands.memo is not None
                         else ' (first)')
    return name


@contextlib.contextmanager
def instrumented(spent: dict):
    """Every stage of ``STAGES``, and the columnar filter and weigh
    stages, timed into ``spent`` (seconds by stage)."""
    saved = [(owner, attr, getattr(owner, attr))
             for owner, attr, _name in STAGES]
    saved += [(columns, attr, getattr(columns, attr))
              for attr in ('filter_candidates', 'weigh_candidates')]
    for owner, attr, name in STAGES:
        setattr(owner, attr, _timed(spent, name, getattr(owner, attr)))
    for attr, prefix in (('filter_candidates', 'filter'),
                         ('weigh_candidates', 'weigh')):
        setattr(columns, attr, _timed(spent, _later(prefix),
                                      getattr(columns, attr)))
    try:
        yield
    finally:
        for owner, attr, original in saved:
            setattr(owner, attr, original)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--hosts', type=int, default=1000)
    parser.add_argument('--instances', type=int, default=1)
    parser.add_argument('--requests', type=int, default=300)
    parser.add_argument('--cprofile', type=int, default=0, metavar='N')
    args = parser.parse_args()
    bench_select.load_config([])
    driver, _load = bench_select.inprocess_driver(args.hosts)
    bench_select.CONF.set_override('columnar', True,
                                   group='filter_scheduler')
    ctxt = context.get_admin_context()

    def request(i):
        driver.select_destinations(
            ctxt, bench_select.make_spec(i, args.instances),
            [str(uuid.uuid4()) for _ in range(args.instances)],
            return_alternates=True)

    for i in range(20):
        request(i)
    samples = []
    for i in range(args.requests):
        start = time.perf_counter()
        request(i)
        samples.append(time.perf_counter() - start)
    print('%d hosts, k=%d: median %.3f ms over %d requests (no wrappers)'
          % (args.hosts, args.instances,
             statistics.median(samples) * 1e3, args.requests))
    spent: dict = collections.defaultdict(float)
    with instrumented(spent):
        for i in range(args.requests):
            request(i)
    for name, seconds in sorted(spent.items(), key=lambda kv: -kv[1]):
        per_request = seconds / args.requests * 1e3
        print('  %-22s %8.3f ms/request' % (name, per_request))
    if args.cprofile:
        profile = cProfile.Profile()
        profile.enable()
        for i in range(args.requests):
            request(i)
        profile.disable()
        pstats.Stats(profile).sort_stats('tottime').print_stats(
            args.cprofile)


if __name__ == '__main__':
    main()
