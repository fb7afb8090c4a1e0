"""Attacks and faults against the real daemon over the real broker.

Hostile calls, raw malformed messages, dead callers, forged contexts,
a broker that stops answering: the service answers with typed errors
and one log line, keeps serving, and loses no one's reports.
"""

import contextlib
import json
import re
import time
import urllib.request
import uuid
import zlib

import kombu
import oslo_messaging
import pytest

from scheduler.db import api as db_api
from scheduler.db import usage
from scheduler import exception
from scheduler import objects
from scheduler import rpc
from scheduler import rpcapi
from tests.functional import broker_users
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
    # count there too, and as requests with outcome invalid_request).
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
    pub = hostile.RawPublisher(exchange=daemons.CONTROL_EXCHANGE)
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
    assert info['rpc_version'] == rpcapi.SchedulerAPI.VERSION == '1.6'
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
    pub = hostile.RawPublisher(exchange=daemons.CONTROL_EXCHANGE)
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


def test_broker_permissions_keep_each_party_to_its_casts(
        cluster, conf, tmp_path, guide_users):
    """Item 9: the permissions of doc/admin-guide.md, on a real broker."""
    users = guide_users
    cluster.transport_url = users.url('service')
    conf.config(transport_url=users.url('caller'))
    daemon = cluster.start_scheduler(
        _sqlite(tmp_path), scheduler_opts={'accept_legacy_casts': 'false'})
    compute_api = rpcapi.SchedulerAPI(
        transport=rpc.get_transport(url=users.url('compute')), timeout=5)
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
    # A report the compute may send, after them: once the service took
    # it, it took (or never got) what was published before.
    after = objects.HostState(host='after', nodename='after',
                              memory_mb=4096, vcpus=4, local_gb=100)
    compute_api.update_service_capabilities(cluster.admin_ctxt, after)
    daemons.wait_for(lambda: 'New host after' in daemon.log(), 60,
                     what='the report sent after them to be taken')
    assert 'New host fake' not in daemon.log()
    # The compute cannot call the scheduler.
    with pytest.raises(Exception):
        compute_api.select_destinations(cluster.ctxt, make_spec())
    assert 'fake' not in daemon.log()


def test_a_compute_that_may_not_publish_on_the_intake_reports_by_fanout(
        cluster, conf, tmp_path, guide_users, caplog):
    """The compute permission of the guide before API 1.5 (the fanout
    exchange only): its reports are refused on the intake, and go by the
    fanout instead, with one WARNING that says what to change."""
    users = guide_users
    broker_users._rabbitmqctl([
        'set_permissions', '-p', users.vhost, users.user('compute'),
        '^%s_reports_fanout$' % cluster.topic,
        '^%s_reports_fanout$' % cluster.topic, '^$'])
    cluster.transport_url = users.url('service')
    conf.config(transport_url=users.url('caller'))
    cluster.start_scheduler(_sqlite(tmp_path))
    compute_api = rpcapi.SchedulerAPI(
        transport=rpc.get_transport(url=users.url('compute')), timeout=5)
    report = objects.HostState(host='old-perm', nodename='old-perm',
                               memory_mb=4096, vcpus=4, local_gb=100)
    with caplog.at_level('WARNING', logger='scheduler.rpcapi'):
        compute_api.update_service_capabilities(cluster.admin_ctxt, report)
        [[selection]] = daemons.wait_for(
            lambda: cluster.api.select_destinations(cluster.ctxt,
                                                    make_spec()),
            30, what='the compute report to be taken')
        compute_api.update_service_capabilities(cluster.admin_ctxt, report)
    assert selection.service_host == 'old-perm'
    refused = [r.getMessage() for r in caplog.records
               if 'refused a report' in r.getMessage()]
    assert len(refused) == 1, refused
    assert '%s_reports' % cluster.topic in refused[0]


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


# -- issue 23: every sender can do only what its credentials allow ---------
#
# The guide's users (tests/functional/broker_users.py) on a vhost of
# their own: the service's, a caller's (a conductor) and a compute's.
# Each row of the guide's credential table is exercised below.


