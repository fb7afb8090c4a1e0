"""Reports taken once per deployment (issue 26).

A real scheduler service with two workers, real RabbitMQ, a real
PostgreSQL inventory, and a simulated fleet of this release (API 1.5):
each report goes to the shared intake queue and is taken by one
worker, which writes it to the inventory; the other worker reads it
there (``HostManager.refresh_changed_reports``; the times of quiet
reports, ``refresh_reports``, once they get old there).

* every host is known and up in the answers of both workers, one of
  which (``[scheduler] report_workers``, 1) consumes the intake;
* a worker killed with SIGKILL while reports flow loses no host and
  marks none down (the launcher starts another; the survivor and the
  new one keep every host up);
* so does killing the worker that consumes the report queues: the
  other takes its turn over (``scheduler.report_consumers``), also
  after a reload (SIGHUP), under eventlet and threads;
* a broker restart (a RabbitMQ node of the test's own) while reports
  flow loses no host and marks none down;
* so does a report the inventory cannot store, refused alone.
"""

import os
import re
import signal
import subprocess
import time
import warnings

import kombu
import oslo_messaging
import pytest

from scheduler import rpc
from tests.functional import daemons
from tests.functional.test_scheduler_service import make_spec
from tests.unit import fixtures

HOSTS = 20
#: Generous beside the 1 s report interval (ten reports): a host marked
#: down here is a report lost or never read, not a slow machine.
DOWN_TIME = 10
OPTS = {'workers': 2, 'service_down_time': DOWN_TIME}
DOWN_LINE = 'has not reported for'
BROKER_DOWN_TIME = 40


def _every_answer_knows_every_host(cluster, answers: int = 8) -> None:
    """``answers`` explains in a row (the two workers take turns on
    the request queue) each see every host up."""
    def all_up():
        for _ in range(answers):
            found = cluster.api.explain(cluster.admin_ctxt, make_spec())
            if (found['hosts_known'], found['passed']) != (HOSTS, HOSTS):
                return False
        return True
    daemons.wait_for(all_up, 60, interval=0.5,
                     what='every worker to see %d hosts up' % HOSTS)


def _intake_consumers(cluster) -> int:
    url = cluster.transport_url.replace('rabbit://', 'amqp://', 1)
    with kombu.Connection(url, connect_timeout=5) as conn:
        return conn.default_channel.queue_declare(
            queue=rpc.intake_topic(), passive=True).consumer_count


def _worker_pids(service: daemons.Daemon) -> list:
    """The service's forked workers (children of its launcher)."""
    listed = subprocess.run(
        ['ps', '-o', 'pid=', '--ppid', str(service.proc.pid)],
        capture_output=True, text=True, check=False).stdout
    return [int(pid) for pid in listed.split()]


TURN_LINE = re.compile(r'Consuming the report queues .* pid (\d+)\)')


def _report_consumer(service: daemons.Daemon) -> int | None:
    """The worker that took a report turn last (its log line)."""
    found = TURN_LINE.findall(service.log())
    return int(found[-1]) if found else None


def _start(cluster, database_url: str, executor: str = 'eventlet',
           down_time: int = DOWN_TIME):
    service = cluster.start_scheduler(
        database_url, name='intake',
        scheduler_opts=dict(OPTS, executor=executor,
                            service_down_time=down_time))
    cluster.start_sim(hosts=HOSTS, service_down_time=down_time,
                      report_intake=True)
    return service


@pytest.mark.parametrize('executor', ['eventlet', 'threading'])
def test_each_report_taken_once_every_worker_sees_every_host(
        cluster, postgresql_url, executor):
    service = _start(cluster, postgresql_url, executor)
    _every_answer_knows_every_host(cluster)
    # The fleet casts to the intake queue, which one worker consumes.
    daemons.wait_for(lambda: 'Schedulers take reports on' in
                     cluster.sim.log(), 30, what='the fleet to use the '
                     'intake')
    assert _intake_consumers(cluster) == 1
    assert _report_consumer(service) in _worker_pids(service)
    # Hosts reached a worker through the inventory, not a report of its
    # own: the report went to the other worker only.
    assert 'reported (to another worker)' in service.log()
    assert DOWN_LINE not in service.log()


def _no_host_lost_for_a_down_time(cluster, service) -> None:
    """For longer than service_down_time every answer knows every host:
    a host whose reports were lost with a killed worker, or not read by
    another, would be marked down."""
    deadline = time.monotonic() + DOWN_TIME + 3
    while time.monotonic() < deadline:
        _every_answer_knows_every_host(cluster, answers=2)
        time.sleep(1)
    _every_answer_knows_every_host(cluster)
    assert DOWN_LINE not in service.log(), service.log()[-3000:]


