#!/usr/bin/env python3
"""Reading and writing the objects of the RPC edge, no broker.

A microbenchmark of what the service does with objects per call, on
realistic values: reading a ``RequestSpec`` drawn from the mixed
workload (``mixed_workload.py``, a different request each time, sent
through JSON as the bus would), building and serialising the
``Selection`` answer of a select call (``--instances`` 1 and 10, each
with ``--alternates``, hosts drawn from a ``--hosts`` fleet), and a
compute's ``HostState`` report: read from the bus, rebuilt from a view
to be stored (``HostView.report``), read back from a stored row
(``node_reports.stored_view``).

    python tools/bench/bench_objects.py
    python tools/bench/bench_objects.py --loops 500 --repeat 7

Figures are microseconds of this process's CPU per operation, the best
of ``--repeat`` loops of ``--loops`` operations (warm code, distinct
objects).
"""

import argparse
import json
import os
import random
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import mixed_workload  # noqa: E402

from oslo_serialization import jsonutils  # noqa: E402

from scheduler import context  # noqa: E402
from scheduler import driver  # noqa: E402
from scheduler import host_view  # noqa: E402
from scheduler import node_reports  # noqa: E402
from scheduler import objects  # noqa: E402
from scheduler.objects import base  # noqa: E402
from scheduler import rpc  # noqa: E402
from scheduler.simulator import agent  # noqa: E402


class _Host:
    """What the filter scheduler hands ``selection_for``: a view."""

    def __init__(self, spec):
        self.host = self.nodename = spec.name
        self.uuid = spec.uuid
        self.availability_zones = frozenset(
            agg for agg in spec.aggregates if agg.startswith('az'))
        self.limits = {}


def _best(function, items: list, loops: int, repeat: int) -> float:
    """Microseconds per call of ``function`` on the next of ``items``."""
    count = len(items)
    for i in range(min(loops, 200)):
        function(items[i % count])
    best = float('inf')
    for _ in range(repeat):
        start = time.process_time()
        for i in range(loops):
            function(items[i % count])
        best = min(best, (time.process_time() - start) / loops)
    return best * 1e6


def workload(hosts: int, distinct: int, seed: int = 7) -> dict:
    """The objects the timed operations read, as each arrives."""
    ctxt = context.get_admin_context()
    client = rpc.RequestContextSerializer()
    fleet = mixed_workload.fleet(hosts)
    mix = mixed_workload.RequestMix(seed)
    state = mixed_workload.MixState(seed)
    rng = random.Random(seed)
    specs = []
    for draw in mix.draws(distinct):
        uuids = state.new_uuids(draw.instances)
        specs.append(state.spec(draw, uuids))
        state.placed(draw, uuids, [rng.choice(fleet.hosts).name
                                   for _ in uuids])
    wires = [json.loads(json.dumps(client.serialize_entity(ctxt, spec)))
             for spec in specs]
    views = [_Host(spec) for spec in fleet.hosts]
    reports = []
    for spec in rng.sample(fleet.hosts, min(distinct, len(fleet.hosts))):
        report = agent.build_host_state(spec)
        report.instance_uuids = [str(uuid.UUID(int=rng.getrandbits(128),
                                               version=4))
                                 for _ in range(rng.randrange(12))]
        report.num_instances = len(report.instance_uuids)
        reports.append(report)
    return {'ctxt': ctxt, 'spec_wires': wires, 'hosts': views,
            'report_wires': [json.loads(json.dumps(
                client.serialize_entity(ctxt, r))) for r in reports],
            'report_views': [host_view.HostView(r) for r in reports],
            'report_rows': [{'host': r.host, 'nodename': r.nodename,
                             'report': json.loads(jsonutils.dumps(
                                 r.obj_to_primitive()))}
                            for r in reports]}


def timings(work: dict, loops: int, repeat: int,
            alternates: int) -> dict:
    ctxt = work['ctxt']
    server = rpc.ServerSerializer()
    manifest = base.obj_manifest()
    hosts = work['hosts']
    rng = random.Random(11)
    limits = {'memory_mb': 393216, 'disk_gb': 4000, 'vcpu': 256}

    def answer(picks):
        selections = [[driver.selection_for(h, u, 1.0 + n / 8.0, limits)
                       for n, h in enumerate(chosen)]
                      for u, chosen in picks]
        if base.needs_backport(manifest):
            raise AssertionError('same code, no backport')
        return server.serialize_entity(ctxt, selections)

    def answers(counts):
        return [[(str(uuid.UUID(int=rng.getrandbits(128), version=4)),
                  rng.sample(hosts, alternates + 1)) for _ in range(k)]
                for k in counts]

    figures = {}
    figures['RequestSpec read (service)'] = _best(
        lambda wire: server.deserialize_entity(ctxt, wire),
        work['spec_wires'], loops, repeat)
    for k in (1, 10):
        figures['Selections k=%d +%d alt: build + write' % (
            k, alternates)] = _best(answer, answers([k] * 200),
                                    max(1, loops // k), repeat)
    counts = rng.choices([n for n, _w in mixed_workload.INSTANCES],
                         [w for _n, w in mixed_workload.INSTANCES], k=500)
    figures['Selections, k of the mix (mean %.2f)' % (
        sum(counts) / len(counts))] = _best(answer, answers(counts), loops,
                                            repeat)
    figures['HostState report read (bus)'] = _best(
        lambda wire: server.deserialize_entity(ctxt, wire),
        work['report_wires'], loops, repeat)
    figures['HostState from a view (flush)'] = _best(
        lambda view: view.report, work['report_views'], loops, repeat)
    figures['HostState from a stored row'] = _best(
        node_reports.stored_view, work['report_rows'], loops, repeat)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--loops', type=int, default=1000)
    parser.add_argument('--repeat', type=int, default=5)
    parser.add_argument('--hosts', type=int, default=10000)
    parser.add_argument('--distinct', type=int, default=500,
                        help='distinct requests and reports cycled through')
    parser.add_argument('--alternates', type=int, default=2)
    args = parser.parse_args()
    objects.register_all()
    work = workload(args.hosts, args.distinct)
    for label, us in timings(work, args.loops, args.repeat,
                             args.alternates).items():
        print('%-40s %8.1f us' % (label, us))


if __name__ == '__main__':
    main()
