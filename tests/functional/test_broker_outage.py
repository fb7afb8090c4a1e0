"""Broker outages, simulated with a TCP proxy: the shared broker stays up.

The process under test (this test's caller, or the scheduler daemon)
reaches RabbitMQ through ``tcp_proxy.TCPProxy``; stopping the proxy cuts
its connections and refuses new ones, as a broker that went down.
"""

import socket
import subprocess
import threading
import time
import uuid as uuid_lib

import kombu
import oslo_messaging
import pytest

from scheduler import objects
from scheduler import rpc
from scheduler import rpcapi
from tests.functional import caller
from tests.functional import daemons
from tests.functional import tcp_proxy
from tests.functional.test_scheduler_service import make_spec
from tests.functional.test_scheduler_service import wait_for_hosts


def _sqlite(tmp_path) -> str:
    return 'sqlite:///%s' % (tmp_path / 'inventory.sqlite')


@pytest.fixture
def proxy(rabbit_url):
    p = tcp_proxy.TCPProxy().start()
    yield p
    # The daemons behind it stop while they still reach the broker.
    daemons.stop_daemons_first()
    p.stop()


def _in_thread(func, timeout: float):
    """``func()``'s result or exception, or None if still running."""
    outcome: dict = {}

    def run():
        started = time.monotonic()
        try:
            outcome['result'] = func()
        except Exception as e:  # handed to the test
            outcome['error'] = e
        outcome['elapsed'] = time.monotonic() - started
    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(timeout)
    return outcome if not worker.is_alive() else None


#: The timeout of the calls made while the broker is down, and what
#: such a call may take beyond it on a busy machine.
OUTAGE_CALL_TIMEOUT = 3
OUTAGE_CALL_SLACK = 7


def test_call_timeout_is_honoured_while_the_broker_is_down(
        cluster, conf, tmp_path, proxy):
    """Item 4: MessagingTimeout within the caller's timeout, not after
    the outage (13.2 s for 5 s through a 10 s outage; forever through a
    longer one)."""
    db = _sqlite(tmp_path)
    cluster.start_scheduler(db)
    cluster.start_sim(hosts=1)
    wait_for_hosts(conf, db, 1)
    # Only the caller goes through the proxy.
    transport = oslo_messaging.get_rpc_transport(
        conf.conf, url=proxy.url(), allowed_remote_exmods=rpc.ALLOWED_EXMODS)
    try:
        api = rpcapi.SchedulerAPI(transport=transport,
                                  timeout=OUTAGE_CALL_TIMEOUT)
        assert api.get_version_info(cluster.admin_ctxt)['rpc_version']
        proxy.stop()
        for _ in range(2):
            outcome = _in_thread(lambda: api.select_destinations(
                cluster.ctxt, make_spec()), 20)
            if outcome is None:
                proxy.start()  # let the stuck call go before failing
                pytest.fail('a call with a %d s timeout still blocked '
                            'after 20 s of broker outage'
                            % OUTAGE_CALL_TIMEOUT)
            assert isinstance(outcome.get('error'),
                              oslo_messaging.MessagingTimeout), outcome
            # Generous on a busy machine; unbounded before.
            assert outcome['elapsed'] < (OUTAGE_CALL_TIMEOUT
                                         + OUTAGE_CALL_SLACK), outcome
        proxy.start()
        [[selection]] = daemons.wait_for(
            lambda: api.select_destinations(cluster.ctxt, make_spec()), 60,
            what='calls to go through once the broker is back')
        assert selection.service_host
    finally:
        if not proxy.running:
            proxy.start()
        transport.cleanup()


def _built(cluster, uuid: str) -> bool:
    return 'started instance %s' % uuid in cluster.sim.log()


