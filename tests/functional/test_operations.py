"""Running the daemon as operators do: reload, workers, notifications,
explain, logs and the command line, against real RabbitMQ."""

import json
import signal
import subprocess
import threading
import uuid

import oslo_messaging
import pytest

from scheduler import exception
from tests.functional import daemons
from tests.functional.test_scheduler_service import make_spec
from tests.functional.test_scheduler_service import uuids
from tests.functional.test_scheduler_service import wait_for_hosts


def sqlite_url(tmp_path) -> str:
    return 'sqlite:///%s' % (tmp_path / 'inventory.sqlite')


def test_sighup_applies_new_filters_without_dropping_requests(
        cluster, conf, tmp_path):
    db = sqlite_url(tmp_path)
    extra = '\n[filter_scheduler]\nenabled_filters = ComputeFilter,RamFilter\n'
    scheduler = cluster.start_scheduler(db, extra=extra)
    cluster.start_sim(hosts=3)
    wait_for_hosts(conf, db, 3)
    nowhere = make_spec(availability_zone='nowhere')
    # Without AvailabilityZoneFilter the zone is not checked.
    assert cluster.api.select_destinations(cluster.ctxt, nowhere, uuids(1))

    failures = []
    stop = threading.Event()

    def keep_asking():
        while not stop.is_set():
            try:
                cluster.api.select_destinations(cluster.ctxt, make_spec(),
                                                uuids(1))
            except Exception as e:  # any failure during reload is a bug
                failures.append(e)
    callers = [threading.Thread(target=keep_asking) for _ in range(3)]
    for t in callers:
        t.start()
    try:
        config_path = str(cluster.tmp / 'sched.conf')
        with open(config_path) as f:
            text = f.read()
        with open(config_path, 'w') as f:
            f.write(text.replace(
                'enabled_filters = ComputeFilter,RamFilter',
                'enabled_filters = ComputeFilter,AvailabilityZoneFilter,'
                'RamFilter'))
        scheduler.proc.send_signal(signal.SIGHUP)
        daemons.wait_for(
            lambda: "'AvailabilityZoneFilter', 'RamFilter']" in
            scheduler.log(), 30, what='the reloaded filter list in the log')
    finally:
        stop.set()
        for t in callers:
            t.join(60)
    assert failures == []
    assert scheduler.alive(), 'SIGHUP reloads, it does not stop'
    with pytest.raises(exception.NoValidHost):
        cluster.api.select_destinations(cluster.ctxt, nowhere, uuids(1))


def test_two_workers_share_the_topic_and_each_sees_every_report(
        cluster, conf, tmp_path):
    db = sqlite_url(tmp_path)
    scheduler = cluster.start_scheduler(db, scheduler_opts={'workers': 2})
    cluster.start_sim(hosts=2)
    hosts = wait_for_hosts(conf, db, 2)
    daemons.wait_for(
        lambda: scheduler.log().count('New host') >= 4, 30,
        what='both workers to receive both fanout reports')
    for _ in range(4):
        [[selection]] = cluster.api.select_destinations(
            cluster.ctxt, make_spec(), uuids(1))
        assert selection.service_host in hosts
    assert scheduler.stop() == 0


