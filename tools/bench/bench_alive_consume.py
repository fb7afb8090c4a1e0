#!/usr/bin/env python3
"""Microbenchmark: service CPU per liveness message (API 1.6) taken off
RabbitMQ by oslo.messaging's RPC server, as the service takes them, and
by a kombu consumer that takes many per wake-up.

A microbenchmark: one process, one queue of its own on the shared
RabbitMQ, no request, no periodic task.  For each runtime (eventlet,
the service's default, and threading: a process of its own each, since
the monkey patching is for the whole process) it

* loads a fleet of ``--hosts`` nodes into a host manager (SQLite file
  inventory), so that every liveness message names the digest of a
  report the manager holds (a quiet host: ``HostManager.take_alive``
  renews it);
* publishes ``--messages`` liveness messages exactly as a compute does
  (``SchedulerAPI.report_alive``: an oslo.messaging cast) to the
  benchmark's own ``<topic>_reports_alive`` queue, with nothing
  consuming;
* then takes them all, measuring the process's CPU time (every thread)
  from the consumer's start to the last message served:

  - ``rpc``: the service's RPC server (``rpc.get_server`` on
    ``rpc.alive_target`` with the manager's ``AliveEndpoint`` and
    ``service.REPORTS_AT_ONCE``);
  - ``kombu``: ``scheduler.alive_consumer.AliveConsumer`` (bounded
    prefetch ``--prefetch``): drains the messages the broker has sent
    before it serves them, decodes oslo.messaging's envelope, reads the
    sender off each message's ``user_id`` property, checks the
    arguments and serves each through ``AliveEndpoint.report_alive``
    (trust per message and per node, the host manager, metrics, lag),
    then acknowledges the batch with one ``basic_ack(multiple=True)``.

Prints CPU per message for each, and deletes its queues and exchanges.

    python tools/bench/bench_alive_consume.py --messages 20000
    python tools/bench/bench_alive_consume.py --runtimes threading \
        --consumers kombu --prefetch 50 200
"""

import argparse
import logging
import os
import subprocess
import sys
import tempfile
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
URL = 'rabbit://guest:guest@127.0.0.1:5672/'


