"""Usage that holds when a compute's news of a deletion is lost.

A real scheduler service (two workers) on real RabbitMQ and a real
PostgreSQL inventory; this process plays one compute
(``SimulatedCompute`` talking to the service over the bus), so that it
can lose exactly one message.

Issue 28, items 1 and 2: a placement the compute's reports no longer
listed stayed ``active`` with its usage nowhere (the report had taken
it out of ``reported_*``): the node's usage row was below its
placement rows and the claim check let the node be over-committed;
and a ``delete_instance_info`` that failed on every worker (the
database unreachable, its connections refused) left the placement in
the inventory for ever.
"""

import pytest
import sqlalchemy as sa

from scheduler import context as ctx_mod
from scheduler.db import usage
from scheduler import exception
from scheduler.simulator import agent
from scheduler.simulator import fleet as fleet_mod
from tests.functional import daemons
from tests.functional import tcp_proxy
from tests.functional import test_claims
from tests.unit import fixtures

HOST_MB = 16384
INSTANCE_MB = 8192
#: Claims must not expire, nor the host go down, while a test runs.
SCHEDULER_OPTS = {'service_down_time': 120, 'workers': 2}


class _LosesDeletes:
    """A SchedulerAPI whose ``delete_instance_info`` never arrives (the
    compute's one lost message)."""

    def __init__(self, api):
        self._api = api

    def delete_instance_info(self, *_args):
        pass

    def __getattr__(self, name):
        return getattr(self._api, name)


def _compute(cluster, api=None) -> agent.SimulatedCompute:
    spec = fleet_mod.uniform(1, prefix='c', memory_mb=HOST_MB,
                             local_gb=1000, vcpus=64,
                             ram_allocation_ratio=1.0,
                             cpu_allocation_ratio=1.0,
                             disk_allocation_ratio=1.0).hosts[0]
    return agent.SimulatedCompute(spec, api=api or cluster.api)


def _usage_and_rows(host: str) -> tuple:
    """(reported + claimed MB of the node, sum of its placement rows)."""
    row = next(r for r in usage.usage_get_all() if r['host'] == host)
    placed = [p for p in usage.placements_get(_all_uuids()).values()
              if p['host'] == host]
    return (row['reported_memory_mb'] + row['claimed_memory_mb'],
            sum(p['memory_mb'] for p in placed))


def _all_uuids() -> list:
    from scheduler.db import api as db_api
    return [r['instance_uuid'] for r in db_api.instance_get_all()]


def _place(cluster, number: int, memory_mb: int = INSTANCE_MB) -> str:
    """One instance placed by the service; its uuid (NoValidHost
    raised)."""
    uuid = fixtures.uuid(number)
    spec = fixtures.request(memory_mb=memory_mb, vcpus=1, root_gb=1)
    selections = cluster.api.select_destinations(cluster.ctxt, spec, [uuid])
    assert selections[0][0].service_host == 'c-001'
    return uuid


def _place_or_say(cluster, number: int, memory_mb: int) -> str:
    """``_place``; a refusal says what the inventory held just before
    the request and just after it (the nodes' usage rows, the
    placements) and why the filters refuse now (``explain``): whether
    the inventory or a worker's view of it was behind."""
    before = usage.usage_get_all()
    try:
        return _place(cluster, number, memory_mb=memory_mb)
    except exception.NoValidHost as e:
        after = usage.usage_get_all()
        placed = usage.placements_get(_all_uuids())
        explained = cluster.api.explain(cluster.admin_ctxt, fixtures.request(
            memory_mb=memory_mb, vcpus=1, root_gb=1))
        raise AssertionError(
            'NoValidHost (%s)\nusage rows before the request: %r\nafter '
            'it: %r\nplacements after it: %r\nexplain after it: %r'
            % (str(e).splitlines()[0], before, after, placed,
               explained)) from e


def _start(cluster, url: str, compute, executor: str) -> None:
    cluster.start_scheduler(url, name='sched-0',
                            scheduler_opts=dict(SCHEDULER_OPTS,
                                                executor=executor))
    assert 'executor %s' % executor in cluster.scheduler.log()

    def reported():
        # Again until heard: a fanout cast sent before a worker's
        # queue exists reaches nobody.
        compute.report(ctx_mod.get_admin_context())
        return cluster.api.explain(cluster.admin_ctxt, fixtures.request(
            memory_mb=INSTANCE_MB))['passed'] == 1

    daemons.wait_for(reported, 60, interval=1,
                     what='the compute to report')


def _built_and_reported(cluster, compute, uuid: str) -> None:
    """The compute builds ``uuid`` (update_instance_info, then a report
    that lists it); wait until the inventory has it as reported."""
    spec = fixtures.request(memory_mb=INSTANCE_MB, vcpus=1, root_gb=1)
    assert compute.run_instance(uuid, spec, ctxt=cluster.admin_ctxt)
    daemons.wait_for(
        lambda: not usage.placements_get([uuid])[uuid]['pending'], 30,
        what='the report that lists the instance to be written')