def test_notifications_are_read_from_rabbitmq(cluster, conf, tmp_path):
    db = sqlite_url(tmp_path)
    topic = daemons.unique_topic('notifications')
    # The listener's queues, one per priority it reads, are durable.
    cluster.queues.update('%s.%s' % (topic, priority)
                          for priority in ('info', 'error'))
    received = []

    class Endpoint:
        def info(self, ctxt, publisher_id, event_type, payload, metadata):
            received.append(('INFO', event_type, publisher_id, payload))

        def error(self, ctxt, publisher_id, event_type, payload, metadata):
            received.append(('ERROR', event_type, publisher_id, payload))

    transport = oslo_messaging.get_notification_transport(
        conf.conf, url=cluster.transport_url)
    listener = oslo_messaging.get_notification_listener(
        transport, [oslo_messaging.Target(topic=topic)], [Endpoint()],
        executor='threading')
    listener.start()
    try:
        extra = ('\n[oslo_messaging_notifications]\ndriver = messagingv2\n'
                 'topics = %s\n' % topic)
        cluster.start_scheduler(db, extra=extra)
        cluster.start_sim(hosts=2)
        wait_for_hosts(conf, db, 2)
        instance = str(uuid.uuid4())
        cluster.api.select_destinations(cluster.ctxt, make_spec(),
                                        [instance])
        with pytest.raises(exception.NoValidHost):
            cluster.api.select_destinations(cluster.ctxt,
                                            make_spec(ram=10 ** 8), uuids(1))
        daemons.wait_for(lambda: len(received) >= 4, 30,
                         what='four notifications')
    finally:
        listener.stop()
        listener.wait()
        transport.cleanup()
    events = [(priority, event) for priority, event, _, _ in received]
    assert events == [
        ('INFO', 'scheduler.select_destinations.start'),
        ('INFO', 'scheduler.select_destinations.end'),
        ('INFO', 'scheduler.select_destinations.start'),
        ('ERROR', 'scheduler.select_destinations.error')]
    end = received[1][3]
    assert end['versioned_object.name'] == 'SelectDestinationsPayload'
    data = end['versioned_object.data']
    assert data['request_spec']['versioned_object.data'][
        'instance_uuid'] == instance
    assert len(data['destinations']) == 1
    error = received[3][3]['versioned_object.data']
    assert error['exception'] == 'NoValidHost'
    assert received[0][2] == 'scheduler:sched'


def test_explain_over_rabbitmq(cluster, conf, tmp_path):
    db = sqlite_url(tmp_path)
    cluster.start_scheduler(db)
    cluster.start_sim(hosts=3)
    hosts = wait_for_hosts(conf, db, 3)

    too_big = cluster.api.explain(cluster.admin_ctxt, make_spec(ram=10 ** 7))
    ram = [f for f in too_big['filters'] if f['name'] == 'RamFilter'][0]
    assert (ram['hosts_in'], ram['hosts_out']) == (3, 0)
    assert sorted(key.split('/')[0] for key in too_big['rejected']) == hosts
    for reason in too_big['rejected'].values():
        assert reason['filter'] == 'RamFilter'
        # Larger than the host itself: nova's no-overcommit guard.
        assert 'physical RAM' in reason['reason']

    fits = cluster.api.explain(cluster.admin_ctxt, make_spec())
    assert fits['passed'] == 3
    assert {r['host'] for r in fits['ranking']} == set(hosts)
    assert {'RAMWeigher', 'CPUWeigher', 'DiskWeigher'} <= set(
        fits['ranking'][0]['contributions'])

    # Explaining claims nothing: the same big request still fails the
    # same way, and a normal request still fits.
    again = cluster.api.explain(cluster.admin_ctxt, make_spec(ram=10 ** 7))
    assert again['filters'] == too_big['filters']
    user_view = cluster.api.explain(cluster.ctxt, make_spec())
    assert user_view['rejected'] == {} and user_view['ranking'] == []


def test_secrets_never_reach_the_log(cluster, conf, postgresql_url):
    secret = 'Sup3r-S3cret-%s' % uuid.uuid4().hex[:6]
    # PostgreSQL here trusts local connections, so any password works.
    with_password = postgresql_url.replace('postgres@',
                                           'postgres:%s@' % secret)
    scheduler = cluster.start_scheduler(with_password)
    cluster.start_sim(hosts=2)
    wait_for_hosts(conf, postgresql_url, 2)
    cluster.api.select_destinations(cluster.ctxt, make_spec(), uuids(1))
    with pytest.raises(exception.NoValidHost):
        cluster.api.select_destinations(cluster.admin_ctxt,
                                        make_spec(ram=10 ** 8), uuids(1))
    scheduler.proc.send_signal(signal.SIGUSR2)
    daemons.wait_for(lambda: 'Guru Meditation' in scheduler.log(), 20,
                     what='the Guru Meditation report')
    scheduler.stop()
    log = scheduler.log()
    assert 'database.connection' in log, 'options are logged at start'
    assert secret not in log
    assert 'guest:guest' not in log


