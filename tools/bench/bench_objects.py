#!/usr/bin/env python3
"""Reading and writing the objects of the RPC edge, no broker.

Times ``SchedulerObjectSerializer`` on a compute's ``HostState``
report, a ``RequestSpec`` (as bench_select.py makes them) and one
``Selection`` of a reply, each
sent through JSON first as the bus would: reading the primitive
(``deserialize_entity``) and writing it (``serialize_entity``).

    python tools/bench/bench_objects.py
    python tools/bench/bench_objects.py --loops 5000 --repeat 7

Figures are microseconds per object, the best of ``--repeat`` loops of
``--loops`` objects (warm caches).
"""

import argparse
import json
import os
import sys
import timeit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_select  # noqa: E402

from scheduler import context  # noqa: E402
from scheduler import objects  # noqa: E402
from scheduler.objects import base  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--loops', type=int, default=2000)
    parser.add_argument('--repeat', type=int, default=5)
    args = parser.parse_args()
    objects.register_all()
    ctx = context.get_admin_context()
    serializer = base.SchedulerObjectSerializer()
    selection = objects.Selection(
        service_host='h1', nodename='h1', weight=1.5,
        compute_node_uuid='5d1f8a6e-8f4b-4c2e-9a53-0c6f1f7e2b10',
        instance_uuid='0c6f1f7e-2b10-4c2e-9a53-5d1f8a6e8f4b',
        availability_zone='az1',
        limits=objects.SchedulerLimits(memory_mb=6144.0, vcpu=32))
    for label, obj in (('HostState report', bench_select.host_state(7)),
                       ('RequestSpec', bench_select.make_spec(1)),
                       ('Selection', selection)):
        wire = json.loads(json.dumps(serializer.serialize_entity(ctx, obj)))
        read = serializer.deserialize_entity(ctx, wire)
        assert read.obj_to_primitive()['versioned_object.data'] == \
            obj.obj_to_primitive()['versioned_object.data'], label
        for what, stmt in (
                ('read', lambda: serializer.deserialize_entity(ctx, wire)),
                ('write', lambda: serializer.serialize_entity(ctx, obj))):
            best = min(timeit.repeat(stmt, number=args.loops,
                                     repeat=args.repeat))
            print('%-18s %-5s %8.1f us' % (label, what,
                                           best / args.loops * 1e6))


if __name__ == '__main__':
    main()