def test_a_worker_killed_while_reports_flow_loses_no_host(
        cluster, postgresql_url):
    service = _start(cluster, postgresql_url)
    _every_answer_knows_every_host(cluster)
    victim = _worker_pids(service)[0]
    os.kill(victim, signal.SIGKILL)
    # The launcher forks a new worker; meanwhile the survivor takes
    # every report.
    daemons.wait_for(lambda: len(_worker_pids(service)) == 2
                     and victim not in _worker_pids(service), 60,
                     what='a new worker')
    _no_host_lost_for_a_down_time(cluster, service)


@pytest.mark.parametrize('executor', ['eventlet', 'threading'])
def test_the_report_worker_killed_while_reports_flow_loses_no_host(
        cluster, postgresql_url, executor):
    service = _start(cluster, postgresql_url, executor)
    _every_answer_knows_every_host(cluster)
    daemons.wait_for(lambda: _intake_consumers(cluster) == 1, 30,
                     what='one worker to consume the intake')
    consumer = _report_consumer(service)
    assert consumer in _worker_pids(service)
    # A reload keeps the consumer and its turn.
    os.kill(service.proc.pid, signal.SIGHUP)
    daemons.wait_for(lambda: service.log().count(
        'Reloading configuration') >= 2, 30, what='both workers to reload')
    _every_answer_knows_every_host(cluster, answers=2)
    assert _intake_consumers(cluster) == 1
    assert _report_consumer(service) == consumer
    os.kill(consumer, signal.SIGKILL)
    # The other worker takes the turn over within about a second (the
    # kernel let the dead one's lock go), before the launcher's new one.
    daemons.wait_for(lambda: _report_consumer(service) not in (
        None, consumer), 30, what='another worker to consume the reports')
    daemons.wait_for(lambda: len(_worker_pids(service)) == 2
                     and consumer not in _worker_pids(service), 60,
                     what='a new worker')
    _no_host_lost_for_a_down_time(cluster, service)
    assert _intake_consumers(cluster) == 1


def test_a_broker_restart_while_reports_flow_loses_no_host(
        own_cluster, broker, postgresql_url):
    cluster = own_cluster
    # The computes, not the service, may take a while to reconnect on a
    # loaded machine: hosts are down only past that.
    service = _start(cluster, postgresql_url, down_time=BROKER_DOWN_TIME)
    _every_answer_knows_every_host(cluster)
    broker.stop_app()
    time.sleep(3)
    broker.start_app()
    # The report worker consumes the intake again, and every host stays
    # up.
    daemons.wait_for(lambda: broker.consumers(rpc.intake_topic()) == 1,
                     60, what='the report worker to consume the intake '
                     'again')
    deadline = time.monotonic() + DOWN_TIME
    while time.monotonic() < deadline:
        _every_answer_knows_every_host(cluster, answers=2)
        time.sleep(1)
    assert DOWN_LINE not in service.log(), service.log()[-3000:]


def test_a_report_the_inventory_cannot_store_loses_no_other_report(
        cluster, postgresql_url):
    """A report with a node uuid longer than its column and a used RAM
    beyond its 32-bit one, cast among the fleet's: PostgreSQL refused
    the batch it was written in, and every write after that retried
    the batch, so the worker that does not take the reports lost the
    whole fleet.  It is refused alone, with one warning."""
    service = _start(cluster, postgresql_url)
    _every_answer_knows_every_host(cluster)
    intake = oslo_messaging.get_rpc_client(
        rpc.get_transport(), rpc.intake_target(version='1.5'))
    for n, field, value in ((1, 'uuid', 'x' * 100),
                            (2, 'memory_mb_used', 2 ** 35)):
        report = fixtures.report('hostile-%d' % n)
        with warnings.catch_warnings():
            warnings.simplefilter('ignore', FutureWarning)  # not a UUID
            setattr(report, field, value)
        intake.cast(cluster.admin_ctxt.to_dict(),
                    'update_service_capabilities',
                    host_state=report.obj_to_primitive())
    _no_host_lost_for_a_down_time(cluster, service)
    assert 'Could not write to the inventory' not in service.log()
    assert service.log().count('Rejected a cast of update_service_'
                               'capabilities') == 2
    assert 'Traceback' not in service.log()