def test_scheduler_manage_talks_to_the_service(cluster, conf, tmp_path):
    db = sqlite_url(tmp_path)
    cluster.start_scheduler(db)
    cluster.start_sim(hosts=3)
    hosts = wait_for_hosts(conf, db, 3)
    client_conf = cluster.client_config(db)

    def manage(*args):
        return subprocess.run(
            [daemons.console_script('scheduler-manage'), '--config-file',
             client_conf] + list(args), capture_output=True, text=True,
            timeout=120)

    placed = manage('select', '--format', 'json', '-n', '2', '--ram', '256',
                    '--alternates')
    assert placed.returncode == 0, placed.stderr
    rows = json.loads(placed.stdout)
    assert len(rows) == 2 and {r['host'] for r in rows} <= set(hosts)
    assert all(len(r['alternates']) == 2 for r in rows)

    failed = manage('select', '--ram', str(10 ** 8), '--admin')
    assert failed.returncode == 1
    assert failed.stderr.startswith('NoValidHost:')
    assert 'RamFilter' in failed.stderr
    assert 'explain --admin' in failed.stderr      # where to look next

    listed = manage('hosts', '--format', 'json')
    assert listed.returncode == 0, listed.stderr
    assert sorted(r['host'] for r in json.loads(listed.stdout)) == hosts

    explained = manage('explain', '--ram', str(10 ** 8), '--admin')
    assert explained.returncode == 0, explained.stderr
    assert 'physical RAM' in explained.stdout


def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def _scrape(port: int) -> dict:
    """``{'name{labels}': value}`` from the service's /metrics."""
    import urllib.request
    with urllib.request.urlopen('http://127.0.0.1:%d/metrics' % port,
                                timeout=5) as response:
        text = response.read().decode()
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith('#'):
            name, value = line.rsplit(' ', 1)
            samples[name] = float(value)
    return samples


def test_prometheus_endpoint_counts_for_every_worker(cluster, conf,
                                                     tmp_path):
    db = sqlite_url(tmp_path)
    port = _free_port()
    extra = ('\n[prometheus]\nenabled = true\nbind_host = 127.0.0.1\n'
             'port = %d\n' % port)
    cluster.start_scheduler(db, scheduler_opts={'workers': 2}, extra=extra)
    cluster.start_sim(hosts=2)
    wait_for_hosts(conf, db, 2)
    for _ in range(6):
        cluster.api.select_destinations(cluster.ctxt, make_spec(), uuids(1))
    with pytest.raises(exception.NoValidHost):
        cluster.api.select_destinations(cluster.ctxt, make_spec(ram=10 ** 8),
                                        uuids(1))
    ok = ('scheduler_requests_total{method="select_destinations",'
          'outcome="success"}')
    failed = ('scheduler_requests_total{method="select_destinations",'
              'outcome="no_valid_host"}')
    samples = daemons.wait_for(
        lambda: (lambda s: s if s.get(ok) == 6 and s.get(failed) == 1
                 else None)(_scrape(port)),
        20, what='six successes and one NoValidHost summed over workers')
    assert samples['scheduler_filter_eliminations_total{filter="RamFilter"}'] \
        >= 2
    # Each report is taken by one worker (the intake queue); the other
    # learns the host from the inventory after the taker's next flush,
    # and publishes the gauge at its next periodic run.
    daemons.wait_for(
        lambda: _scrape(port).get('scheduler_hosts{state="known"}') == 2,
        30, what='the known-hosts gauge to count both hosts')