def _raw_cast(url: str, exchange: str, routing_key: str, method: str,
              args: dict, ctxt: dict, **properties) -> None:
    """Publish one cast envelope with kombu, ``properties`` as given
    (``user_id=None`` sends none)."""
    with kombu.Connection(url, connect_timeout=5) as conn:
        conn.Producer().publish(
            json.dumps(hostile.envelope(method, args, ctxt=ctxt)),
            exchange=exchange, routing_key=routing_key,
            content_type='application/json', content_encoding='utf-8',
            **properties)


def _hosts(conf, db: str) -> set:
    conf.config(connection=db, group='database')
    db_api.reset_engine()
    try:
        return {r['host'] for r in db_api.host_reports_get_all()}
    finally:
        db_api.reset_engine()


def _try(attempt) -> None:
    """Send something the broker should refuse; its error is expected."""
    try:
        attempt()
    except Exception:
        pass


def _report(host: str, **kwargs) -> objects.HostState:
    values = dict(host=host, nodename=host, memory_mb=4096, vcpus=4,
                  local_gb=100)
    values.update(kwargs)
    return objects.HostState(**values)


@contextlib.contextmanager
def _compute_queue(users, cluster, host: str):
    """The queue a compute named ``host`` would consume its casts from
    (``<compute topic>.<host>`` on the control exchange), declared with
    the service's credential for the duration: the service's
    ``run_instance`` casts are delivered to it instead of bounced."""
    name = '%s.%s' % (cluster.compute_topic, host)
    with kombu.Connection(users.url('service', 'amqp'),
                          connect_timeout=5) as conn:
        channel = conn.channel()
        channel.queue_declare(queue=name, auto_delete=False)
        channel.queue_bind(queue=name, exchange=daemons.CONTROL_EXCHANGE,
                           routing_key=name)
        try:
            yield channel, name
        finally:
            channel.queue_delete(queue=name)


def _next_message(queue, timeout: float = 60) -> dict:
    """The next cast on ``queue``: its oslo message, and the ``user_id``
    the broker let its publisher set."""
    channel, name = queue
    got = daemons.wait_for(lambda: channel.basic_get(queue=name,
                                                     no_ack=True),
                           timeout, what='a message on %s' % name)
    envelope = json.loads(got.body)
    message = json.loads(envelope['oslo.message'])
    user = got.properties.get('user_id')
    message['user_id'] = user.decode() if isinstance(user, bytes) else user
    return message


def _legacy_client(version: str):
    """A pre-1.4 client's plain cast on the request topic (the caller's
    credential): what the guide's permissions let a conductor send."""
    return rpc.get_client(oslo_messaging.Target(
        topic=rpc.cfg.CONF.scheduler.topic, version=version))


