#!/usr/bin/env python3
"""Send hostile messages to a real scheduler daemon and count what breaks.

Starts ``scheduler-service`` on a private topic of the local RabbitMQ
(loopback only) with an SQLite inventory in a temporary directory, sends
``--count`` hostile messages (raw malformed AMQP bodies and malformed
RPC calls: unknown and private methods, unexpected arguments, wrong
types, deep nesting, huge numbers, oversize bodies), then prints:

* crashes: 0 when the daemon is still alive and answers a good call;
* untyped errors: calls answered with anything but a typed scheduler
  error (or NoSuchMethod / UnsupportedVersion);
* tracebacks in the daemon's log;
* log lines per message;
* the daemon's RSS before, after, and after a short idle.

Stops by itself after ``--count`` messages or ``--seconds``.  Run from
the repository root: ``python tools/fuzz/fuzz_rpc.py``.
"""

import argparse
import json
import os
import random
import sys
import tempfile
import time
import zlib

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
sys.path.insert(0, REPO)

import oslo_messaging  # noqa: E402
from oslo_config import cfg  # noqa: E402

from scheduler import config  # noqa: E402
from scheduler import exception  # noqa: E402
from scheduler import objects  # noqa: E402
from scheduler import rpc  # noqa: E402
from scheduler import rpcapi  # noqa: E402
from tests.functional import daemons  # noqa: E402
from tests.functional import hostile  # noqa: E402

RABBIT = 'rabbit://guest:guest@127.0.0.1:5672/'
TYPED_REMOTE = {'NoSuchMethod', 'UnsupportedVersion'}


def rss_mb(pid: int) -> float:
    with open('/proc/%d/status' % pid) as f:
        for line in f:
            if line.startswith('VmRSS:'):
                return int(line.split()[1]) / 1024.0
    return 0.0


def spec_primitive() -> dict:
    return objects.RequestSpec(
        flavor=objects.Flavor(memory_mb=512, vcpus=1, root_gb=1),
        num_instances=1, project_id='fuzz').obj_to_primitive()


def hostile_calls(rng: random.Random, spec: dict):
    """(method, kwargs) of one malformed call."""
    choice = rng.randrange(12)
    junk = rng.choice([None, 5, -1, 2 ** 70, 'x' * rng.randrange(1, 3000),
                       [], {}, [1, 'a', None], {'a': {'b': [1]}}, 1.5e308])
    if choice == 0:
        return rng.choice(['reset', 'driver', 'target', 'run_periodic_tasks',
                           '__init__', '_flush_inventory', 'reports',
                           'no_such_%d' % rng.randrange(100)]), {}
    if choice == 1:
        return 'get_version_info', {'k%d' % rng.randrange(50): junk}
    if choice == 2:
        return 'select_destinations', {'spec_obj': junk}
    if choice == 3:
        return 'select_destinations', {'spec_obj': spec,
                                       'instance_uuids': junk}
    if choice == 4:
        return 'select_destinations', {
            'spec_obj': hostile.nested(rng.randrange(30, 400))}
    if choice == 5:
        broken = json.loads(json.dumps(spec))
        data = broken['versioned_object.data']
        data[rng.choice(list(data))] = junk
        return 'select_destinations', {'spec_obj': broken}
    if choice == 6:
        return 'explain', {'spec_obj': junk, 'extra': junk}
    if choice == 7:
        return 'select_destinations', {'request_spec': junk,
                                       'filter_properties': junk}
    if choice == 8:
        broken = json.loads(json.dumps(spec))
        broken['versioned_object.data']['num_instances'] = rng.choice(
            [0, 10 ** 6, 2 ** 62, -5])
        return 'select_destinations', {'spec_obj': broken}
    if choice == 9:
        return 'schedule_run_instance', {'spec_obj': junk,
                                         'instance_uuids': junk}
    if choice == 10:
        broken = json.loads(json.dumps(spec))
        broken['versioned_object.name'] = rng.choice(['HostState', 'X', 7])
        return 'select_destinations', {'spec_obj': broken}
    return 'select_destinations', {'spec_obj': {
        'versioned_object.data': {str(i): i for i in range(
            rng.randrange(1, 2000))}}}


