"""Attacks and faults against the real daemon over the real broker.

Hostile calls, raw malformed messages, dead callers, forged contexts,
a broker that stops answering: the service answers with typed errors
and one log line, keeps serving, and loses no one's reports.
"""

import json
import re
import shutil
import subprocess
import time
import urllib.request
import uuid
import zlib

import oslo_messaging
import pytest

from scheduler.db import api as db_api
from scheduler.db import usage
from scheduler import exception
from scheduler import objects
from scheduler import rpc
from scheduler import rpcapi
from tests.functional import daemons
from tests.functional import hostile
from tests.functional.test_scheduler_service import make_spec
from tests.functional.test_scheduler_service import wait_for_hosts


def _sqlite(tmp_path) -> str:
    return 'sqlite:///%s' % (tmp_path / 'inventory.sqlite')


def _metric(port: int, name: str) -> float:
    text = urllib.request.urlopen('http://127.0.0.1:%d/metrics' % port,
                                  timeout=10).read().decode()
    return sum(float(line.rsplit(' ', 1)[1]) for line in text.splitlines()
               if line.startswith(name))


def _lines(log: str, level: str, needle: str = '') -> list:
    """Log records of ``level`` (oslo.log's format) containing ``needle``."""
    pattern = re.compile(r'^\S+ \S+ \d+ %s ' % level)
    return [line for line in log.splitlines()
            if pattern.match(line) and needle in line]


def _warnings(log: str, needle: str) -> list:
    return _lines(log, 'WARNING', needle)


def test_only_the_api_dispatches_and_bad_calls_are_typed(cluster, conf,
                                                         tmp_path):
    db = _sqlite(tmp_path)
    port = hostile.free_port()
    daemon = cluster.start_scheduler(
        db, extra='[limits]\njson_query_max_cost = 50\n\n[prometheus]\n'
                  'enabled = true\nport = %d\n' % port)
    cluster.start_sim(hosts=2)
    wait_for_hosts(conf, db, 2)
    raw = hostile.raw_client(cluster.topic)
    ctxt = hostile.context()

    # Item 5: public attributes of the endpoint are not the API.
    for name in ('reset', 'run_periodic_tasks', 'driver', 'target',
                 '_flush_inventory', 'reports', '__init__'):
        with pytest.raises(oslo_messaging.RemoteError) as err:
            raw.call(ctxt, name)
        assert err.value.exc_type == 'NoSuchMethod', name

    # Item 6: unexpected arguments, wrong types, absurd sizes, nesting.
    spec = make_spec().obj_to_primitive()
    bad_calls = [
        ('get_version_info', {'surprise': 1}),
        ('select_destinations', {'spec_obj': 5}),
        ('select_destinations', {'spec_obj': spec, 'instance_uuids': 7}),
        ('select_destinations', {'spec_obj': {'versioned_object.name': 1}}),
        ('select_destinations', {'spec_obj': hostile.nested(200)}),
        ('select_destinations', {'spec_obj': spec,
                                 'instance_uuids': [2 ** 80]}),
        ('explain', {'spec_obj': [spec] * 3}),
        ('select_destinations', {'request_spec': {'instance_type': 'x'},
                                 'filter_properties': []}),
    ]
    for method, kwargs in bad_calls:
        with pytest.raises((exception.InvalidRequest,
                            exception.MalformedObject)):
            raw.call(ctxt, method, **kwargs)
    # Item 8: num_instances and the JsonFilter query cost are capped.
    with pytest.raises(exception.InvalidRequest) as err:
        cluster.api.select_destinations(cluster.ctxt, make_spec(num=101))
    assert 'max_instances_per_request' in str(err.value)
    query = json.dumps(['and'] + [['>=', '$free_ram_mb', n]
                                  for n in range(10)])
    with pytest.raises(exception.InvalidRequest) as err:
        cluster.api.select_destinations(
            cluster.ctxt, make_spec(scheduler_hints={'query': [query]}))
    assert 'json_query_max_cost' in str(err.value)
    # The same mistake 30 times: counted every time, logged once.
    for _ in range(30):
        with pytest.raises(exception.InvalidRequest):
            raw.call(ctxt, 'get_version_info', surprise=1)

    # The service keeps serving, quietly.
    [[selection]] = cluster.api.select_destinations(cluster.ctxt,
                                                    make_spec())
    assert selection.service_host
    log = daemon.log()
    assert 'Traceback' not in log
    assert not _lines(log, 'ERROR')
    assert len(_warnings(log, 'surprise')) == 1
    rejected = _warnings(log, 'Rejected a call')
    assert len(rejected) <= len(bad_calls) + 7 + 2
    # Published by the next periodic task (the manager's own refusals
    # count as requests with outcome invalid_request instead).
    daemons.wait_for(
        lambda: _metric(port, 'scheduler_rejected_requests_total') >= 7 + 31,
        20, what='the rejection counter')