def _child(args) -> None:
    """One runtime, in a process of its own (``--child``)."""
    sys.path.insert(0, ROOT)
    os.environ['SCHEDULER_EXECUTOR'] = args.child
    from scheduler import concurrency
    concurrency.setup([])

    from oslo_config import cfg

    from scheduler import alive_consumer
    from scheduler import config
    from scheduler import context
    from scheduler.db import api as db_api
    from scheduler.db import migration
    from scheduler.drivers import filter_scheduler
    from scheduler import host_manager
    from scheduler import manager as manager_mod
    from scheduler.objects import host_state as host_state_obj
    from scheduler import rpc
    from scheduler import rpcapi
    from scheduler import service
    from scheduler.simulator import agent
    from scheduler.simulator import fleet as fleet_mod

    conf = cfg.CONF
    config.parse_args([], default_config_files=[])
    from tools.bench import exchange
    exchange.use()
    conf.set_override('transport_url', args.url)
    logging.getLogger().setLevel(logging.WARNING)
    topic = 'bench-alive-%s' % uuid.uuid4().hex[:8]
    conf.set_override('topic', topic, group='scheduler')
    tmp = tempfile.mkdtemp(prefix='bench-alive-')
    conf.set_override('connection', 'sqlite:///%s/inventory.sqlite' % tmp,
                      group='database')
    db_api.reset_engine()
    migration.db_sync()
    hosts = host_manager.HostManager()
    hosts.load_from_inventory()
    spec = fleet_mod.uniform(args.hosts, prefix='alive', memory_mb=65536,
                             vcpus=32, local_gb=2000)
    states = [agent.build_host_state(host) for host in spec.hosts]
    for state in states:
        hosts.update_from_report(state)
    hosts.flush()
    entries = [[s.host, s.nodename, host_state_obj.content_digest(s)]
               for s in states]
    manager = manager_mod.SchedulerManager(
        driver=filter_scheduler.FilterScheduler(hosts))
    reports = manager.reports
    served = [0]
    take_alive = reports.take_alive

    def counted(ctxt, nodes, sent_at=None):
        served[0] += 1
        take_alive(ctxt, nodes, sent_at)
    reports.take_alive = counted
    wanted = hosts.take_alive([((e[0], e[1]), e[2]) for e in entries])
    assert not wanted, 'the fleet is not loaded: %d unknown' % len(wanted)

    queue = rpc.alive_topic()
    caster = context.RequestContext(user_id='compute', project_id='service')
    api = rpcapi.SchedulerAPI()

    def server():
        return rpc.get_server(
            rpc.alive_target(server='bench'), [manager.alive],
            at_once={'report_alive': service.REPORTS_AT_ONCE})

    def depth() -> int:
        with rpc.amqp_connection() as conn:
            return conn.default_channel.queue_declare(
                queue=queue, passive=True).message_count

    def publish() -> None:
        for n in range(args.messages):
            api.report_alive(caster, [entries[n % len(entries)]])
        deadline = time.monotonic() + 30
        while depth() < args.messages and time.monotonic() < deadline:
            time.sleep(0.1)

    def wait_served(goal: int) -> None:
        while served[0] < goal:
            time.sleep(0.01)

    # The queue (and its binding), declared as the service declares it.
    first = server()
    first.start()
    rpc.stop_servers([first], grace=10)
    try:
        for consumer in args.consumers:
            for prefetch in (args.prefetch if consumer == 'kombu'
                             else [None]):
                publish()
                goal = served[0] + args.messages
                began = time.process_time()
                wall = time.monotonic()
                if consumer == 'rpc':
                    rpc_server = server()
                    rpc_server.start()
                    wait_served(goal)
                    spent = time.process_time() - began
                    rpc_server.stop()
                    rpc_server.wait()
                else:
                    consumer_ = alive_consumer.AliveConsumer(
                        manager.alive, prefetch=prefetch)
                    consumer_.start()
                    wait_served(goal)
                    spent = time.process_time() - began
                    consumer_.stop()
                    consumer_.wait()
                wall = time.monotonic() - wall
                label = consumer if prefetch is None \
                    else '%s prefetch %d' % (consumer, prefetch)
                print('%-9s %-22s %6.0f us CPU/message  %7.0f messages/s '
                      '(%d messages, load %.1f)'
                      % (args.child, label, spent / args.messages * 1e6,
                         args.messages / wall, args.messages,
                         os.getloadavg()[0]), flush=True)
    finally:
        rpc.tidy_service(topic, ['bench'])
        db_api.reset_engine()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--messages', type=int, default=20000)
    parser.add_argument('--hosts', type=int, default=2000)
    parser.add_argument('--runtimes', nargs='+',
                        default=['eventlet', 'threading'],
                        choices=['eventlet', 'threading'])
    parser.add_argument('--consumers', nargs='+', default=['rpc', 'kombu'],
                        choices=['rpc', 'kombu'])
    parser.add_argument('--prefetch', type=int, nargs='+', default=[100],
                        help='kombu: messages unacknowledged at most (the '
                        'service: alive_consumer.PREFETCH)')
    parser.add_argument('--url', default=URL)
    parser.add_argument('--child', help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args)
        return
    print('Microbenchmark: %d liveness messages (%d quiet hosts) on a '
          'queue of its own, shared RabbitMQ, one process'
          % (args.messages, args.hosts), flush=True)
    for runtime in args.runtimes:
        command = [sys.executable, os.path.abspath(__file__),
                   '--child', runtime, '--messages', str(args.messages),
                   '--hosts', str(args.hosts), '--url', args.url,
                   '--consumers', *args.consumers,
                   '--prefetch', *[str(p) for p in args.prefetch]]
        subprocess.run(command, check=True)


if __name__ == '__main__':
    main()
