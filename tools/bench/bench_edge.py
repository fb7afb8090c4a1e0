#!/usr/bin/env python3
"""The RPC edge of ``select_destinations``, stage by stage, no broker.

What a call costs besides the decision and the broker: the caller
serialising its arguments, the service reading them, checking them,
answering through the manager and serialising the answer, and the
caller reading it.  Each stage runs the real code (our serializers,
oslo.messaging's envelope and dispatcher, kombu's JSON) in a loop, for
``select_destinations`` (one request of ``--instances`` instances with
alternates, as bench_select.py sends) and for the no-op
``get_version_info`` beside it; the driver is a stub that only builds
the Selections (``driver.selection_for``), so no decision is timed.

    python tools/bench/bench_edge.py
    python tools/bench/bench_edge.py --instances 10 --alternates 2

Figures are microseconds per call, the best of ``--repeat`` loops of
``--loops`` calls: code with warm caches.  In a service under a broker
the same code runs cold between messages and takes longer (about twice
as long, measured with per-section timers in scheduler-service); the
stages still compare.
"""

import argparse
import os
import sys
import time
import uuid

from kombu import serialization as kombu_serialization
from oslo_messaging._drivers import amqp as rpc_amqp
from oslo_messaging._drivers import common as rpc_common
import oslo_messaging

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_select  # noqa: E402

from scheduler import context  # noqa: E402
from scheduler import driver as driver_mod  # noqa: E402
from scheduler import manager as manager_mod  # noqa: E402
from scheduler import message_limits  # noqa: E402
from scheduler.objects import base as objects_base  # noqa: E402
from scheduler import rpc  # noqa: E402


class _Host:
    """What the filter scheduler hands ``selection_for``: a view."""

    def __init__(self, i: int):
        self.host = self.nodename = bench_select.host_name(i)
        self.uuid = str(uuid.uuid5(uuid.NAMESPACE_DNS, self.host))
        self.availability_zones = frozenset(['az%d' % (1 + i % 2)])
        self.limits = {}


class _LoadedHosts:
    """A host manager whose saved state is loaded: the manager asks."""

    def ensure_loaded(self) -> None:
        pass


class _StubDriver(driver_mod.Scheduler):
    """Answers with Selections of fixed hosts: the edge, no decision."""

    def __init__(self, alternates: int):
        self.host_manager = _LoadedHosts()
        self._hosts = [_Host(i) for i in range(alternates + 1)]
        self._limits = {'memory_mb': 393216, 'disk_gb': 4000, 'vcpu': 256}

    def select_destinations(self, context, spec_obj, instance_uuids,
                            return_alternates=False):
        hosts = self._hosts if return_alternates else self._hosts[:1]
        return [[driver_mod.selection_for(h, u, 1.0 + n / 8.0, self._limits)
                 for n, h in enumerate(hosts)] for u in instance_uuids]

    def schedule_run_instance(self, context, spec_obj, instance_uuids):
        raise NotImplementedError


class _Incoming:
    """The parts of oslo.messaging's incoming message a dispatcher reads."""

    client_timeout = None

    def __init__(self, message: dict, ctxt: dict):
        self.message, self.ctxt = message, ctxt


def _envelope(msg: dict) -> bytes:
    """A message as the rabbit driver publishes it."""
    return kombu_serialization.dumps(rpc_common.serialize_msg(msg),
                                     'json')[2]


def _opened(body) -> dict:
    """A message as the rabbit driver reads it."""
    return rpc_common.deserialize_msg(kombu_serialization.loads(
        body, 'application/json', 'utf-8'))


class Call:
    """One call's stages, as closures over the previous stage's output."""

    def __init__(self, method: str, kwargs_of, dispatcher, version: str):
        self.method, self.kwargs_of, self.version = method, kwargs_of, \
            version
        self.dispatcher = dispatcher
        self.ctxt = context.get_admin_context()
        self.client = rpc.RequestContextSerializer()
        self.server = rpc.ServerSerializer()

    # caller
    def request_out(self):
        msg = {'method': self.method, 'version': self.version,
               'args': {k: self.client.serialize_entity(self.ctxt, v)
                        for k, v in self.kwargs_of().items()}}
        rpc_amqp.pack_context(msg, self.client.serialize_context(self.ctxt))
        msg.update(_msg_id=uuid.uuid4().hex, _reply_q='reply_x',
                   _unique_id=uuid.uuid4().hex)
        return _envelope(msg)

    # service
    def request_in(self, body):
        message = _opened(body)
        ctxt = rpc_amqp.unpack_context(message).to_dict()
        for key in ('_msg_id', '_reply_q', '_unique_id'):
            message.pop(key, None)
        return _Incoming(message, ctxt)

    def check(self, incoming):
        message_limits.check_arguments(self.method, incoming.ctxt,
                                       incoming.message['args'])

    def read_arguments(self, incoming):
        ctxt = self.server.deserialize_context(incoming.ctxt)
        return ctxt, {k: self.server.deserialize_entity(ctxt, v)
                      for k, v in incoming.message['args'].items()}

    def dispatch(self, incoming):
        return self.dispatcher.dispatch(incoming)

    def reply_out(self, result):
        return _envelope({'result': result, 'failure': None,
                          'ending': True, '_msg_id': 'x',
                          '_unique_id': uuid.uuid4().hex})

    # caller
    def reply_in(self, body):
        return self.client.deserialize_entity(
            self.ctxt, _opened(body)['result'])