def test_a_build_no_compute_queue_takes_goes_to_another_host(
        cluster, conf, tmp_path):
    """Item 3: the cast is mandatory; an unroutable one is retried.

    ``ghost`` reports (it is the roomiest host, so the first choice) but
    has no compute listening: no queue for its run_instance.  Before,
    the build vanished and its claim expired ``service_down_time``
    later; now its claim is released and the build goes elsewhere.
    """
    db = _sqlite(tmp_path)
    daemon = cluster.start_scheduler(db)
    cluster.start_sim(hosts=2)
    wait_for_hosts(conf, db, 2)
    ghost = objects.HostState(host='ghost', nodename='ghost',
                              memory_mb=10 ** 6, vcpus=512, local_gb=10 ** 5)
    cluster.api.update_service_capabilities(cluster.admin_ctxt, ghost)
    wait_for_hosts(conf, db, 3)
    uuid = str(uuid_lib.uuid4())
    cluster.api.schedule_run_instance(cluster.ctxt, make_spec(), [uuid])
    daemons.wait_for(lambda: _built(cluster, uuid), 60,
                     what='the build to reach a real compute')
    log = daemon.log()
    assert 'Build of instance %s not delivered to ghost' % uuid in log
    assert 'delivered to' in log and 'after ghost did not take it' in log


def _delete_queues(names: list) -> None:
    with kombu.Connection('amqp://guest:guest@127.0.0.1:5672//',
                          connect_timeout=5) as conn:
        channel = conn.default_channel
        for name in names:
            channel.queue_delete(queue=name)


def test_builds_around_a_broker_outage_are_delivered_or_named(
        cluster, conf, tmp_path, proxy):
    """Item 3: no build vanishes around a broker restart.

    The computes reach the broker through the proxy.  Stopping it and
    deleting their queues is what a broker restart does to them
    (non-durable queues are gone until each compute reconnects and
    declares its queue again).  Builds cast meanwhile are either
    delivered once a compute is back, or each named in an ERROR line;
    before, they went nowhere without a word.
    """
    db = _sqlite(tmp_path)
    daemon = cluster.start_scheduler(db,
                                     scheduler_opts={'service_down_time': 60})
    cluster.transport_url = proxy.url()  # the computes only
    # The simulator serves every host from one queue, bound once per
    # host: deleting that queue is what a broker restart does to it.
    cluster.start_sim(hosts=3, extra_args=('--server-name', 'outage'))
    wait_for_hosts(conf, db, 3)
    proxy.stop()
    _delete_queues(['%s.outage' % cluster.compute_topic])
    uuids = [str(uuid_lib.uuid4()) for _ in range(3)]
    for uuid in uuids:
        cluster.api.schedule_run_instance(cluster.ctxt, make_spec(), [uuid])
    time.sleep(1)
    proxy.start()

    def accounted():
        log = daemon.log()
        return all(_built(cluster, u) or 'Build of instance %s lost' % u
                   in log for u in uuids)
    daemons.wait_for(accounted, 90, what='every build to be delivered or '
                                         'reported lost')
    log = daemon.log()
    for uuid in uuids:
        assert 'Build of instance %s not delivered' % uuid in log


def _caller_config(tmp_path, transport_url: str, topic: str) -> str:
    return daemons.write_multi_config(
        str(tmp_path / 'caller.conf'),
        '[DEFAULT]\ntransport_url = %s\nlog_file = %s\n\n[scheduler]\n'
        'topic = %s\n' % (transport_url, tmp_path / 'caller.log', topic))


#: A call with this timeout must end well within the test's patience;
#: generous on a busy machine (before, the first call never ended).
FIRST_CALL_TIMEOUT = 3
PATIENCE = FIRST_CALL_TIMEOUT + 10


def test_first_call_of_a_fresh_process_ends_within_its_timeout(
        cluster, conf, tmp_path, proxy):
    """Item 4: even the first call of a process, whose reply queue is
    not open yet, gets MessagingTimeout while the broker is down; once
    it is back the same process is answered."""
    db = _sqlite(tmp_path)
    cluster.start_scheduler(db)
    cluster.start_sim(hosts=1)
    hosts = wait_for_hosts(conf, db, 1)
    proxy.stop()
    child = caller.CallerProcess(
        _caller_config(tmp_path, proxy.url(), cluster.topic),
        FIRST_CALL_TIMEOUT)
    try:
        first = child.call(guard=PATIENCE)
        assert first is not None, 'the first call still hangs'
        assert first['error'] == 'MessageBusUnreachable', first
        assert first['timeout'] is True, 'it is a MessagingTimeout'
        proxy.start()
        answered = daemons.wait_for(
            lambda: (child.call(guard=PATIENCE) or {}).get('host'), 60,
            what='the same process to be answered once the broker is back')
        assert answered in hosts
    finally:
        child.stop()