def hostile_body(rng: random.Random, topic: str, limit: int):
    """(body, content_type, headers) of one raw malformed message."""
    choice = rng.randrange(8)
    if choice == 0:
        return 'a' * rng.randrange(limit + 1, 4 * limit), None, None
    if choice == 1:
        return '[' * rng.randrange(1000, 200000), None, None
    if choice == 2:
        return bytes(rng.randrange(256) for _ in range(200)), \
            'application/octet-stream', None
    if choice == 3:
        return zlib.compress(b'[' * 5000000), None, {
            'compression': 'application/x-gzip'}
    if choice == 4:
        return json.dumps({'oslo.version': '2.0',
                           'oslo.message': rng.choice(
                               ['5', '[', '{}', '"x"', 'null'])}), None, None
    if choice == 5:
        return json.dumps(hostile.envelope(
            rng.choice(['update_service_capabilities', 'sync_instance_info',
                        'update_aggregates', 'reset']),
            {'host_state': {'x': 1}, 'host_name': 'h', 'instance_uuids': []},
            ctxt={'is_admin': True})), None, None
    if choice == 6:
        return json.dumps({'oslo.version': '9.9', 'oslo.message': '{}'}), \
            None, None
    return json.dumps(hostile.envelope(
        'get_version_info', {'x': 'y' * rng.randrange(limit)},
        ctxt=rng.choice([{}, {'roles': 5}, {'is_admin': 'yes'}]))), \
        None, None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--count', type=int, default=10000)
    parser.add_argument('--seconds', type=float, default=600)
    parser.add_argument('--raw-share', type=float, default=0.4,
                        help='share of raw AMQP bodies (the rest are calls)')
    parser.add_argument('--seed', type=int, default=1)
    parser.add_argument('--warmup', type=int, default=500,
                        help='hostile messages sent before measuring RSS '
                             '(first-use caches and imports)')
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    tmp = tempfile.mkdtemp(prefix='fuzz-rpc-')
    topic = daemons.unique_topic('fuzz')
    limit = 65536
    conf_path = daemons.write_multi_config(
        os.path.join(tmp, 'sched.conf'),
        '[DEFAULT]\ntransport_url = %s\nhost = fuzz\nlog_file = %s\n\n'
        '[scheduler]\ntopic = %s\nperiodic_task_interval = 5\n\n'
        '[limits]\nmax_message_bytes = %d\n\n[database]\nconnection = '
        'sqlite:///%s\n' % (RABBIT, os.path.join(tmp, 'sched.log'), topic,
                            limit, os.path.join(tmp, 'inv.sqlite')))
    config.parse_args(['--config-file', conf_path], setup_logging=False)
    cfg.CONF.set_override('topic', topic, group='scheduler')
    daemon = daemons.Daemon('scheduler-service', ['--config-file', conf_path],
                            os.path.join(tmp, 'sched.log'))
    try:
        return _fuzz(args, rng, topic, limit, daemon)
    finally:
        daemon.stop()
        rpc.cleanup()
        # The daemon's queues and exchanges, on the shared broker.
        rpc.tidy_service(topic, ['fuzz'])


def _fuzz(args, rng: random.Random, topic: str, limit: int, daemon) -> int:
    """Send the messages to the started ``daemon``; print and judge."""
    api = rpcapi.SchedulerAPI(timeout=10)
    admin = {'is_admin': True, 'roles': ['admin']}
    from scheduler import context
    daemons.wait_for(lambda: api.get_version_info(
        context.get_admin_context()), 60, what='the daemon')
    time.sleep(2)
    pid = daemon.proc.pid
    raw = hostile.raw_client(topic, timeout=10)
    pub = hostile.RawPublisher()
    spec = spec_primitive()
    counts = {'calls': 0, 'raw': 0, 'typed': 0, 'untyped': 0,
              'timeouts': 0, 'accepted': 0}
    untyped_examples: list = []

    def send(count: int, seconds: float) -> int:
        started, sent = time.monotonic(), 0
        while sent < count and time.monotonic() - started < seconds:
            sent += 1
            if rng.random() < args.raw_share:
                body, ctype, headers = hostile_body(rng, topic, limit)
                pub.publish(topic, body,
                            content_type=ctype or 'application/json',
                            headers=headers)
                counts['raw'] += 1
                continue
            method, kwargs = hostile_calls(rng, spec)
            counts['calls'] += 1
            try:
                raw.call(rng.choice([hostile.context(), admin, {}]), method,
                         **kwargs)
                counts['accepted'] += 1
            except exception.SchedulerException:
                counts['typed'] += 1
            except oslo_messaging.RemoteError as e:
                if e.exc_type in TYPED_REMOTE:
                    counts['typed'] += 1
                else:
                    counts['untyped'] += 1
                    untyped_examples.append('%s %s' % (method, e.exc_type))
            except oslo_messaging.MessagingTimeout:
                counts['timeouts'] += 1
            except Exception as e:  # a client-side surprise is untyped too
                counts['untyped'] += 1
                untyped_examples.append('%s %r' % (method, e))
        return sent

    send(args.warmup, args.seconds)
    time.sleep(2)
    rss_before = rss_mb(pid)
    lines_before = len(daemon.log().splitlines())
    started = time.monotonic()
    sent = send(args.count, args.seconds)
    pub.close()
    elapsed = time.monotonic() - started
    crashes = 0
    try:
        api.get_version_info(context.get_admin_context())
    except Exception:
        crashes = 1
    if not daemon.alive():
        crashes = 1
    rss_after = rss_mb(pid) if daemon.alive() else 0.0
    time.sleep(10)
    rss_idle = rss_mb(pid) if daemon.alive() else 0.0
    log = daemon.log()
    new_lines = log.splitlines()[lines_before:]
    tracebacks = log.count('Traceback')
    print('messages measured:    %d in %.1f s, after %d warm-up '
          '(all: %d raw bodies, %d calls)'
          % (sent, elapsed, args.warmup, counts['raw'], counts['calls']))
    print('crashes:              %d' % crashes)
    print('typed errors:         %d' % counts['typed'])
    print('untyped errors:       %d %s' % (counts['untyped'],
                                           untyped_examples[:5]))
    print('call timeouts:        %d' % counts['timeouts'])
    print('calls accepted:       %d' % counts['accepted'])
    print('tracebacks in log:    %d' % tracebacks)
    print('log lines:            %d (%.3f per message)'
          % (len(new_lines), len(new_lines) / max(sent, 1)))
    print('RSS before/after/idle: %.1f / %.1f / %.1f MB (%+.1f%%)'
          % (rss_before, rss_after, rss_idle,
             100.0 * (rss_after - rss_before) / max(rss_before, 1)))
    print('log file:             %s' % daemon.log_path)
    return 1 if crashes or counts['untyped'] or tracebacks else 0


if __name__ == '__main__':
    sys.exit(main())