def test_default_install_keeps_callers_to_requests(cluster, conf, tmp_path,
                                                   guide_users):
    """Items 1, 3 and 4 with the default configuration (no [trust]
    options, accept_legacy_casts = true) and the guide's permissions:
    the caller's casts on the request topic change nothing, its admin
    context earns no admin answer and no forced host; bad host names are
    refused; the operator's credential keeps every right."""
    users = guide_users
    db = _sqlite(tmp_path)
    cluster.transport_url = users.url('service')
    conf.config(transport_url=users.url('caller'))
    daemon = cluster.start_scheduler(db)
    compute_api = rpcapi.SchedulerAPI(
        transport=rpc.get_transport(url=users.url('compute')), timeout=5)
    operator = rpcapi.SchedulerAPI(
        transport=rpc.get_transport(url=users.url('service')), timeout=30)
    good = users.user('compute')
    compute_api.update_service_capabilities(cluster.admin_ctxt,
                                            _report(good))
    assert wait_for_hosts(conf, db, 1) == [good]
    placed = str(uuid.uuid4())
    [[selection]] = cluster.api.select_destinations(
        cluster.ctxt, make_spec(), instance_uuids=[placed])
    assert selection.service_host == good
    # Built: an active placement (an empty sync would erase it).
    operator.update_instance_info(cluster.admin_ctxt, good, [placed])
    daemons.wait_for(
        lambda: _placement(conf, db, placed)['status'] == 'active', 30,
        what='the operator to confirm the instance')
    aggregates = _aggregate_names(conf, db)

    # The caller's build request (a cast): the service places it and
    # casts run_instance to the compute with its own credential.
    built = str(uuid.uuid4())
    with _compute_queue(users, cluster, good) as queue:
        cluster.api.schedule_run_instance(
            cluster.ctxt, make_spec(instance_uuid=built), [built])
        message = _next_message(queue)
    assert message['method'] == 'run_instance'
    assert message['user_id'] == users.user('service')
    assert message['args']['instance_uuid'] == built
    assert _placement(conf, db, built)['host'] == good

    # Item 1: plain casts on the request topic, as a pre-1.4 client.
    forged_admin = cluster.admin_ctxt
    _legacy_client('1.1').cast(forged_admin, 'update_aggregates', aggregates=[
        objects.Aggregate(name='evil', hosts=[good],
                          metadata={'ram_allocation_ratio': '100'})])
    _legacy_client('1.0').cast(cluster.ctxt, 'update_service_capabilities',
                               host_state=_report('ghost-direct',
                                                  memory_mb=10 ** 6))
    _legacy_client('1.1').cast(forged_admin, 'sync_instance_info',
                               host_name=good, instance_uuids=[])
    # ... and the other compute casts: release or confirm a placement.
    _legacy_client('1.1').cast(forged_admin, 'delete_instance_info',
                               host_name=good, instance_uuid=placed)
    _legacy_client('1.1').cast(forged_admin, 'update_instance_info',
                               host_name=good, instance_uuids=[built])
    caller = 'refused for broker user %s' % users.user('caller')
    daemons.wait_for(
        lambda: len(_warnings(daemon.log(), caller)) >= 4
        and _warnings(daemon.log(), 'from an operator credential'),
        30, what='the caller\'s five casts to be refused')

    # Item 4: a compute's reports of impossible host names.
    for name in ('', 'x' * 300):
        compute_api.update_service_capabilities(cluster.admin_ctxt,
                                                _report(name))
    daemons.wait_for(
        lambda: len(_warnings(daemon.log(), 'is not a valid host name')) >= 2,
        30, what='the bad host names to be refused')
    assert "host name '' is not a valid host name" in daemon.log()

    # Item 3: the caller's admin context earns nothing more.
    huge = make_spec(ram=10 ** 7)
    result = cluster.api.explain(forged_admin, make_spec())
    assert result['rejected'] == {} and result['ranking'] == []
    with pytest.raises(exception.NoValidHost) as err:
        cluster.api.select_destinations(forged_admin, huge)
    assert 'Filter results' not in str(err.value)
    with pytest.raises(exception.NotAuthorized) as err:
        cluster.api.select_destinations(forged_admin,
                                        make_spec(force_hosts=[good]))
    assert 'force_hosts' in str(err.value)
    # ... but for nova's rebuild check of its instance where it is (the
    # rebuild hint otherwise skips RamFilter and DiskFilter).
    rebuild = {'_nova_check_type': ['rebuild']}
    [[rebuilt]] = cluster.api.select_destinations(
        cluster.ctxt, make_spec(force_hosts=[good], force_nodes=[good],
                                scheduler_hints=rebuild),
        instance_uuids=[built])
    assert rebuilt.service_host == good
    with pytest.raises(exception.NotAuthorized) as err:
        cluster.api.select_destinations(
            forged_admin, make_spec(ram=10 ** 6, scheduler_hints=rebuild))
    assert 'rebuild' in str(err.value)

    # The operator's credential (the service's own) gets all of it.
    result = operator.explain(cluster.admin_ctxt, make_spec())
    assert [row['host'] for row in result['ranking']] == [good]
    with pytest.raises(exception.NoValidHost) as err:
        operator.select_destinations(cluster.admin_ctxt, huge)
    assert 'Filter results' in str(err.value)
    [[forced]] = operator.select_destinations(
        cluster.admin_ctxt, make_spec(force_hosts=[good]))
    assert forced.service_host == good
    operator.update_aggregates(cluster.admin_ctxt, [objects.Aggregate(
        name='by-operator', hosts=[good], metadata={})])
    daemons.wait_for(
        lambda: 'by-operator' in _aggregate_names(conf, db), 30,
        what='the operator\'s aggregate')
    # The caller may not delete it (a legacy cast, forged admin context).
    _legacy_client('1.1').cast(forged_admin, 'delete_aggregate',
                               aggregate=objects.Aggregate(
                                   name='by-operator', hosts=[good],
                                   metadata={}))
    daemons.wait_for(
        lambda: _warnings(daemon.log(), 'Rejected a cast of '
                          'delete_aggregate'), 30,
        what='the caller\'s aggregate deletion to be refused')

    # The caller's casts the 1.4 way: the broker refuses them (last: a
    # refused publish leaves the caller's connection closed).
    _try(lambda: cluster.api.update_aggregates(forged_admin, [
        objects.Aggregate(name='evil2', hosts=[good], metadata={})]))
    _try(lambda: cluster.api.update_service_capabilities(
        cluster.ctxt, _report('ghost-fanout')))

    # Nothing the caller or the bad names tried changed the inventory.
    time.sleep(2)  # a periodic flush (1 s) after the last refusal
    assert _hosts(conf, db) == {good}
    assert _aggregate_names(conf, db) == aggregates | {'by-operator'}
    assert _placement(conf, db, placed)['host'] == good
    assert _placement(conf, db, placed)['status'] == 'active'
    assert _placement(conf, db, built)['status'] == 'claimed'
    log = daemon.log()
    assert 'New host ghost' not in log
    assert 'reports no instances' not in log
    assert 'Instance %s deleted' % placed not in log
    assert 'Aggregate by-operator deleted' not in log
    assert 'Traceback' not in log


