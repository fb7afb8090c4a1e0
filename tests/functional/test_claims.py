"""Claims across workers and daemons, on real RabbitMQ and real databases.

A fleet with exactly K slots for the flavor; several scheduler services
(each with several workers) on one topic and one inventory; many
callers at once.  Exactly K placements succeed, whatever the database,
the executor or a worker killed with SIGKILL.
"""

import concurrent.futures
import json
import os
import signal
import subprocess
import time

import oslo_messaging
import pytest

from scheduler.db import api as db_api
from scheduler.db import migration
from scheduler.db import usage
from scheduler import exception
from scheduler import objects
from scheduler import rpcapi
from tests.functional import daemons
from tests.unit import fixtures

HOSTS = 10
SLOTS_PER_HOST = 3
SLOT_MB = 1024
K = HOSTS * SLOTS_PER_HOST

#: Claims must not expire while a test runs (no compute confirms them).
SCHEDULER_OPTS = {'service_down_time': 120, 'workers': 2}
#: Concurrent callers, and requests per round: every slot is raced for
#: by more callers at once than there are slots, and the requests left
#: once they are full must all be refused.
CALLERS = 50
REQUESTS = 2 * K
#: Seconds a caller waits while a worker is killed under it.
KILLED_CALL_TIMEOUT = 5


def _fleet(tmp_path, hosts: int = HOSTS, slots: int = SLOTS_PER_HOST) -> str:
    path = tmp_path / 'fleet.json'
    path.write_text(json.dumps({'groups': [{
        'prefix': 'slot', 'count': hosts, 'memory_mb': slots * SLOT_MB,
        'local_gb': 1000, 'vcpus': 64, 'ram_allocation_ratio': 1.0,
        'cpu_allocation_ratio': 1.0, 'disk_allocation_ratio': 1.0}]}))
    return str(path)


def _use_inventory(conf, url: str) -> None:
    """Read the services' inventory from this (the caller's) process."""
    conf.config(connection=url, group='database')
    db_api.reset_engine()


class Callers:
    """Concurrent conductor-style callers; what each was promised."""

    def __init__(self, cluster, threads: int = CALLERS, timeout: int = 60):
        self.cluster = cluster
        self.pool = concurrent.futures.ThreadPoolExecutor(threads)
        self.api = rpcapi.SchedulerAPI(timeout=timeout)
        self._next = 0

    def _one(self, uuid: str):
        spec = fixtures.request(memory_mb=SLOT_MB, vcpus=1, root_gb=1,
                                instance_uuid=uuid)
        try:
            selections = self.api.select_destinations(
                self.cluster.ctxt, spec, [uuid], return_alternates=True)
        except (exception.NoValidHost, oslo_messaging.MessagingTimeout):
            # Not placed, or never answered: nothing was promised.
            return uuid, None
        return uuid, selections[0][0].service_host

    def place(self, count: int) -> dict:
        """``count`` requests at once: uuid -> host (None: NoValidHost)."""
        uuids = []
        for _ in range(count):
            self._next += 1
            uuids.append(fixtures.uuid(500000 + self._next))
        return dict(self.pool.map(self._one, uuids))

    def close(self):
        self.pool.shutdown()


def _placed(results: dict) -> dict:
    return {uuid: host for uuid, host in results.items() if host}


def _assert_exactly_k(results: dict, capacity: int = K) -> None:
    placed = _placed(results)
    per_host = {}
    for host in placed.values():
        per_host[host] = per_host.get(host, 0) + 1
    assert len(placed) == capacity, per_host
    assert max(per_host.values()) <= SLOTS_PER_HOST, per_host
    # The inventory holds exactly what callers were told, no more.
    stored = usage.placements_get(list(results))
    assert {u: p['host'] for u, p in stored.items()} == placed
    rows = usage.usage_get_all()
    assert sum(r['claimed_instances'] for r in rows) == capacity
    assert all(r['claimed_memory_mb'] + r['reported_memory_mb']
               <= SLOTS_PER_HOST * SLOT_MB for r in rows)


def _free_everything(cluster, results: dict) -> None:
    """The computes delete every instance: capacity is free again."""
    for uuid, host in _placed(results).items():
        cluster.api.delete_instance_info(cluster.admin_ctxt, host, uuid)
    daemons.wait_for(
        lambda: not any(r['claimed_instances']
                        for r in usage.usage_get_all()),
        30, what='the deletions to reach the inventory')