def _wait_report_written(compute, before, ctxt) -> None:
    """Wait until a report newer than ``before`` is written; the compute
    reports again every few seconds until then (a fanout cast sent
    while a worker's queue is being declared is lost)."""
    for _attempt in range(6):
        try:
            daemons.wait_for(lambda: _reported_at(compute) > before, 5,
                             what='the report to be written')
            return
        except AssertionError:
            compute.report(ctxt)
    raise AssertionError('no report of %s written' % compute.name)


def _reported_at(compute):
    return next(r for r in usage.usage_get_all()
                if r['host'] == compute.name)['reported_at']


@pytest.mark.parametrize('executor', ['eventlet', 'threading'])
def test_a_report_without_a_placed_instance_keeps_its_usage_counted(
        cluster, conf, postgresql_url, executor):
    """Item 1: usage never below the placement rows, whatever a report
    says; the node is never placed past its RAM."""
    compute = _compute(cluster, api=_LosesDeletes(cluster.api))
    _start(cluster, postgresql_url, compute, executor)
    test_claims._use_inventory(conf, postgresql_url)
    first = _place(cluster, 1)
    _built_and_reported(cluster, compute, first)
    # The compute deletes it; the inventory never hears of the deletion,
    # and the compute's next report no longer lists it.
    before = _reported_at(compute)
    assert compute.terminate_instance(first, ctxt=cluster.admin_ctxt)
    _wait_report_written(compute, before, cluster.admin_ctxt)
    counted, placed = _usage_and_rows(compute.name)
    # The first report without it makes it pending again, the next one
    # drops it: either way its RAM stays counted while the row is there.
    assert counted >= placed
    assert placed in (0, INSTANCE_MB)
    # The node is full as long as the placement is there: a request
    # for all its RAM is refused (it was placed: 24,576 MB of
    # placements on a 16,384 MB node).
    if usage.placements_get([first]):
        with pytest.raises(exception.NoValidHost):
            _place(cluster, 2, memory_mb=HOST_MB)
    counted, placed = _usage_and_rows(compute.name)
    assert counted >= placed
    assert placed <= HOST_MB


@pytest.mark.parametrize('executor', ['eventlet', 'threading'])
def test_an_instance_deleted_while_the_inventory_was_cut_off_goes(
        cluster, conf, postgresql_url, executor):
    """Item 2: a delete_instance_info every worker failed to write (the
    database unreachable) does not leave the placement for ever: the
    workers apply it once the database is back; the compute's reports
    that no longer list the instance free its usage."""
    proxy = tcp_proxy.TCPProxy(upstream=('127.0.0.1', 5432)).start()
    try:
        url = sa.make_url(postgresql_url).set(port=proxy.port)
        url = url.render_as_string(hide_password=False)
        compute = _compute(cluster)
        _start(cluster, url, compute, executor)
        test_claims._use_inventory(conf, postgresql_url)
        uuid = _place(cluster, 1)
        _built_and_reported(cluster, compute, uuid)

        proxy.stop()
        log = cluster.scheduler.log()
        assert compute.terminate_instance(uuid, ctxt=cluster.admin_ctxt)
        deleted = 'Instance %s deleted on %s' % (uuid, compute.name)
        daemons.wait_for(
            lambda: cluster.scheduler.log().count(deleted) >= 2, 30,
            what='both workers to hear of the deletion')
        # Their releases met the outage: nothing reached the database
        # (each worker keeps the news for later, and says so once).
        outage = 'Inventory database unavailable'
        daemons.wait_for(
            lambda: cluster.scheduler.log().count(outage)
            > log.count(outage), 30, what='the releases to fail')
        assert usage.placements_get([uuid])[uuid]['status'] == 'active'
        proxy.start()
        # More news of the host (an instance it never had) has each
        # worker apply what it kept at once, not at its next periodic
        # run: the placement goes before the intake worker's flush
        # writes the report it took during the outage (an order the
        # periodic runs of the two workers also come to by chance).
        assert not compute.terminate_instance(fixtures.uuid(99),
                                              ctxt=cluster.admin_ctxt)
        daemons.wait_for(lambda: usage.placements_get([uuid]) == {}, 30,
                         interval=0.05,
                         what='the kept deletion to be applied')

        # Gone from the placements, the instance's RAM may still be in
        # the node's reported usage: an active placement's usage is the
        # report's (the module docstring of scheduler.db.usage), which
        # a written report that no longer lists it takes away (the
        # intake worker's flush of the one it kept, or the compute's
        # next).  The compute keeps reporting, without the instance.
        def reported_and_freed():
            compute.report(cluster.admin_ctxt)
            return _usage_and_rows(compute.name) == (0, 0)

        daemons.wait_for(reported_and_freed, 30, interval=1,
                         what='the usage of the deleted instance to go')
        # Its RAM is free again, for every worker.
        _place_or_say(cluster, 2, memory_mb=HOST_MB)
    finally:
        daemons.stop_daemons_first()
        proxy.stop()