def test_compute_credentials_speak_only_for_their_hosts(
        cluster, conf, tmp_path, guide_users):
    """Item 2 with the guide's ``[trust] compute_users = *:{user}``: the
    compute's credential reports, syncs and deletes for the host named
    like it and nothing else; a forged user_id is refused by the broker,
    a missing one by the service."""
    users = guide_users
    db = _sqlite(tmp_path)
    cluster.transport_url = users.url('service')
    conf.config(transport_url=users.url('caller'))
    daemon = cluster.start_scheduler(
        db, extra='[trust]\n%s\n' % broker_users.GUIDE_TRUST_CONFIG)
    assert 'Compute reports are bound to broker users' in daemon.log()
    operator = rpcapi.SchedulerAPI(
        transport=rpc.get_transport(url=users.url('service')), timeout=30)
    compute_api = rpcapi.SchedulerAPI(
        transport=rpc.get_transport(url=users.url('compute')), timeout=5)
    own = users.user('compute')

    # Another host (reported by the operator) holds an instance.
    operator.update_service_capabilities(cluster.admin_ctxt,
                                         _report('other'))
    assert wait_for_hosts(conf, db, 1) == ['other']
    placed, pending = str(uuid.uuid4()), str(uuid.uuid4())
    selections = cluster.api.select_destinations(
        cluster.ctxt, make_spec(num=2), instance_uuids=[placed, pending])
    assert [s.service_host for [s] in selections] == ['other', 'other']
    # One is built and reported (an empty sync would erase it), one
    # not yet.
    operator.update_instance_info(cluster.admin_ctxt, 'other', [placed])
    operator.update_service_capabilities(cluster.admin_ctxt, _report(
        'other', memory_mb_used=_placement(conf, db, placed)['memory_mb'],
        num_instances=1, instance_uuids=[placed]))
    daemons.wait_for(
        lambda: not _placement(conf, db, placed)['pending'], 30,
        what='the operator to confirm and report the instance')

    # The compute reports its own host ...
    compute_api.update_service_capabilities(cluster.admin_ctxt, _report(own))
    assert wait_for_hosts(conf, db, 2) == sorted(['other', own])
    # ... confirms and releases its own instances (one the operator
    # forced onto it) ...
    mine = str(uuid.uuid4())
    [[forced]] = operator.select_destinations(
        cluster.admin_ctxt, make_spec(force_hosts=[own]),
        instance_uuids=[mine])
    assert forced.service_host == own
    compute_api.update_instance_info(cluster.admin_ctxt, own, [mine])
    daemons.wait_for(
        lambda: _placement(conf, db, mine)['status'] == 'active', 30,
        what='the compute to confirm its own instance')
    compute_api.delete_instance_info(cluster.admin_ctxt, own, mine)
    daemons.wait_for(lambda: _placement(conf, db, mine) is None, 30,
                     what='the compute to release its own instance')
    # ... and nothing about any other, admin context or not.
    compute_api.update_service_capabilities(cluster.admin_ctxt,
                                            _report('ghost-compute'))
    compute_api.sync_instance_info(cluster.admin_ctxt, 'other', [])
    compute_api.delete_instance_info(cluster.admin_ctxt, 'other', placed)
    compute_api.update_instance_info(cluster.admin_ctxt, 'other', [pending])
    refused = 'refused for broker user %s' % own
    daemons.wait_for(
        lambda: len(_warnings(daemon.log(), refused)) >= 4, 30,
        what='the compute\'s four casts about another host to be refused')
    # The caller's user is no compute on the request topic, even for a
    # host named like it ('*:{user}' counts on the reports topic only).
    caller = users.user('caller')
    _legacy_client('1.0').cast(cluster.admin_ctxt,
                               'update_service_capabilities',
                               host_state=_report(caller))
    daemons.wait_for(
        lambda: _warnings(daemon.log(), 'refused for broker user %s'
                          % caller), 30,
        what='the caller\'s report of its own name to be refused')

    # A user_id that is not the connection's: the broker refuses it.
    exchange = '%s_reports_fanout' % cluster.topic
    report_args = {'host_state': _report('ghost-forged').obj_to_primitive()}
    _try(lambda: _raw_cast(users.url('compute', 'amqp'), exchange, '',
                           'update_service_capabilities', report_args,
                           hostile.context(is_admin=True),
                           user_id=users.user('service')))
    # No user_id at all: the service does not know who sent it.
    _raw_cast(users.url('compute', 'amqp'), exchange, '',
              'update_service_capabilities',
              {'host_state': _report('ghost-anon').obj_to_primitive()},
              hostile.context(is_admin=True), user_id=None)
    daemons.wait_for(
        lambda: _warnings(daemon.log(), 'broker user unknown (no user_id)'),
        30, what='the report without user_id to be refused')

    # Its own host's sync is taken.
    compute_api.sync_instance_info(cluster.admin_ctxt, own, [])
    daemons.wait_for(
        lambda: 'Host %s reports no instances' % own in daemon.log(), 30,
        what='the compute\'s own sync')
    time.sleep(2)  # a periodic flush (1 s) after the last refusal
    assert _hosts(conf, db) == {'other', own}
    assert _placement(conf, db, placed)['host'] == 'other'
    assert _placement(conf, db, placed)['status'] == 'active'
    assert _placement(conf, db, pending)['status'] == 'claimed'
    log = daemon.log()
    assert 'New host ghost' not in log
    assert 'Instance %s deleted' % placed not in log
    # The operator may sync and release the instances of any host: its
    # list confirms one and drops the other.
    operator.sync_instance_info(cluster.admin_ctxt, 'other', [pending])
    daemons.wait_for(
        lambda: _placement(conf, db, placed) is None
        and _placement(conf, db, pending)['status'] == 'active', 30,
        what='the operator\'s sync')
    operator.delete_instance_info(cluster.admin_ctxt, 'other', pending)
    daemons.wait_for(lambda: _placement(conf, db, pending) is None, 30,
                     what='the operator\'s release')
    # The compute cannot cast operator casts (the broker) ...
    aggregates = _aggregate_names(conf, db)
    _try(lambda: compute_api.update_aggregates(cluster.admin_ctxt, [
        objects.Aggregate(name='by-compute', hosts=[own],
                          metadata={'ram_allocation_ratio': '100'})]))
    # ... nor call the scheduler (the broker; last: a refused publish
    # leaves the compute's connection closed).
    with pytest.raises(Exception):
        compute_api.select_destinations(cluster.ctxt, make_spec())
    time.sleep(2)  # a periodic flush (1 s) after the last refusal
    assert _aggregate_names(conf, db) == aggregates
    assert 'Traceback' not in daemon.log()