def _start(cluster, url: str, services: int = 2, **opts) -> None:
    """Start the services and the fleet side by side; wait for all.

    The schema is made first, as ``scheduler-manage db sync`` would:
    services that each create it at once on an empty MariaDB database
    collide ("Table 'hosts' already exists").
    """
    migration.db_sync(connection=url)
    scheduler_opts = dict(SCHEDULER_OPTS, **opts)
    names = ['sched-%d' % index for index in range(services)]
    started = [cluster.start_scheduler(url, name=name,
                                       scheduler_opts=scheduler_opts,
                                       wait=False) for name in names]
    cluster.start_sim(fleet=_fleet(cluster.tmp))
    for name, daemon in zip(names, started):
        cluster.wait_ready(daemon, name, scheduler_opts['workers'])
    _wait_for_the_fleet(cluster, HOSTS)


#: Seconds without one more host known to a worker after which the
#: fleet's start is reported as stuck: the wait goes on while hosts
#: come, however slowly a loaded machine starts them.
FLEET_QUIET = 60


def _wait_for_the_fleet(cluster, hosts: int) -> None:
    """Wait until the worker that answers passes every simulated host
    for a slot; fail once no more hosts came for ``FLEET_QUIET`` s,
    saying what the workers knew and what the simulator said."""
    seen = {'best': -1, 'last': None, 'error': None}
    progress = time.monotonic()
    while time.monotonic() - progress < FLEET_QUIET:
        try:
            answer = cluster.api.explain(cluster.admin_ctxt, fixtures.request(
                memory_mb=SLOT_MB))
        except oslo_messaging.MessagingTimeout as e:
            seen['error'] = e  # a starved worker: the wait goes on
        else:
            if answer['passed'] == hosts:
                return
            seen['last'] = {k: answer[k] for k in ('hosts_known', 'passed')}
            if answer['passed'] > seen['best']:
                seen['best'] = answer['passed']
                progress = time.monotonic()
        time.sleep(0.5)
    reporting = [line for line in cluster.sim.log().splitlines()
                 if 'reports/s' in line or 'Could not send' in line]
    pytest.fail('no more of the %d simulated hosts passed for %d s: last '
                'answer %s, last error %r; the simulator said:\n%s' % (
                    hosts, FLEET_QUIET, seen['last'], seen['error'],
                    '\n'.join(reporting[-10:])))


def _exactly_k_twice(cluster, url: str, conf) -> None:
    """Exactly K, then, once the computes freed it all, exactly K again:
    every worker sees capacity coming back as it sees it going."""
    _use_inventory(conf, url)
    callers = Callers(cluster)
    try:
        for _round in range(2):
            results = callers.place(REQUESTS)
            _assert_exactly_k(results)
            _free_everything(cluster, results)
    finally:
        callers.close()


@pytest.mark.parametrize('db', ['postgresql_url', 'mysql_url'])
def test_two_daemons_with_two_workers_place_exactly_k(cluster, conf,
                                                      request, db):
    url = request.getfixturevalue(db)
    _start(cluster, url, services=2)
    _exactly_k_twice(cluster, url, conf)


def test_one_daemon_with_two_workers_on_sqlite_places_exactly_k(
        cluster, conf, tmp_path):
    url = 'sqlite:///%s' % (tmp_path / 'inventory.sqlite')
    _start(cluster, url, services=1)
    _exactly_k_twice(cluster, url, conf)


def test_the_threading_executor_places_exactly_k(cluster, conf,
                                                 postgresql_url):
    _start(cluster, postgresql_url, services=2, executor='threading')
    assert 'executor threading' in cluster.scheduler.log()
    _exactly_k_twice(cluster, postgresql_url, conf)


