"""The scheduler daemon end to end: real processes, RabbitMQ, real databases.

Each scenario starts ``scheduler-service`` and ``scheduler-compute-sim``
with their own config files on private topics, and talks to them
through ``scheduler.rpcapi.SchedulerAPI`` like a conductor would.
"""

import os
import shutil
import subprocess
import uuid

import oslo_messaging
import pytest

from scheduler import config
from scheduler.db import api as db_api
from scheduler import exception
from scheduler import objects
from scheduler import rpcapi
from tests.functional import daemons


def make_spec(ram: int = 512, vcpus: int = 1, disk: int = 1,
              num: int = 1, **kwargs) -> objects.RequestSpec:
    return objects.RequestSpec(
        flavor=objects.Flavor(memory_mb=ram, vcpus=vcpus, root_gb=disk),
        num_instances=num, project_id='functional', user_id='tester',
        **kwargs)


def uuids(n: int) -> list:
    return [str(uuid.uuid4()) for _ in range(n)]


def wait_for_hosts(conf, database_url: str, count: int,
                   timeout: float = 60) -> list:
    """Wait until the service has saved ``count`` hosts to the inventory."""
    conf.config(connection=database_url, group='database')
    db_api.reset_engine()

    def known():
        rows = db_api.host_reports_get_all()
        return rows if len(rows) >= count else None
    try:
        rows = daemons.wait_for(known, timeout,
                                what='%d hosts in the inventory' % count)
    finally:
        db_api.reset_engine()
    return sorted(r['host'] for r in rows)


@pytest.fixture(params=['sqlite', 'postgresql', 'mysql'])
def database_url(request, tmp_path):
    if request.param == 'sqlite':
        return 'sqlite:///%s' % (tmp_path / 'inventory.sqlite')
    return request.getfixturevalue('%s_url' % request.param)


def test_placements_and_no_valid_host(cluster, conf, database_url):
    cluster.start_scheduler(database_url)
    cluster.start_sim(hosts=4)
    hosts = wait_for_hosts(conf, database_url, 4)

    result = cluster.api.select_destinations(
        cluster.ctxt, make_spec(num=2), uuids(2), return_alternates=True)

    assert len(result) == 2
    for alternatives in result:
        names = [s.service_host for s in alternatives]
        assert len(names) == 3, 'first choice plus max_attempts-1 alternates'
        assert len(set(names)) == 3
        assert set(names) <= set(hosts)
        assert alternatives[0].limits.memory_mb > 0

    with pytest.raises(exception.NoValidHost) as err:
        cluster.api.select_destinations(cluster.admin_ctxt,
                                        make_spec(ram=10 ** 8), uuids(1))
    assert 'RamFilter' in str(err.value), 'admins see the filter walk'


def test_legacy_dict_api_and_version_cap(cluster, conf, tmp_path):
    db = 'sqlite:///%s' % (tmp_path / 'inventory.sqlite')
    cluster.start_scheduler(db)
    cluster.start_sim(hosts=3)
    hosts = wait_for_hosts(conf, db, 3)

    conf.config(scheduler='1.0', group='upgrade_levels')
    legacy = rpcapi.SchedulerAPI(timeout=30)
    dests = legacy.select_destinations(cluster.ctxt, make_spec(num=2),
                                       return_objects=False)
    assert [sorted(d) for d in dests] == [['host', 'limits', 'nodename']] * 2
    assert {d['host'] for d in dests} <= set(hosts)

    conf.config(scheduler='1.1', group='upgrade_levels')
    capped = rpcapi.SchedulerAPI(timeout=30)
    spec = make_spec(is_bfv=True)
    [[selection]] = capped.select_destinations(cluster.ctxt, spec, uuids(1))
    assert selection.service_host in hosts

    # "auto": the client asks the running scheduler which version it
    # speaks, and caps itself there.
    conf.config(scheduler='auto', group='upgrade_levels')
    auto = rpcapi.SchedulerAPI(timeout=30)
    assert auto.can_send_version(rpcapi.SchedulerAPI.VERSION)
    assert auto.client.version_cap == rpcapi.SchedulerAPI.VERSION
    [[selection]] = auto.select_destinations(cluster.ctxt, make_spec(),
                                             uuids(1))
    assert selection.service_host in hosts


def test_schedule_run_instance_reaches_the_compute(cluster, conf, tmp_path):
    db = 'sqlite:///%s' % (tmp_path / 'inventory.sqlite')
    cluster.start_scheduler(db)
    sim = cluster.start_sim(hosts=2)
    wait_for_hosts(conf, db, 2)
    instance = str(uuid.uuid4())

    cluster.api.schedule_run_instance(cluster.ctxt, make_spec(), [instance])

    daemons.wait_for(lambda: instance in sim.log(), 30,
                     what='run_instance of %s on the simulator' % instance)

    def active():
        conf.config(connection=db, group='database')
        db_api.reset_engine()
        try:
            return [i for i in db_api.instance_get_all()
                    if i['instance_uuid'] == instance
                    and i['status'] == 'active']
        finally:
            db_api.reset_engine()
    daemons.wait_for(active, 30, what='the placement to become active')


def _prefetch_counts(topic: str) -> dict:
    """The broker's prefetch count of each consumer on ``topic``'s
    queues (the request, reports and operator topics)."""
    listed = subprocess.run(
        ['rabbitmqctl', '-q', 'list_consumers', 'queue_name',
         'prefetch_count'], check=True, capture_output=True, text=True,
        timeout=60).stdout
    counts: dict = {}
    for line in listed.splitlines():
        queue, _tab, count = line.partition('\t')
        if queue.startswith(topic) and count.isdigit():
            counts.setdefault(queue, []).append(int(count))
    return counts


