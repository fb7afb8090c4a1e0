"""Quiet hosts kept up by liveness messages alone (API 1.6, issue 26).

A real scheduler service (two workers) on real RabbitMQ and a real
PostgreSQL inventory.  This process plays the computes: simulated
hosts (``SimulatedCompute``) reporting through this release's
``SchedulerAPI.report``, each serving compute API 1.1 on its own RPC
server, as a compute agent does.

* once every host sent its full report, the hosts only send liveness
  messages, and every worker keeps every host up for longer than
  ``service_down_time``: the liveness alone renews them;
* a host whose state changed sends its full report, which lands in the
  inventory;
* a host whose full report was lost names, in its liveness messages, a
  report the scheduler does not hold: the scheduler asks for it
  (``send_report``) and it lands;
* an instance deleted without the scheduler hearing of it: the host's
  liveness messages cannot renew a node whose inventory usage differs
  from its report, the scheduler asks for the full report, and the
  placement goes (reconciliation runs on full reports);
* every scheduler stopped for longer than ``service_down_time``: the
  deployment started again keeps the hosts it last heard, since no
  scheduler could hear them meanwhile (``scheduler.hearing``).
"""

import collections
import os
import signal
import time
import uuid

import oslo_messaging

from scheduler import concurrency
from scheduler import context as ctx_mod
from scheduler.db import hosts as hosts_db
from scheduler.db import usage
from scheduler import rpc
from scheduler import rpcapi
from scheduler.simulator import agent
from scheduler.simulator import fleet as fleet_mod
from tests.functional import daemons
from tests.functional import test_claims
from tests.functional.test_scheduler_service import make_spec
from tests.functional.test_scheduler_service import wait_for_hosts

HOSTS = 6
#: Generous beside the 1 s report interval of this test (ten reports).
DOWN_TIME = 10
DOWN_LINE = 'has not reported for'
INSTANCE_MB = 512