def test_a_retry_with_the_same_uuids_gets_the_same_placements(
        cluster, conf, postgresql_url):
    _start(cluster, postgresql_url, services=2)
    _use_inventory(conf, postgresql_url)
    uuids = [fixtures.uuid(n) for n in (1, 2, 3)]
    spec = fixtures.request(memory_mb=SLOT_MB, num_instances=3)
    first = cluster.api.select_destinations(cluster.ctxt, spec, uuids)
    hosts = [alts[0].service_host for alts in first]
    # The caller timed out and asks again, reaching any worker.
    for _ in range(4):
        again = cluster.api.select_destinations(
            cluster.ctxt, fixtures.request(memory_mb=SLOT_MB,
                                           num_instances=3), uuids)
        assert [alts[0].service_host for alts in again] == hosts
    assert sum(r['claimed_instances'] for r in usage.usage_get_all()) == 3
    # Another request naming a pending instance with another flavor is
    # refused, with a typed error.
    with pytest.raises(exception.InstanceAlreadyPlaced):
        cluster.api.select_destinations(
            cluster.ctxt, fixtures.request(memory_mb=2 * SLOT_MB),
            uuids[:1])


def _workers_of(pid: int) -> list:
    out = subprocess.run(['pgrep', '-P', str(pid)], capture_output=True,
                         text=True).stdout
    return [int(p) for p in out.split()]


@pytest.mark.parametrize('db', ['postgresql_url', 'mysql_url', 'sqlite'])
def test_kill_9_loses_nothing_a_caller_was_promised(cluster, conf, request,
                                                    tmp_path, db):
    url = ('sqlite:///%s' % (tmp_path / 'inventory.sqlite')
           if db == 'sqlite' else request.getfixturevalue(db))
    hosts, slots = 20, 5
    capacity = hosts * slots
    cluster.start_scheduler(url, name='sched-0',
                            scheduler_opts=SCHEDULER_OPTS)
    cluster.start_sim(fleet=_fleet(cluster.tmp, hosts, slots))
    _wait_for_the_fleet(cluster, hosts)
    _use_inventory(conf, url)
    # A caller whose request died with the worker waits for its timeout.
    # One that gives up early was promised nothing: its request expires
    # in the queue, or, if a worker had taken it, its claims count in
    # ``held`` below.
    callers = Callers(cluster, threads=16, timeout=KILLED_CALL_TIMEOUT)
    try:
        workers = _workers_of(cluster.scheduler.proc.pid)
        assert len(workers) == 2, workers
        with concurrent.futures.ThreadPoolExecutor(1) as side:
            load = side.submit(callers.place, 60)
            daemons.wait_for(
                lambda: sum(r['claimed_instances']
                            for r in usage.usage_get_all()) >= 10,
                30, interval=0.01, what='placements under way')
            os.kill(workers[0], signal.SIGKILL)
            promised = _placed(load.result(120))
        assert promised, 'no caller was answered'
        stored = usage.placements_get(list(promised))
        assert {u: p['host'] for u, p in stored.items()} == promised
        # The service replaced the worker and still stops on SIGTERM: a
        # worker killed in the middle of a log line once froze every
        # process of the service (one log lock shared across fork).
        started = 'Starting scheduler-service on host sched-0,'
        daemons.wait_for(
            lambda: cluster.scheduler.log().count(started) >= 3, 30,
            what='the killed worker to be replaced')

        # Everything restarts; no compute reports any more.
        cluster.sim.stop()
        assert cluster.scheduler.stop() == 0, 'stopped by SIGTERM'
        held = sum(r['claimed_instances'] for r in usage.usage_get_all())
        assert held >= len(promised)
        cluster.start_scheduler(url, name='sched-1',
                                scheduler_opts=SCHEDULER_OPTS)
        # Every one of these must be answered: no short timeout.
        callers.api = rpcapi.SchedulerAPI(timeout=60)
        rest = _placed(callers.place(capacity))
        assert len(rest) == capacity - held
        per_host = {}
        for placement in usage.placements_get(
                list(promised) + list(rest)).values():
            per_host[placement['host']] = per_host.get(
                placement['host'], 0) + 1
        assert max(per_host.values()) <= slots
    finally:
        callers.close()


def test_selections_carry_only_this_requests_limits(cluster, conf,
                                                    postgresql_url):
    _start(cluster, postgresql_url, services=1)
    plain = cluster.api.select_destinations(
        cluster.ctxt, fixtures.request(memory_mb=SLOT_MB),
        [fixtures.uuid(77)])
    limits = plain[0][0].limits
    assert limits.memory_mb == SLOTS_PER_HOST * SLOT_MB
    assert limits.obj_get('numa_topology') is None
    assert isinstance(plain[0][0], objects.Selection)
