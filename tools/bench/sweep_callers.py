"""Placements per second against concurrent callers, over RabbitMQ.

One run of ``bench_mixed.py --mode rabbit`` measures one number of
callers; the plot wants a curve, and loading a fleet of thousands of
hosts into the services takes minutes.  So this loads the fleet once
(``bench_mixed.RabbitRun``: real ``scheduler-service`` processes and
``scheduler-compute-sim --fleet`` with the mixed workload's fleet, on
topics of the run's own, deleted after) and then, for each number of
callers, measures what ``bench_mixed`` measures for its ``--callers``:
no-op calls/s (``get_version_info``), placements/s with the mixed
requests (claims on, each placement built by the simulator), no-op
calls/s again, so that load moving on a shared machine shows.

nova cannot be run over this bus (its scheduler is reached through
its conductor and placement, not this RPC API): the curve is this
project's only.
"""

import argparse
import collections
import shutil
import statistics
import threading
import time

from scheduler import context
from scheduler import exception
from tools.bench import bench_claims
from tools.bench import bench_mixed
from tools.bench import bench_select
from tools.bench import mixed_workload as mix


def _ms(samples: list) -> dict:
    ms = sorted(s * 1000 for s in samples)
    if not ms:
        return {'n': 0, 'median': None, 'p95': None}
    return {'n': len(ms), 'median': statistics.median(ms),
            'p95': bench_select._percentile(ms, 0.95)}


def sweep(hosts: int, callers: list, duration: float, requests: int,
          seed: int = 25, report_interval: int = 10, db: str = 'sqlite',
          services: int = 1, workers: int = 2,
          inventory_dir: str | None = None) -> dict:
    """Rates for each number of ``callers`` against one loaded fleet of
    ``hosts``; each phase bounded by ``duration`` seconds and
    ``requests`` calls."""
    from scheduler import compute_rpcapi
    from scheduler import rpc
    from scheduler import rpcapi
    args = argparse.Namespace(seed=seed, report_interval=report_interval,
                              inventory_dir=inventory_dir)
    run = bench_mixed.RabbitRun(hosts, db, services, workers, args)
    rows = []
    with bench_claims.throwaway_database(db, run.tmp) as url:
        try:
            run.start(url)
            api = rpcapi.SchedulerAPI(timeout=120)
            computes = compute_rpcapi.ComputeAPI()
            ctxt = context.get_admin_context()
            loaded = run.wait_fleet(api, ctxt)
            filled = run.prefill(ctxt)
            # The prefilled instances reach the services with the next
            # round of reports.
            time.sleep(report_interval)
            print('over RabbitMQ, %d hosts, %s, %dx%d: fleet known in '
                  '%.0f s, %d instances prefilled'
                  % (hosts, db, services, workers, loaded, filled),
                  flush=True)
            draws = mix.RequestMix(seed, instances=1).draws(
                len(callers) * requests + 20)
            state = mix.MixState(seed)
            errors: collections.Counter = collections.Counter()
            lock = threading.Lock()
            used = iter(range(len(draws)))

            def select(_i: int) -> bool:
                with lock:
                    draw = draws[next(used, 0) % len(draws)]
                uuids = state.new_uuids(draw.instances)
                spec = state.spec(draw, uuids)
                try:
                    chosen = api.select_destinations(
                        ctxt, spec, uuids, return_alternates=True)
                except exception.NoValidHost:
                    return False
                except Exception as e:
                    # A typed error (a timeout) is a figure too.
                    with lock:
                        errors[type(e).__name__] += 1
                    return False
                state.placed(draw, uuids,
                             [alts[0].service_host for alts in chosen])
                for instance, alts in zip(uuids, chosen):
                    computes.run_instance(ctxt, alts[0].service_host,
                                          alts[0].nodename, instance, spec)
                return True

            def noop(_i: int) -> bool:
                return api.get_version_info(ctxt) or True

            for i in range(10):          # untimed warm-up
                noop(i)
                select(i)
            for count in callers:
                row = {'callers': count}
                for label, call in (('noop_before', noop),
                                    ('select', select),
                                    ('noop_after', noop)):
                    samples, wall, failed = bench_mixed._callers(
                        count, duration, requests, call)
                    row[label + '_per_s'] = (len(samples) - failed) / wall
                    row[label + '_ms'] = _ms(samples)
                    if label == 'select':
                        row['select_failed'] = failed
                rows.append(row)
                print('%3d callers: %.1f placements/s; no-op %.0f/s before,'
                      ' %.0f/s after; select median %.1f ms, p95 %.1f ms'
                      % (count, row['select_per_s'], row['noop_before_per_s'],
                         row['noop_after_per_s'],
                         row['select_ms']['median'] or 0,
                         row['select_ms']['p95'] or 0), flush=True)
        finally:
            run.stop()
            rpc.cleanup()
    shutil.rmtree(run.tmp, ignore_errors=True)
    return {'hosts': hosts, 'db': db,
            'layout': '%dx%d' % (services, workers),
            'duration_s': duration, 'requests': requests,
            'errors': dict(errors), 'rows': rows}