def test_aggregate_changes_reach_running_workers(cluster, conf, tmp_path):
    db = sqlite_url(tmp_path)
    scheduler = cluster.start_scheduler(db, scheduler_opts={'workers': 2})
    cluster.start_sim(hosts=3)
    hosts = wait_for_hosts(conf, db, 3)
    client_conf = cluster.client_config(db)
    in_zone = make_spec(availability_zone='zone-a')
    with pytest.raises(exception.NoValidHost):
        cluster.api.select_destinations(cluster.ctxt, in_zone, uuids(1))

    for args in (['aggregate', 'create', 'zone-a', '--zone', 'zone-a'],
                 ['aggregate', 'add-host', 'zone-a', hosts[1]]):
        done = subprocess.run(
            [daemons.console_script('scheduler-manage'), '--config-file',
             client_conf] + args, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert 'could not notify' not in done.stderr, done.stderr

    # Both workers were told by the fanout cast, not only by their
    # periodic re-read of the inventory.
    daemons.wait_for(
        lambda: scheduler.log().count('Aggregate(s) zone-a updated') >= 4,
        10, what='both workers to take both aggregate casts')

    def placed_in_zone():
        return cluster.api.select_destinations(cluster.ctxt, in_zone,
                                               uuids(1))
    daemons.wait_for(placed_in_zone, 10, what='the new zone to be known')
    for _ in range(6):
        [[selection]] = placed_in_zone()
        assert selection.service_host == hosts[1]
        assert selection.availability_zone == 'zone-a'


def test_every_line_of_a_request_carries_its_request_id(cluster, conf,
                                                        tmp_path):
    db = sqlite_url(tmp_path)
    scheduler = cluster.start_scheduler(db)
    cluster.start_sim(hosts=2)
    wait_for_hosts(conf, db, 2)
    cluster.api.select_destinations(cluster.ctxt, make_spec(), uuids(1))
    request_id = cluster.ctxt.request_id
    walk = [line for line in scheduler.log().splitlines()
            if 'Filter RamFilter returned' in line]
    assert walk, 'debug logging shows the filter walk'
    assert all(request_id in line for line in walk)


def test_sigterm_lets_the_request_in_flight_finish(cluster, conf, tmp_path):
    db = sqlite_url(tmp_path)
    extra = ('\n[filter_scheduler]\n'
             'available_filters = scheduler.filters.all_filters\n'
             'available_filters = '
             'tests.unit.fixtures.out_of_tree.slow_filter.SlowFilter\n'
             'enabled_filters = ComputeFilter,SlowFilter,RamFilter\n')
    scheduler = cluster.start_scheduler(db, extra=extra)
    cluster.start_sim(hosts=2)
    hosts = wait_for_hosts(conf, db, 2)
    answers, errors = [], []

    def slow_request():
        try:
            answers.append(cluster.api.select_destinations(
                cluster.ctxt,
                make_spec(scheduler_hints={'slow_seconds': ['3']}),
                uuids(1)))
        except Exception as e:  # reported below
            errors.append(e)
    caller = threading.Thread(target=slow_request)
    caller.start()
    daemons.wait_for(lambda: 'Starting with 2 host(s) for SlowFilter'
                     in scheduler.log(), 10, what='the request to start')
    scheduler.proc.send_signal(signal.SIGTERM)
    caller.join(30)

    assert errors == []
    assert answers and answers[0][0][0].service_host in hosts
    assert scheduler.proc.wait(30) == 0, 'a clean exit after draining'


def test_cli_with_no_scheduler_answering(rabbit_url, tmp_path):
    """One line naming topic, transport and timeout; exit 1; no hang."""
    topic = daemons.unique_topic('nobody')
    client_conf = daemons.write_multi_config(
        str(tmp_path / 'client.conf'),
        '[DEFAULT]\ntransport_url = %s\n\n[scheduler]\ntopic = %s\n'
        % (rabbit_url, topic))
    done = subprocess.run(
        [daemons.console_script('scheduler-manage'), '--config-file',
         client_conf, 'select', '--timeout', '3'],
        capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr == (
        'scheduler-manage: no scheduler answered on topic %s at transport '
        'rabbit://guest:***@127.0.0.1:5672/ within 3 s (is '
        'scheduler-service running with the same [scheduler] topic and '
        'transport_url? --timeout waits longer)\n' % topic)