def test_raw_hostile_messages_are_dropped_before_decoding(cluster, conf,
                                                          tmp_path):
    """Item 7: oversize, compressed and broken bodies, one line each."""
    db = _sqlite(tmp_path)
    daemon = cluster.start_scheduler(
        db, extra='[limits]\nmax_message_bytes = 65536\n')
    cluster.start_sim(hosts=1)
    wait_for_hosts(conf, db, 1)
    pub = hostile.RawPublisher()
    try:
        big = hostile.envelope('get_version_info',
                               {'x': 'a' * 200000}, reply_q='reply_none')
        bomb = zlib.compress(json.dumps(hostile.envelope(
            'get_version_info', {'x': 'b' * 5000000})).encode())
        bodies = [
            (big, {}),
            (bomb, {'compression': 'application/x-gzip'}),
            ('[' * 100000, {}),
            ('{"oslo.version": "2.0", "oslo.message": 5}', {}),
            ('not json at all', {}),
            (json.dumps({'oslo.version': '2.0',
                         'oslo.message': '[' * 50000}), {}),
        ]
        for body, headers in bodies:
            pub.publish(cluster.topic, body, headers=headers)
    finally:
        pub.close()
    info = cluster.api.get_version_info(cluster.admin_ctxt)
    assert info['rpc_version'] == '1.4'
    log = daemon.log()
    daemons.wait_for(lambda: len(_warnings(daemon.log(),
                                           'Rejected a message')) >= 3,
                     30, what='the dropped messages to be logged')
    log = daemon.log()
    assert 'Traceback' not in log
    assert 'max_message_bytes' in log
    assert len(_warnings(log, 'Rejected a message')) <= len(bodies)


def test_dead_callers_stall_no_one(cluster, conf, tmp_path):
    """Item 2: 80 calls whose reply queue is gone; reports keep flowing."""
    db = _sqlite(tmp_path)
    daemon = cluster.start_scheduler(db)
    cluster.start_sim(hosts=2)
    wait_for_hosts(conf, db, 2)
    pub = hostile.RawPublisher()
    try:
        dead = 'reply_%s' % uuid.uuid4().hex
        for _ in range(80):
            pub.publish(cluster.topic, hostile.envelope(
                'get_version_info', reply_q=dead,
                ctxt=hostile.context(is_admin=True)))
    finally:
        pub.close()
    # Longer than service_down_time (6 s): hosts must not be judged
    # down meanwhile, and a good caller is answered.
    started = time.monotonic()
    while time.monotonic() - started < 10:
        [[selection]] = cluster.api.select_destinations(
            cluster.ctxt, make_spec())
        assert selection.service_host
        time.sleep(1)
    assert 'no longer scheduling to it' not in daemon.log()


def _rabbitmqctl(*args) -> None:
    subprocess.run(('rabbitmqctl', '-q') + args, check=True,
                   capture_output=True, timeout=60)


@pytest.fixture
def broker_users(rabbit_url):
    """A throw-away vhost with a scheduler, a compute and a caller user."""
    if shutil.which('rabbitmqctl') is None:
        pytest.skip('rabbitmqctl not available to create users')
    tag = uuid.uuid4().hex[:8]
    vhost = 'sched-trust-%s' % tag
    users = {role: ('sched-%s-%s' % (role, tag), uuid.uuid4().hex)
             for role in ('service', 'compute', 'caller')}
    _rabbitmqctl('add_vhost', vhost)
    try:
        for name, password in users.values():
            _rabbitmqctl('add_user', name, password)
        yield vhost, users
    finally:
        # The daemons log in as these users: they stop first.
        daemons.stop_daemons_first()
        for name, _password in users.values():
            subprocess.run(['rabbitmqctl', '-q', 'delete_user', name],
                           capture_output=True, timeout=60)
        subprocess.run(['rabbitmqctl', '-q', 'delete_vhost', vhost],
                       capture_output=True, timeout=60)