class CountingAPI(rpcapi.SchedulerAPI):
    """This release's client, counting what it sent; it can lose one
    full report of a host (as a broker restart may)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.sent: collections.Counter = collections.Counter()
        self.lose_next_full: set = set()
        #: Whether ``delete_instance_info`` is lost on the way.
        self.lose_deletes = False

    def report(self, ctxt, host_state):
        alive = super().report(ctxt, host_state)
        self.sent[(host_state.host, 'alive' if alive else 'full')] += 1
        return alive

    def update_service_capabilities(self, ctxt, host_state):
        if host_state.host in self.lose_next_full:
            self.lose_next_full.discard(host_state.host)
            return
        super().update_service_capabilities(ctxt, host_state)

    def delete_instance_info(self, ctxt, host_name, instance_uuid):
        if not self.lose_deletes:
            super().delete_instance_info(ctxt, host_name, instance_uuid)

    def count(self, kind: str) -> int:
        return sum(n for (_host, k), n in self.sent.items() if k == kind)


def _computes(cluster, api) -> tuple:
    prefix = daemons.unique_topic('alive')
    computes = [agent.SimulatedCompute(spec, api=api)
                for spec in fleet_mod.uniform(HOSTS, prefix=prefix).hosts]
    servers = []
    for compute in computes:
        server = rpc.get_server(
            oslo_messaging.Target(topic=cluster.compute_topic,
                                  server=compute.name),
            [agent.ComputeEndpoint(compute)])
        server.start()
        servers.append(server)
        cluster.queues.add('%s.%s' % (cluster.compute_topic, compute.name))
    return computes, servers


def _all_up(cluster, answers: int = 4) -> bool:
    for _ in range(answers):
        found = cluster.api.explain(cluster.admin_ctxt, make_spec())
        if (found['hosts_known'], found['passed']) != (HOSTS, HOSTS):
            return False
    return True


def _stored(host: str) -> dict:
    row = next(r for r in hosts_db.host_reports_get_all()
               if r['host'] == host)
    return row['report']['versioned_object.data']


def _report_all(computes) -> None:
    ctxt = ctx_mod.get_admin_context()
    for compute in computes:
        compute.report(ctxt)


def _start(cluster, conf, database_url: str, monkeypatch,
           name: str) -> tuple:
    """A two-worker service (threading executor) and HOSTS computes of
    this process serving compute API 1.1, every host up on every
    worker: ``(service, api, computes, servers)``."""
    monkeypatch.setattr(concurrency, 'EXECUTOR', 'threading')
    service = cluster.start_scheduler(
        database_url, name=name,
        scheduler_opts={'workers': 2, 'service_down_time': DOWN_TIME})
    test_claims._use_inventory(conf, database_url)
    api = CountingAPI(timeout=30)
    computes, servers = _computes(cluster, api)
    try:
        daemons.wait_for(lambda: _report_all(computes) or _all_up(cluster),
                         90, interval=1,
                         what='every worker to see %d hosts up' % HOSTS)
    except BaseException:
        rpc.stop_servers(servers)
        raise
    return service, api, computes, servers


def test_quiet_hosts_stay_up_on_liveness_and_changed_reports_land(
        cluster, conf, postgresql_url, monkeypatch):
    # This process plays the computes: they send liveness messages.
    conf.config(report_liveness=True, group='scheduler')
    service, api, computes, servers = _start(cluster, conf, postgresql_url,
                                             monkeypatch, 'alive')
    ctxt = ctx_mod.get_admin_context()

    def report_all() -> None:
        _report_all(computes)

    try:
        daemons.wait_for(lambda: report_all() or api.count('alive')
                         >= HOSTS, 60, interval=1,
                         what='the hosts to send liveness messages')

        # Longer than service_down_time on liveness alone.
        full, alive = api.count('full'), api.count('alive')
        deadline = time.monotonic() + DOWN_TIME + 5
        while time.monotonic() < deadline:
            report_all()
            assert _all_up(cluster, answers=2), service.log()[-3000:]
            time.sleep(1)
        assert _all_up(cluster)
        assert api.count('full') == full, api.sent
        assert api.count('alive') - alive >= HOSTS * DOWN_TIME
        assert DOWN_LINE not in service.log(), service.log()[-3000:]

        # A changed host sends its full report, which lands.
        changed = computes[0]
        spec = make_spec()
        before = api.sent[(changed.name, 'full')]
        assert changed.run_instance(str(uuid.uuid4()), spec, ctxt=ctxt)
        assert api.sent[(changed.name, 'full')] == before + 1
        daemons.wait_for(lambda: _stored(changed.name)['memory_mb_used']
                         == INSTANCE_MB, 30,
                         what='the changed report in the inventory')

        # A lost full report: the liveness that follows names a report
        # the scheduler lacks, which asks for it.
        lost = computes[1]
        api.lose_next_full.add(lost.name)
        before = api.sent[(lost.name, 'full')]
        assert lost.run_instance(str(uuid.uuid4()), spec, ctxt=ctxt)
        assert api.sent[(lost.name, 'full')] == before + 1
        assert _stored(lost.name)['memory_mb_used'] == 0

        def asked_and_landed() -> bool:
            report_all()
            return _stored(lost.name)['memory_mb_used'] == INSTANCE_MB
        daemons.wait_for(asked_and_landed, 30, interval=1,
                         what='the lost report to be asked for')
        # Sent again only because the scheduler asked.
        assert api.sent[(lost.name, 'full')] >= before + 2
        assert _all_up(cluster)
        assert DOWN_LINE not in service.log(), service.log()[-3000:]
        assert 'Traceback' not in service.log(), service.log()[-3000:]
    finally:
        rpc.stop_servers(servers)


def test_a_deletion_never_heard_of_is_reconciled_on_liveness(
        cluster, conf, postgresql_url, monkeypatch):
    # The default: liveness messages from computes that serve send_report.
    service, api, computes, servers = _start(cluster, conf, postgresql_url,
                                             monkeypatch, 'reconcile')
    ctxt = ctx_mod.get_admin_context()

    def report_all() -> None:
        _report_all(computes)

    try:
        instance = str(uuid.uuid4())
        spec = make_spec()
        selections = cluster.api.select_destinations(cluster.ctxt, spec,
                                                     [instance])
        host = next(c for c in computes
                    if c.name == selections[0][0].service_host)
        assert host.run_instance(instance, spec, ctxt=ctxt)
        daemons.wait_for(
            lambda: usage.placements_get([instance])[instance]['status']
            == 'active', 30, what='the build to be confirmed')
        # Quiet from here on: liveness messages only.
        daemons.wait_for(lambda: report_all() or api.count('alive')
                         >= HOSTS, 30, interval=1,
                         what='the hosts to send liveness messages')

        api.lose_deletes = True
        full = api.sent[(host.name, 'full')]
        assert host.terminate_instance(instance, ctxt=ctxt)
        assert api.sent[(host.name, 'full')] == full + 1

        def gone() -> bool:
            report_all()
            return usage.placements_get([instance]) == {}
        daemons.wait_for(gone, 30, interval=1,
                         what='the placement of the deleted instance to go')
        # The host's state never changed after the deletion: it sent its
        # full report again only because the scheduler asked.
        assert api.sent[(host.name, 'full')] >= full + 2, api.sent
        assert _all_up(cluster)
        assert 'Traceback' not in service.log(), service.log()[-3000:]
    finally:
        rpc.stop_servers(servers)


def test_a_deployment_started_again_after_a_long_stop_keeps_its_hosts(
        cluster, conf, tmp_path):
    """The only service stops for longer than ``service_down_time``; the
    next one used to judge every host down until each reported again
    (NoValidHost for the first requests).  The computes are paused
    (SIGSTOP) so that none reports before the request."""
    db = 'sqlite:///%s' % (tmp_path / 'inventory.sqlite')
    # Long enough for the next service's start and first request (no
    # host reports before it), short enough that the stop outlasts it.
    down_time = 10
    opts = {'service_down_time': down_time}
    first = cluster.start_scheduler(db, scheduler_opts=opts)
    sim = cluster.start_sim(hosts=2, service_down_time=down_time)
    hosts = wait_for_hosts(conf, db, 2)
    os.kill(sim.proc.pid, signal.SIGSTOP)
    try:
        assert first.stop() == 0
        # Longer than service_down_time: without the stop taken out of
        # their ages, the hosts would be down for the next service.
        time.sleep(down_time + 2)
        cluster.start_scheduler(db, name='sched2', scheduler_opts=opts)
        result = cluster.api.select_destinations(cluster.ctxt,
                                                 make_spec(ram=64))
    finally:
        os.kill(sim.proc.pid, signal.SIGCONT)
    assert result[0][0].service_host in hosts, result