@pytest.fixture
def black_hole():
    """A loopback port that takes TCP connections and never answers."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(('127.0.0.1', 0))
    listener.listen(64)  # never accepted: the kernel completes handshakes
    yield 'rabbit://guest:guest@127.0.0.1:%d/' % listener.getsockname()[1]
    listener.close()


@pytest.mark.parametrize('executor', ['eventlet', 'threading'])
def test_first_call_to_a_broker_that_never_answers(tmp_path, black_hole,
                                                   executor):
    child = caller.CallerProcess(
        _caller_config(tmp_path, black_hole, daemons.unique_topic('nobody')),
        FIRST_CALL_TIMEOUT, executor=executor)
    try:
        first = child.call(guard=PATIENCE)
        assert first is not None, 'the first call still hangs'
        assert first['error'] == 'MessageBusUnreachable', first
        assert first['elapsed'] < PATIENCE
    finally:
        child.stop()


@pytest.mark.parametrize('unreachable', ['black_hole', 'closed_port',
                                         'gone_after_the_check'])
def test_cli_says_in_one_line_that_the_bus_is_unreachable(
        tmp_path, request, unreachable):
    """``scheduler-manage`` checks the broker first (one line at once);
    a broker that takes that check and then no call is one line too,
    within the command's timeout, instead of a hang."""
    gone = None
    if unreachable == 'black_hole':
        url = request.getfixturevalue('black_hole')
    elif unreachable == 'closed_port':
        closed = tcp_proxy.TCPProxy().start()
        closed.stop()  # the port is free again: nothing listens
        url = closed.url()
    else:
        request.getfixturevalue('rabbit_url')
        gone = tcp_proxy.TCPProxy(limit=1).start()
        url = gone.url()
    try:
        done = subprocess.run(
            [daemons.console_script('scheduler-manage'), '--config-file',
             _caller_config(tmp_path, url, daemons.unique_topic('nobody')),
             'select', '--timeout', str(FIRST_CALL_TIMEOUT)],
            capture_output=True, text=True, timeout=60)
    finally:
        if gone is not None:
            gone.stop()
    assert done.returncode == 1
    assert done.stderr.count('\n') == 1, done.stderr
    assert done.stderr.startswith('scheduler-manage: cannot reach the '
                                  'message bus at rabbit://guest:***@'), \
        done.stderr
    if gone is not None:
        assert gone.accepted == 1, 'the check logged in, nothing else did'
        assert 'the call was not taken within %d s' % FIRST_CALL_TIMEOUT \
            in done.stderr


def test_aggregate_command_ends_when_the_bus_takes_no_cast(tmp_path,
                                                           rabbit_url):
    """``aggregate create`` saves, then announces the change with a cast:
    a broker gone after the check is one warning line, not a hang (the
    schedulers read the change at their next periodic task)."""
    gone = tcp_proxy.TCPProxy(limit=1).start()
    config = daemons.write_multi_config(
        str(tmp_path / 'manage.conf'),
        '[DEFAULT]\ntransport_url = %s\n\n[scheduler]\ntopic = %s\n\n'
        '[database]\nconnection = sqlite:///%s\n'
        % (gone.url(), daemons.unique_topic('nobody'),
           tmp_path / 'inventory.sqlite'))
    manage = [daemons.console_script('scheduler-manage'), '--config-file',
              config]
    try:
        subprocess.run(manage + ['db', 'sync'], check=True,
                       capture_output=True, timeout=60)
        done = subprocess.run(manage + ['aggregate', 'create', 'az-x',
                                        '--zone', 'x'],
                              capture_output=True, text=True, timeout=60)
    finally:
        gone.stop()
    assert done.returncode == 0, done.stderr
    assert 'az-x' in done.stdout
    assert done.stderr.count('\n') == 1, done.stderr
    assert 'Saved, but could not notify the schedulers' in done.stderr