def test_broker_permissions_keep_each_party_to_its_casts(
        cluster, conf, tmp_path, broker_users):
    """Item 9: the permissions of doc/admin-guide.md, on a real broker."""
    vhost, users = broker_users
    topic = cluster.topic
    # The lines of the admin guide, with this test's topic.
    _rabbitmqctl('set_permissions', '-p', vhost, users['service'][0],
                 '.*', '.*', '.*')
    _rabbitmqctl('set_permissions', '-p', vhost, users['compute'][0],
                 '^%s_reports_fanout$' % topic,
                 '^%s_reports_fanout$' % topic, '^$')
    _rabbitmqctl('set_permissions', '-p', vhost, users['caller'][0],
                 '^(scheduler|reply_.*)$', '^(scheduler|reply_.*)$',
                 '^reply_.*')
    _rabbitmqctl('set_topic_permissions', '-p', vhost, users['caller'][0],
                 'scheduler', '^%s$' % topic, '^$')

    def url(role):
        name, password = users[role]
        return 'rabbit://%s:%s@127.0.0.1:5672/%s' % (name, password, vhost)

    cluster.transport_url = url('service')
    conf.config(transport_url=url('caller'))
    daemon = cluster.start_scheduler(
        _sqlite(tmp_path), scheduler_opts={'accept_legacy_casts': 'false'})
    compute_api = rpcapi.SchedulerAPI(
        transport=rpc.get_transport(url=url('compute')), timeout=5)
    report = objects.HostState(host='good', nodename='good', memory_mb=4096,
                               vcpus=4, local_gb=100)
    compute_api.update_service_capabilities(cluster.admin_ctxt, report)
    [[selection]] = daemons.wait_for(
        lambda: cluster.api.select_destinations(cluster.ctxt, make_spec()),
        30, what='the compute report to be taken')
    assert selection.service_host == 'good'

    # The caller cannot publish reports or operator casts ...
    fake = objects.HostState(host='fake', nodename='fake',
                             memory_mb=10 ** 7, vcpus=1000, local_gb=10 ** 6)
    for attempt in (
            lambda: cluster.api.update_service_capabilities(
                cluster.ctxt, fake),
            lambda: cluster.api.update_aggregates(cluster.admin_ctxt, [
                objects.Aggregate(name='evil', hosts=['good'],
                                  metadata={'ram_allocation_ratio': '100'})])):
        try:
            attempt()
        except Exception:  # refused by the broker: what we want
            pass
    # ... nor fanouts on the request topic, as an older client would.
    conf.config(scheduler='1.3', group='upgrade_levels')
    legacy = rpcapi.SchedulerAPI(timeout=10)
    for attempt in (
            lambda: legacy.update_service_capabilities(cluster.admin_ctxt,
                                                       fake),
            lambda: legacy.sync_instance_info(cluster.admin_ctxt, 'good',
                                              [])):
        try:
            attempt()
        except Exception:  # refused by the broker: what we want
            pass
    conf.config(scheduler=None, group='upgrade_levels')
    time.sleep(2)
    assert 'New host fake' not in daemon.log()
    # The compute cannot call the scheduler.
    with pytest.raises(Exception):
        compute_api.select_destinations(cluster.ctxt, make_spec())
    assert 'fake' not in daemon.log()


def _placement(conf, database_url: str, instance_uuid: str):
    conf.config(connection=database_url, group='database')
    db_api.reset_engine()
    try:
        return usage.placements_get([instance_uuid]).get(instance_uuid)
    finally:
        db_api.reset_engine()


def _aggregate_names(conf, database_url: str) -> set:
    conf.config(connection=database_url, group='database')
    db_api.reset_engine()
    try:
        return {a['name'] for a in db_api.aggregate_get_all()}
    finally:
        db_api.reset_engine()


