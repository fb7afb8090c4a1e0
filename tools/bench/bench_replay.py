#!/usr/bin/env python3
"""How long a what-if replay takes: the demo's fleet and trace, scaled.

    python tools/bench/bench_replay.py --hosts 10000 --requests 10000

Replays the generated trace (``scheduler.replay.demo``: skewed flavors,
zones, releases) against the generated fleet under the shipped
``spread`` configuration (``--config`` for others, repeatable), with the
progress lines ``scheduler-manage replay`` prints, then prints per
configuration the wall clock, the process CPU time, the CPU per
request placed and the decision time percentiles.  The report (JSON and
HTML) is written to ``--out`` when given, and its size printed.

    python tools/bench/bench_replay.py --record 5000

prints instead what recording costs the service (``[trace] enabled``):
CPU per request recorded and bytes per request in the trace.
"""

import argparse
import json
import os
import resource
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))

from scheduler import concurrency  # noqa: E402

concurrency.setup()

from scheduler import config  # noqa: E402
from scheduler.replay import compare  # noqa: E402
from scheduler.replay import demo  # noqa: E402
from scheduler.replay import html  # noqa: E402
from scheduler.replay import snapshot  # noqa: E402


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def time_recording(count: int) -> None:
    """CPU and bytes of ``count`` requests recorded, as the manager
    records them (spec captured before the driver, answer after)."""
    from scheduler import objects
    from scheduler.replay import trace

    class First:
        service_host = nodename = 'compute-001'

    spec = objects.RequestSpec(
        flavor=objects.Flavor(flavorid='m1', name='m1', memory_mb=2048,
                              vcpus=2, root_gb=20, ephemeral_gb=0, swap=0,
                              extra_specs={'hw:cpu_policy': 'shared'}),
        project_id='project', user_id='user', num_instances=1,
        availability_zone='az1', scheduler_hints={'different_host': ['x']},
        image=objects.ImageMeta(properties={'hw_architecture': 'x86_64'}))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, 'trace.jsonl')
        rec = trace.Recorder(path, 1 << 30, 0, False, b'key', 'bench')
        c0 = time.thread_time()
        for n in range(count):
            captured = rec.capture(spec)
            rec.request(None, ['uuid-%d' % n], [[First()]], None, None,
                        0.001, captured)
        cpu = time.thread_time() - c0
        rec.close()
        size = os.path.getsize(path)
    print('recording: %.0f us CPU per request, %d bytes per request '
          '(%d requests)' % (1e6 * cpu / count, size // count, count))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--hosts', type=int, default=10000)
    parser.add_argument('--requests', type=int, default=10000)
    parser.add_argument('--config', action='append',
                        help='configuration files (default: the shipped '
                             'spread)')
    parser.add_argument('--explain', type=int, default=100)
    parser.add_argument('--out', help='directory for the JSON and HTML')
    parser.add_argument('--record', type=int, metavar='N',
                        help='only time recording N requests')
    args = parser.parse_args()
    config.parse_args([], default_config_files=[], setup_logging=False)
    if args.record:
        time_recording(args.record)
        print('load average: %.2f %.2f %.2f' % os.getloadavg())
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        configs = []
        for path in args.config or []:
            configs.append((os.path.splitext(os.path.basename(path))[0],
                            path))
        if not configs:
            path = os.path.join(tmp, 'spread.conf')
            with open(path, 'w') as f:
                f.write(demo.CONFIGS['spread'])
            configs.append(('spread', path))
        t0, c0 = time.perf_counter(), _cpu()
        fleet = snapshot.parse(demo.fleet_document(args.hosts))
        events = demo.trace_events(args.requests, seed=2)
        print('fleet %d nodes, trace %d events, made in %.1f s'
              % (len(fleet.reports), len(events), time.perf_counter() - t0))
        for name, path in configs:
            t0, c0 = time.perf_counter(), _cpu()
            doc = compare.compare(fleet, events, [(name, path)],
                                  explained=args.explain)
            wall, cpu = time.perf_counter() - t0, _cpu() - c0
            [summary] = doc['configs']
            requests = summary['placed'] + summary['no_valid_host']
            print('%s: %d requests (%d refused), %d releases: wall %.1f s, '
                  'CPU %.1f s (%.1f ms CPU per request, everything '
                  'included); decision ms p50 %.2f p95 %.2f p99 %.2f'
                  % (name, requests, summary['no_valid_host'],
                     summary['releases'], wall, cpu,
                     1e3 * cpu / max(1, requests),
                     summary['decision_ms']['p50'],
                     summary['decision_ms']['p95'],
                     summary['decision_ms']['p99']))
            if args.out:
                os.makedirs(args.out, exist_ok=True)
                page = os.path.join(args.out, '%s.html' % name)
                with open(os.path.join(args.out, '%s.json' % name),
                          'w') as f:
                    json.dump(doc, f, default=str)
                with open(page, 'w') as f:
                    f.write(html.render(doc))
                print('report %s: %.1f MB' % (
                    page, os.path.getsize(page) / 2 ** 20))
    print('load average: %.2f %.2f %.2f' % os.getloadavg())
    return 0


if __name__ == '__main__':
    sys.exit(main())
