"""10,000 simulated hosts on the real broker, over a handful of connections.

The broker on these machines allows about a thousand connections and is
shared by every test: a simulator that opened one per host took it down
for everyone.  This test runs ``scheduler-compute-sim --hosts 10000``
against a real ``scheduler-service`` and checks, on the simulator's own
sockets and (where ``rabbitmqctl`` may run) on the broker's side, that
the fleet holds only a few connections, that the scheduler knows every
host, and that the fleet's queue is gone once it stops.
"""

import os
import re
import shutil
import subprocess
import time

import kombu
import pytest

from scheduler import objects
from scheduler.simulator import routing
from tests.functional import daemons

HOSTS = 10000
#: One transport: the RPC server's listener, the senders' pool, the
#: reply queue of the scheduler probe, the short-lived binding one.
MAX_CONNECTIONS = 6
AMQP_PORT = 5672


def amqp_connections(pid: int) -> set:
    """Local ports of ``pid``'s TCP connections to the broker's port."""
    inodes = set()
    fd_dir = '/proc/%d/fd' % pid
    for fd in os.listdir(fd_dir):
        try:
            target = os.readlink(os.path.join(fd_dir, fd))
        except OSError:
            continue
        if target.startswith('socket:['):
            inodes.add(target[len('socket:['):-1])
    ports = set()
    for table in ('/proc/%d/net/tcp' % pid, '/proc/%d/net/tcp6' % pid):
        if not os.path.exists(table):
            continue
        with open(table) as f:
            next(f)
            for line in f:
                fields = line.split()
                local, remote, inode = fields[1], fields[2], fields[9]
                if inode in inodes and \
                        int(remote.rsplit(':', 1)[1], 16) == AMQP_PORT:
                    ports.add(int(local.rsplit(':', 1)[1], 16))
    return ports


def broker_peer_ports() -> set | None:
    """Client ports of every connection the broker has, if it says."""
    if not shutil.which('rabbitmqctl'):
        return None
    try:
        out = subprocess.run(
            ['rabbitmqctl', '-q', 'list_connections', 'peer_port'],
            capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    return {int(word) for word in out.stdout.split() if word.isdigit()}


def hosts_known(cluster) -> int:
    spec = objects.RequestSpec(
        flavor=objects.Flavor(memory_mb=512, vcpus=1, root_gb=1),
        num_instances=1, project_id='functional', user_id='tester')
    return cluster.api.explain(cluster.admin_ctxt, spec)['hosts_known']


def queue_exists(name: str) -> bool:
    with kombu.Connection('amqp://guest:guest@127.0.0.1:5672//') as conn:
        channel = conn.channel()
        try:
            channel.queue_declare(queue=name, passive=True)
            return True
        except Exception:
            return False


def delete_queue(name: str) -> None:
    with kombu.Connection('amqp://guest:guest@127.0.0.1:5672//') as conn:
        conn.channel().queue_delete(queue=name)


@pytest.fixture
def cleanup_queues(cluster):
    yield
    delete_queue(cluster.compute_topic)


def wait_for_the_fleet(sim, stalled: float = 60, limit: float = 600) -> None:
    """Until the simulator says every host is up, for as long as its
    progress lines ("Started N/10000 hosts") keep counting up.

    How fast it starts hosts depends on what else the machine runs;
    this test is about connections, not speed, so only a stall (or
    ``limit``) fails.
    """
    started_at = changed_at = time.monotonic()
    started = -1
    while 'Simulating %d compute host(s)' % HOSTS not in sim.log():
        now = time.monotonic()
        counts = re.findall(r'Started (\d+)/%d hosts' % HOSTS, sim.log())
        count = int(counts[-1]) if counts else 0
        if count != started:
            started, changed_at = count, now
        assert now - changed_at < stalled, \
            'the simulator started no host for %d s (%d of %d up)' % (
                stalled, started, HOSTS)
        assert now - started_at < limit, \
            'the simulator did not start %d hosts within %d s (%d up)' % (
                HOSTS, limit, started)
        assert sim.proc.poll() is None, 'the simulator exited'
        time.sleep(1)


def test_ten_thousand_hosts_over_a_few_connections(cluster, tmp_path,
                                                   cleanup_queues):
    db = 'sqlite:///%s' % (tmp_path / 'inventory.sqlite')
    cluster.start_scheduler(db, scheduler_opts={'report_interval': 60,
                                                'service_down_time': 120})
    server_name = 'fleet-scale-%d' % os.getpid()
    sim = cluster.start_sim(hosts=HOSTS, report_interval=60, debug=False,
                            extra_args=('--server-name', server_name),
                            service_down_time=120)

    wait_for_the_fleet(sim)
    assert 'Started ' in sim.log(), 'progress lines while starting'
    daemons.wait_for(lambda: hosts_known(cluster) == HOSTS, 240, interval=1,
                     what='the scheduler to know %d hosts' % HOSTS)

    ports = amqp_connections(sim.proc.pid)
    assert 0 < len(ports) <= MAX_CONNECTIONS, ports
    broker = broker_peer_ports()
    if broker is not None:
        assert ports <= broker, 'the broker sees the same connections'
    fleet_queue = routing.queue_name(cluster.compute_topic, server_name)
    assert queue_exists(fleet_queue)

    assert sim.stop() == 0
    assert 'Stopped %d simulated host(s)' % HOSTS in sim.log()
    assert not queue_exists(fleet_queue), 'the fleet deletes its queue'