def test_request_topic_refuses_state_changing_casts(cluster, conf,
                                                    tmp_path):
    """Item 9: with accept_legacy_casts = false, reports, instance info
    and operator casts sent the pre-1.4 way (on the request topic) are
    refused, even with an admin context; 1.4 clients are served."""
    db = _sqlite(tmp_path)
    daemon = cluster.start_scheduler(
        db, scheduler_opts={'accept_legacy_casts': 'false'})
    cluster.start_sim(hosts=1)
    [host] = wait_for_hosts(conf, db, 1)
    conf.config(scheduler='1.3', group='upgrade_levels')
    legacy = rpcapi.SchedulerAPI(timeout=10)
    legacy.update_service_capabilities(cluster.admin_ctxt, objects.HostState(
        host='legacy', nodename='legacy', memory_mb=4096, vcpus=4,
        local_gb=100))
    legacy.update_aggregates(cluster.admin_ctxt, [objects.Aggregate(
        name='legacy-agg', hosts=[host], metadata={})])
    legacy.sync_instance_info(cluster.admin_ctxt, host, [])
    conf.config(scheduler=None, group='upgrade_levels')
    daemons.wait_for(
        lambda: len(_warnings(daemon.log(), 'accept_legacy_casts')) >= 3,
        30, what='the three legacy casts to be refused')
    # The same report the 1.4 way is taken.
    cluster.api.update_service_capabilities(
        cluster.admin_ctxt, objects.HostState(
            host='current', nodename='current', memory_mb=4096, vcpus=4,
            local_gb=100))
    hosts = wait_for_hosts(conf, db, 2)
    assert 'legacy' not in hosts and 'current' in hosts
    assert 'legacy-agg' not in _aggregate_names(conf, db)
    assert 'Traceback' not in daemon.log()


def test_non_admins_cannot_erase_release_or_reconfigure(cluster, conf,
                                                        tmp_path):
    """Item 9: erasing a host's placements (sync_instance_info with []),
    releasing a claim (delete_instance_info) and updating aggregates
    need an admin context; each refusal is one warning line."""
    db = _sqlite(tmp_path)
    daemon = cluster.start_scheduler(db)
    cluster.start_sim(hosts=2)
    wait_for_hosts(conf, db, 2)
    instance = str(uuid.uuid4())
    [[selection]] = cluster.api.select_destinations(
        cluster.ctxt, make_spec(), instance_uuids=[instance])
    host = selection.service_host
    assert _placement(conf, db, instance)['host'] == host

    cluster.api.sync_instance_info(cluster.ctxt, host, [])
    cluster.api.delete_instance_info(cluster.ctxt, host, instance)
    cluster.api.update_aggregates(cluster.ctxt, [objects.Aggregate(
        name='evil', hosts=[host],
        metadata={'ram_allocation_ratio': '100'})])
    daemons.wait_for(
        lambda: len(_warnings(daemon.log(), 'needs an admin context')) >= 3,
        30, what='the three casts to be refused')
    assert _placement(conf, db, instance)['host'] == host
    assert 'evil' not in _aggregate_names(conf, db)

    # An admin may release it.
    cluster.api.delete_instance_info(cluster.admin_ctxt, host, instance)
    daemons.wait_for(lambda: _placement(conf, db, instance) is None, 30,
                     what='the admin release')
    assert 'Traceback' not in daemon.log()


def test_delete_instance_info_releases_only_on_the_named_host(
        cluster, conf, tmp_path):
    """Item 9: a compute may release only its own instances."""
    db = _sqlite(tmp_path)
    daemon = cluster.start_scheduler(db)
    cluster.start_sim(hosts=2)
    hosts = wait_for_hosts(conf, db, 2)
    instance = str(uuid.uuid4())
    [[selection]] = cluster.api.select_destinations(
        cluster.ctxt, make_spec(), instance_uuids=[instance])
    other = [h for h in hosts if h != selection.service_host][0]
    cluster.api.delete_instance_info(cluster.admin_ctxt, other, instance)
    daemons.wait_for(
        lambda: 'Instance %s deleted on %s' % (instance, other)
        in daemon.log(), 30, what='the cast to be handled')
    time.sleep(1)
    assert _placement(conf, db, instance) is not None