def test_the_broker_delivers_a_server_at_most_a_prefetch_of_messages(
        cluster, tmp_path):
    """The broker delivers a server at most ``rabbit_qos_prefetch_count``
    messages it has not acknowledged (oslo's default, 0, is no bound):
    a fleet's reports cast at once wait on the broker, in turn, instead
    of in the service's memory, decoded; an operator's value wins."""
    if shutil.which('rabbitmqctl') is None:
        pytest.skip('rabbitmqctl not available to list consumers')
    db = 'sqlite:///%s' % (tmp_path / 'inventory.sqlite')
    cluster.start_scheduler(db)
    counts = _prefetch_counts(cluster.topic)
    for suffix in ('', '_reports', '_ops'):
        queues = [q for q in counts if q.startswith(cluster.topic + suffix)]
        assert queues, 'no consumer on %s%s: %s' % (cluster.topic, suffix,
                                                    counts)
    assert {n for listed in counts.values() for n in listed} == {
        config.PREFETCH_COUNT}
    cluster.stop_all()

    cluster.start_scheduler(db, name='sched2',
                            extra='[oslo_messaging_rabbit]\n'
                                  'rabbit_qos_prefetch_count = 7\n')
    counts = _prefetch_counts(cluster.topic)
    assert counts
    assert {n for listed in counts.values() for n in listed} == {7}


def test_host_going_silent_is_no_longer_scheduled(cluster, conf, tmp_path):
    db = 'sqlite:///%s' % (tmp_path / 'inventory.sqlite')
    scheduler = cluster.start_scheduler(db)
    cluster.start_sim(hosts=3)
    hosts = wait_for_hosts(conf, db, 3)
    silent = hosts[0]

    open(os.path.join(cluster.control_dir, silent + '.down'), 'w').close()
    daemons.wait_for(lambda: 'Host %s' % silent in scheduler.log()
                     and 'has not reported' in scheduler.log(), 30,
                     what='the service to log %s going down' % silent)

    for _ in range(3):
        result = cluster.api.select_destinations(
            cluster.ctxt, make_spec(num=2), uuids(2), return_alternates=True)
        chosen = {s.service_host for alts in result for s in alts}
        assert silent not in chosen
    with pytest.raises(exception.NoValidHost):
        cluster.api.select_destinations(
            cluster.admin_ctxt, make_spec(force_hosts=[silent]), uuids(1))


def test_bad_input_gets_typed_errors_and_service_keeps_serving(
        cluster, conf, tmp_path):
    db = 'sqlite:///%s' % (tmp_path / 'inventory.sqlite')
    scheduler = cluster.start_scheduler(db)
    cluster.start_sim(hosts=2)
    wait_for_hosts(conf, db, 2)
    client = cluster.api.client.prepare(version='1.2')
    garbage = {'versioned_object.name': 'RequestSpec',
               'versioned_object.namespace': 'scheduler',
               'versioned_object.version': '1.1',
               'versioned_object.data': {'num_instances': 'many'}}
    too_new = dict(garbage, **{'versioned_object.version': '1.99',
                               'versioned_object.data': {}})

    with pytest.raises(exception.MalformedObject):
        client.call(cluster.ctxt, 'select_destinations', spec_obj=garbage)
    with pytest.raises(exception.IncompatibleObjectVersion):
        client.call(cluster.ctxt, 'select_destinations', spec_obj=too_new)
    with pytest.raises(exception.InvalidRequest):
        client.call(cluster.ctxt, 'select_destinations',
                    spec_obj=make_spec(num=0), return_objects=True)
    with pytest.raises(exception.InvalidRequest):
        client.call(cluster.ctxt, 'select_destinations',
                    request_spec='not a dict')
    with pytest.raises(oslo_messaging.RemoteError):
        client.call(cluster.ctxt, 'no_such_method')

    result = cluster.api.select_destinations(cluster.ctxt, make_spec(),
                                             uuids(1))
    assert len(result) == 1
    log = scheduler.log()
    # One WARNING for each unreadable object (the malformed and the too
    # new one), none for the rest: they are the caller's answers.
    assert log.count('Rejected a call of select_destinations: '
                     'MalformedObject') == 1
    assert log.count('Rejected a call of select_destinations: '
                     'IncompatibleObjectVersion') == 1
    assert 'Traceback' not in log


def test_restarted_service_schedules_from_what_it_knew(cluster, conf,
                                                       tmp_path):
    db = 'sqlite:///%s' % (tmp_path / 'inventory.sqlite')
    opts = {'service_down_time': 120}
    first = cluster.start_scheduler(db, scheduler_opts=opts)
    sim = cluster.start_sim(hosts=3)
    hosts = wait_for_hosts(conf, db, 3)
    sim.stop()
    assert first.stop() == 0

    cluster.start_scheduler(db, name='sched2', scheduler_opts=opts)
    [[selection]] = cluster.api.select_destinations(cluster.ctxt,
                                                    make_spec(), uuids(1))
    assert selection.service_host in hosts


@pytest.mark.parametrize('opts, extra, expected', [
    ({'driver': 'no_such_driver'}, '', 'no_such_driver'),
    ({}, '\n[filter_scheduler]\nenabled_filters = RamFilter,NoSuchFilter\n',
     'NoSuchFilter'),
])
def test_bad_configuration_stops_startup_naming_it(cluster, tmp_path, opts,
                                                   extra, expected):
    db = 'sqlite:///%s' % (tmp_path / 'inventory.sqlite')
    daemon = cluster.start_scheduler(db, scheduler_opts=opts, extra=extra,
                                     wait=False)
    assert daemon.wait_exit(60) != 0
    assert expected in daemon.log()