def _best(function, loops: int, repeat: int) -> float:
    for _ in range(min(loops, 200)):
        function()
    best = float('inf')
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(loops):
            function()
        best = min(best, (time.perf_counter() - start) / loops)
    return best * 1e6


def stages(call: Call, loops: int, repeat: int) -> dict:
    body = call.request_out()
    incoming = call.request_in(body)
    result = call.dispatch(incoming)
    reply = call.reply_out(result)
    endpoint = call.dispatcher.endpoints[0]
    method = getattr(endpoint, call.method)

    def read_and_answer():
        ctxt, args = call.read_arguments(incoming)
        return ctxt, method(ctxt, **args)

    timed = {
        'caller: request out (serialise, JSON)': call.request_out,
        'service: request in (JSON, envelope)':
            lambda: call.request_in(body),
        'service: dispatch (all below)': lambda: call.dispatch(incoming),
        '  check_arguments (message_limits)': lambda: call.check(incoming),
        '  read context and arguments': lambda: call.read_arguments(incoming),
        '  manager method (stub driver)': read_and_answer,
        '  serialise the answer':
            lambda: call.server.serialize_entity(*read_and_answer()),
        'service: reply out (JSON, envelope)': lambda: call.reply_out(result),
        'caller: reply in (JSON, objects)': lambda: call.reply_in(reply),
    }
    figures = {name: _best(f, loops, repeat) for name, f in timed.items()}
    # Each stage of the answer without the ones it needed first (the
    # manager is given new objects each time, as from the bus: a
    # RequestSpec fills its unset fields once, when first read).
    figures['  serialise the answer'] -= figures['  manager method (stub '
                                                 'driver)']
    figures['  manager method (stub driver)'] -= figures[
        '  read context and arguments']
    figures['  oslo dispatcher and the rest'] = figures[
        'service: dispatch (all below)'] - sum(
            figures[name] for name in timed if name.startswith('  '))
    figures['request / reply bytes'] = (len(body), len(reply))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--instances', type=int, default=1)
    parser.add_argument('--alternates', type=int, default=2,
                        help='alternates per instance ([scheduler] '
                             'max_attempts - 1; default 2)')
    parser.add_argument('--loops', type=int, default=2000)
    parser.add_argument('--repeat', type=int, default=7)
    args = parser.parse_args()
    bench_select.load_config([])
    manager = manager_mod.SchedulerManager(
        driver=_StubDriver(args.alternates))
    dispatcher = rpc.Dispatcher([manager], rpc.ServerSerializer(),
                                oslo_messaging.ExplicitRPCAccessPolicy)
    k = args.instances

    def select_kwargs():
        # The caller's own objects are made before the clock, as in
        # bench_select.py; the manifest is sent with every call.
        return {'spec_obj': spec, 'instance_uuids': uuids,
                'return_objects': True, 'return_alternates': True,
                'peer_manifest': objects_base.obj_manifest()}
    spec = bench_select.make_spec(0, k)
    uuids = [str(uuid.uuid4()) for _ in range(k)]
    select = stages(Call('select_destinations', select_kwargs, dispatcher,
                         '1.2'), args.loops, args.repeat)
    noop = stages(Call('get_version_info', dict, dispatcher, '1.2'),
                  args.loops, args.repeat)
    print('%-42s %10s %10s %10s' % ('us per call (k=%d, %d alternates)'
                                    % (k, args.alternates), 'select',
                                    'no-op', 'select -'))
    total = [0.0, 0.0]
    for name in select:
        if name == 'request / reply bytes':
            continue
        s, n = select[name], noop[name]
        if not name.startswith(' '):
            total[0] += s
            total[1] += n
        print('%-42s %10.1f %10.1f %10.1f' % (name, s, n, s - n))
    print('%-42s %10.1f %10.1f %10.1f'
          % ('edge in all', total[0], total[1], total[0] - total[1]))
    print('%-42s %10s %10s' % ('request / reply bytes',
                               '%d/%d' % select['request / reply bytes'],
                               '%d/%d' % noop['request / reply bytes']))


if __name__ == '__main__':
    main()
