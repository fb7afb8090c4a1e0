"""The scheduler service over the in-process ``fake://`` bus.

A real Service with its RPC server, fed by compute reports sent through
the client API, answering select_destinations - as a conductor would
call it, including callers capped to older API versions during an
upgrade.  Every call costs ~50 ms on fake://, so each test makes few.

These tests run without eventlet monkey patching, where oslo.messaging's
eventlet executor never gets to run its server; they serve with the
threading executor instead (``concurrency.EXECUTOR``, patched for the
test only).
"""

import logging
import socket
import subprocess
import sys
import threading
import time

import kombu
import oslo_messaging
import pytest

from scheduler import concurrency
from scheduler import context
from scheduler import exception
from scheduler import objects
from scheduler import rpc
from scheduler import rpcapi
from scheduler import service as service_mod
from tests.unit import fixtures

CTX = context.get_admin_context()


@pytest.fixture
def start_service(inventory, fake_transport, monkeypatch, conf):
    """Start a scheduler service on fake://; stopped after the test."""
    monkeypatch.setattr(concurrency, 'EXECUTOR', 'threading')
    conf.config(weight_classes=['RAMWeigher'],
                enabled_filters=fixtures.CORE_FILTERS,
                group='filter_scheduler')
    started = []

    def start(driver='filter_scheduler'):
        conf.config(driver=driver, group='scheduler')
        svc = service_mod.Service.create(transport=fake_transport)
        svc.start()
        started.append(svc)
        return svc

    yield start
    for svc in started:
        svc.stop()


def _client(fake_transport):
    return rpcapi.SchedulerAPI(transport=fake_transport, timeout=10)


def _report(client, svc, *reports):
    """Send compute reports and wait until the service has them all."""
    for rep in reports:
        client.update_service_capabilities(CTX, rep)
    wanted = {(r.host, r.nodename) for r in reports}
    host_manager = svc.manager.driver.host_manager
    deadline = time.time() + 5
    while time.time() < deadline:
        known = {s.key() for s in host_manager.get_all_host_states()}
        if wanted <= known:
            return
        time.sleep(0.01)
    raise AssertionError('reports did not arrive: %s' % (wanted - known))


def _garbage(**overrides):
    primitive = {'versioned_object.name': 'RequestSpec',
                 'versioned_object.namespace': 'scheduler',
                 'versioned_object.version': '1.1',
                 'versioned_object.data': {'flavor': 'not an object'}}
    primitive.update(overrides)
    return primitive


def test_select_destinations_over_the_bus(start_service, fake_transport):
    svc = start_service()
    client = _client(fake_transport)
    _report(client, svc, fixtures.report('small', memory_mb=2048),
            fixtures.report('big', memory_mb=8192))

    selections = client.select_destinations(
        CTX, fixtures.request(memory_mb=1024, num_instances=2),
        [fixtures.uuid(1), fixtures.uuid(2)])
    assert [[s.service_host for s in alts] for alts in selections] == \
        [['big'], ['big']]
    assert isinstance(selections[0][0], objects.Selection)
    assert selections[0][0].instance_uuid == fixtures.uuid(1)
    assert selections[0][0].limits.memory_mb == 8192

    # Too big for anyone: the caller gets NoValidHost, typed.
    with pytest.raises(exception.NoValidHost):
        client.select_destinations(CTX, fixtures.request(memory_mb=1 << 20))
    # Nothing was claimed for the failed request.
    big = svc.manager.driver.host_manager.get_host_state('big')
    assert big.free_ram_mb == 8192 - 2048


def test_every_dispatched_call_starts_a_cpu_slice(monkeypatch):
    # A call runs in a green thread that has just got the CPU: its
    # first safe point must not yield the slice others used up.
    begun = []
    monkeypatch.setattr(concurrency, 'slice_begins',
                        lambda: begun.append(True))

    class _Endpoint:
        target = oslo_messaging.Target(version='1.4')

        @oslo_messaging.expose
        def ping(self, ctxt):
            return 'pong'

    dispatcher = rpc.Dispatcher([_Endpoint()], rpc.ServerSerializer(),
                                oslo_messaging.ExplicitRPCAccessPolicy)
    incoming = type('Incoming', (), {
        'message': {'method': 'ping', 'args': {}, 'version': '1.4'},
        'ctxt': CTX.to_dict(), 'client_timeout': None})()
    assert dispatcher.dispatch(incoming) == 'pong'
    assert begun == [True]


def test_malformed_objects_come_back_typed_and_the_service_goes_on(
        start_service, fake_transport, caplog):
    caplog.set_level(logging.WARNING, logger='scheduler')
    svc = start_service()
    api = _client(fake_transport)
    _report(api, svc, fixtures.report('h1'))
    raw = api.client.prepare(version='1.2')

    with pytest.raises(exception.MalformedObject):
        raw.call(CTX, 'select_destinations', spec_obj=_garbage(),
                 return_objects=True)
    with pytest.raises(exception.IncompatibleObjectVersion) as info:
        raw.call(CTX, 'select_destinations',
                 spec_obj=_garbage(**{'versioned_object.version': '2.0',
                                      'versioned_object.data': {}}),
                 return_objects=True)
    assert 'RequestSpec' in str(info.value)
    # One warning line per rejected request, no traceback.
    rejected = [r for r in caplog.records
                if 'Rejected a call of select_destinations'
                in r.getMessage()]
    assert len(rejected) == 2

    # A well-formed object of the wrong kind is an invalid request.
    with pytest.raises(exception.InvalidRequest):
        raw.call(CTX, 'select_destinations', spec_obj=fixtures.report('h2'),
                 return_objects=True)

    # The next good request is served.
    selections = api.select_destinations(CTX, fixtures.request())
    assert selections[0][0].service_host == 'h1'


def test_callers_capped_for_an_upgrade_still_get_selections(
        start_service, fake_transport, conf):
    svc = start_service()
    for cap in ('1.0', '1.1'):
        conf.config(scheduler=cap, group='upgrade_levels')
        api = _client(fake_transport)
        assert not api.can_send_version('1.2')
        probe = 'probe-%s' % cap.replace('.', '-')
        _report(api, svc, fixtures.report('small', memory_mb=2048),
                fixtures.report('big', memory_mb=8192),
                fixtures.report(probe, memory_mb=256, failed_builds=1))
        # Reports are backported: a 1.0 HostState has no failed_builds.
        assert svc.manager.driver.host_manager.get_host_state(
            probe).failed_builds == 0

        # A new instance each round (the same uuid again would be a
        # retry, answered with the earlier placement).
        uuid = fixtures.uuid(1 if cap == '1.0' else 2)
        spec = fixtures.request(memory_mb=1024, is_bfv=True,
                                instance_uuid=uuid)
        selections = api.select_destinations(CTX, spec, [uuid])
        assert len(selections) == 1, cap
        chosen = selections[0][0]
        assert isinstance(chosen, objects.Selection), cap
        assert (chosen.service_host, chosen.nodename) == ('big', 'big'), cap
        assert chosen.limits.memory_mb == 8192, cap
        # Neither the legacy dict API nor Selection 1.0 (what API 1.1
        # answers with) has room for the weight: it reads as unknown.
        assert chosen.weight is None, cap


def test_a_caller_capped_at_1_0_is_not_placed_against_its_request(
        start_service, fake_transport, conf):
    # The legacy dicts of API 1.0 have no room for a requested
    # destination, a NUMA topology or PCI requests: sent anyway, the
    # instance would land where the request said it must not.
    svc = start_service()
    conf.config(scheduler='1.0', group='upgrade_levels')
    api = _client(fake_transport)
    _report(api, svc, fixtures.report('big', memory_mb=8192),
            fixtures.report('small', memory_mb=2048))
    pinned = fixtures.request(
        requested_destination=objects.Destination(host='small'))
    numa = fixtures.request(numa_topology=objects.InstanceNUMATopology(
        cells=[objects.InstanceNUMACell(id=0, cpuset={0}, memory=512)]))
    pci = fixtures.request(pci_requests=[objects.InstancePCIRequest(
        count=1, spec=[{'vendor_id': '8086'}])])
    for spec, field in ((pinned, 'requested_destination'),
                        (numa, 'numa_topology'), (pci, 'pci_requests')):
        with pytest.raises(exception.SchedulerTooOld) as info:
            api.select_destinations(CTX, spec, [fixtures.uuid(1)])
        assert field in str(info.value)
        with pytest.raises(exception.SchedulerTooOld):
            api.schedule_run_instance(CTX, spec, [fixtures.uuid(2)])

    # What the legacy dicts carry is still sent at 1.0.
    [[chosen]] = api.select_destinations(
        CTX, fixtures.request(ignore_hosts=['big']), [fixtures.uuid(3)])
    assert chosen.service_host == 'small'


def test_the_callers_address_reaches_the_ip_scheduler(
        start_service, fake_transport, caplog):
    caplog.set_level(logging.DEBUG, logger='scheduler.drivers.ip_prefix')
    svc = start_service('ip_scheduler')
    api = _client(fake_transport)
    _report(api, svc, fixtures.report('doc1'), fixtures.report('dev1'))
    ctx = context.RequestContext(remote_address='10.1.2.3', user_id='demo',
                                 project_id='demo')
    selections = api.select_destinations(ctx, fixtures.request())
    assert selections[0][0].service_host == 'doc1'
    assert 'Request from 10.1.2.3 scheduled to doc1' in caplog.text


class _Unreachable:
    """A call context whose broker is down for the first ``down`` sends."""

    def __init__(self, down: int, timeout=None, transport=None):
        self.down, self.timeout, self.sent = down, timeout, []
        self.transport = transport

    #: What the broker says of a call it cannot take.
    error = oslo_messaging.MessageDeliveryFailure('broker down')
    target = oslo_messaging.Target(topic='scheduler')

    def prepare(self, retry=None, timeout=None):
        assert retry == 0
        self.sent.append(timeout)
        return self

    def call(self, ctxt, method, **kwargs):
        if len(self.sent) <= self.down:
            raise self.error
        return method


class _NoQueue(_Unreachable):
    """The broker is up but no server consumes the topic yet."""

    error = oslo_messaging.MessageUndeliverable(
        Exception('NO_ROUTE'), 'scheduler', 'scheduler', None)


def test_a_call_no_queue_took_is_sent_again_until_one_does(monkeypatch):
    # Just after a broker restart, before the service declared its
    # queues again: the call used to vanish, its caller waiting its
    # whole timeout.
    monkeypatch.setattr(rpc, 'SEND_RETRY_INTERVAL', 0.01)
    cctxt = _NoQueue(down=3, timeout=5)
    assert rpc.call(cctxt, {}, 'select_destinations') == \
        'select_destinations'
    assert len(cctxt.sent) == 4


def test_a_call_no_server_ever_consumes_times_out_saying_so(monkeypatch):
    monkeypatch.setattr(rpc, 'SEND_RETRY_INTERVAL', 0.01)
    with pytest.raises(rpc.NoServerConsuming) as info:
        rpc.call(_NoQueue(down=10 ** 6, timeout=0.2), {}, 'explain')
    assert isinstance(info.value, oslo_messaging.MessagingTimeout)
    assert 'no queue of topic scheduler' in str(info.value)


def test_a_call_is_sent_again_within_its_timeout(monkeypatch):
    monkeypatch.setattr(rpc, 'SEND_RETRY_INTERVAL', 0.01)
    cctxt = _Unreachable(down=2, timeout=5)
    assert rpc.call(cctxt, {}, 'get_version_info') == 'get_version_info'
    assert len(cctxt.sent) == 3
    # Each try waits only for what is left of the caller's timeout.
    assert all(0 < left <= 5 for left in cctxt.sent)


def test_a_call_the_broker_never_takes_times_out(monkeypatch):
    monkeypatch.setattr(rpc, 'SEND_RETRY_INTERVAL', 0.01)
    with pytest.raises(oslo_messaging.MessagingTimeout) as info:
        rpc.call(_Unreachable(down=10 ** 6, timeout=0.2), {}, 'explain')
    assert 'unreachable' in str(info.value)


class _ConnectionLost(_Unreachable):
    """The connection fails under the call (kombu's own error)."""

    def call(self, ctxt, method, **kwargs):
        raise kombu.exceptions.OperationalError('Connection reset by peer')


def test_a_connection_lost_under_a_call_is_the_bus_typed_error():
    # Callers got kombu's OperationalError during a broker restart.
    cctxt = _ConnectionLost(down=0, timeout=5)
    with pytest.raises(rpc.MessageBusUnreachable) as info:
        rpc.call(cctxt, {}, 'select_destinations')
    assert 'connection failed' in str(info.value)
    assert len(cctxt.sent) == 1             # never sent twice


class _SlowReplyQueue:
    """A transport whose driver opens its reply queue once let to."""

    def __init__(self, error=None):
        self.let = threading.Event()
        self.opened = 0
        self.error = error
        self._driver = self

    def _get_reply_q(self):
        self.let.wait(30)
        if self.error is not None:
            raise self.error
        self.opened += 1
        return 'reply_x'


def test_a_first_call_without_a_reply_queue_times_out(monkeypatch):
    """The reply queue is opened in the background: the call gives up at
    its deadline, and a later call goes through once the queue is open."""
    transport = _SlowReplyQueue()
    with pytest.raises(rpc.MessageBusUnreachable) as info:
        rpc.call(_Unreachable(down=0, timeout=0.2, transport=transport), {},
                 'select_destinations')
    assert 'no connection for the reply' in str(info.value)
    assert isinstance(info.value, oslo_messaging.MessagingTimeout)
    transport.let.set()
    cctxt = _Unreachable(down=0, timeout=5, transport=transport)
    assert rpc.call(cctxt, {}, 'explain') == 'explain'
    assert rpc.call(cctxt, {}, 'explain') == 'explain'
    assert transport.opened == 1, 'opened once, by one thread'


def test_a_reply_queue_that_cannot_open_says_why_and_is_tried_again():
    transport = _SlowReplyQueue(error=oslo_messaging.MessageDeliveryFailure(
        'login refused'))
    transport.let.set()
    cctxt = _Unreachable(down=0, timeout=5, transport=transport)
    with pytest.raises(oslo_messaging.MessageDeliveryFailure):
        rpc.call(cctxt, {}, 'explain')
    transport.error = None
    assert rpc.call(cctxt, {}, 'explain') == 'explain'
    assert transport.opened == 1


#: A real rabbit transport whose broker cannot be reached: the reply
#: queue oslo.messaging's own driver opens is never open.
REPLY_QUEUE_OF_A_REAL_DRIVER = '''
import os
from oslo_config import cfg
from scheduler import rpc
transport = rpc.get_transport(cfg.CONF,
                              url="rabbit://guest:guest@127.0.0.1:1/")
print(type(transport._driver).__name__,
      rpc._reply_queue_open(transport, 0.2), flush=True)
# The opener keeps trying to connect in a thread of its own.
os._exit(0)
'''


def test_the_reply_queue_wait_reaches_oslo_messagings_own_driver():
    """``_reply_queue_open`` finds the rabbit driver's reply queue.

    The shim calls a private method of oslo.messaging's AMQP driver;
    the fakes above stand in for it by name.  Here the real driver
    runs: if oslo.messaging renames or drops that method, the shim
    would take every transport for one without a reply queue (open at
    once), and this fails.
    """
    done = subprocess.run(
        [sys.executable, '-c', REPLY_QUEUE_OF_A_REAL_DRIVER],
        capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ['RabbitDriver', 'False'], done.stderr


def test_a_stopped_consumer_lets_go_within_the_idle_wait():
    """An idle AMQP consumer sees stop() within CONSUMER_IDLE_WAIT.

    oslo.messaging's consumers wait up to 5 s at a time while idle and
    see a stop() only after: an idle scheduler-service took 8 s to stop
    on SIGTERM (tools/bench/bench_stop.py measures it).  The rabbit
    driver must still load in a fresh process (it bounds one of its
    options by the original ceiling when imported).
    """
    script = (
        'from oslo_config import cfg\n'
        'import oslo_messaging\n'
        'from scheduler import rpc\n'
        'transport = rpc.get_transport(cfg.CONF, '
        'url="rabbit://guest:guest@127.0.0.1:1/")\n'
        'from oslo_messaging._drivers import amqpdriver\n'
        'print(amqpdriver.ACK_REQUEUE_EVERY_SECONDS_MAX,'
        ' cfg.CONF.oslo_messaging_rabbit.kombu_reconnect_delay)\n'
        'transport.cleanup()\n')
    done = subprocess.run([sys.executable, '-c', script],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    ceiling, reconnect_delay = map(float, done.stdout.split())
    assert ceiling == rpc.CONSUMER_IDLE_WAIT
    assert reconnect_delay == 1.0


class _Held:
    """An endpoint whose casts wait until the test lets them go."""

    def __init__(self):
        self.go = threading.Event()
        self.lock = threading.Lock()
        self.started = self.done = 0

    @oslo_messaging.expose
    def work(self, ctxt, n):
        with self.lock:
            self.started += 1
        self.go.wait(10)
        with self.lock:
            self.done += 1


class _WatchedSlots:
    """The bounded executor's slots; tells when the consumer has to
    wait for one (the bound is reached)."""

    def __init__(self, slots):
        self._slots = slots
        self.consumer_waits = threading.Event()

    def acquire(self):
        if not self._slots.acquire(blocking=False):
            self.consumer_waits.set()
            self._slots.acquire()
        return True

    def release(self):
        self._slots.release()


def _until(condition, timeout=10):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, 'timed out'
        time.sleep(0.01)


def test_a_busy_server_leaves_what_it_cannot_serve_on_the_bus(
        fake_transport, monkeypatch):
    """oslo.messaging acknowledges a message when its consumer gets it
    and queues what its workers cannot take yet without a bound: a busy
    service pulled the broker's whole backlog into its memory."""
    monkeypatch.setattr(concurrency, 'EXECUTOR', 'threading')
    endpoint = _Held()
    server = rpc.get_server(oslo_messaging.Target(topic='held', server='s1'),
                            [endpoint], transport=fake_transport)
    server.start(override_pool_size=2)
    slots = server._work_executor._slots = _WatchedSlots(
        server._work_executor._slots)
    client = rpc.get_client(oslo_messaging.Target(topic='held'),
                            transport=fake_transport)
    queue = fake_transport._driver._exchange_manager.get_exchange(
        'scheduler')._get_topic_queue('held')
    try:
        for n in range(20):
            client.cast(CTX, 'work', n=n)
        _until(lambda: endpoint.started == 2)
        # Once the consumer waits for a slot it takes nothing more off
        # the bus: what it took is then final, whatever the machine's
        # speed.  Without the bound it never waits.
        _until(slots.consumer_waits.is_set)
        # Two served, two queued for the workers, one in the consumer's
        # hand; the rest is still on the bus.
        assert 20 - len(queue) <= 2 * (1 + rpc.QUEUED_PER_WORKER) + 1
        assert endpoint.started == 2
        endpoint.go.set()
        _until(lambda: endpoint.done == 20)
        assert not queue
    finally:
        endpoint.go.set()
        server.stop()
        server.wait()


def test_an_unbound_executor_takes_what_it_is_given_at_once():
    """What a stopping server took off the bus goes to its executor
    (``taken_messages.serve_taken``) past the bound: waiting for slots
    behind a backlog outlasted the stop's wait, and the rest was
    dropped."""
    import futurist
    executor = rpc._bounded_executor(futurist.ThreadPoolExecutor)(
        max_workers=1)
    go = threading.Event()
    futures: list = []

    def hand_over():
        futures.extend(executor.submit(go.wait, 10) for _ in range(5))
    try:
        executor.unbound()
        handing = threading.Thread(target=hand_over, daemon=True)
        handing.start()
        # Five with room for two (one running, one queued): no wait.
        handing.join(5)
        assert not handing.is_alive()
        go.set()
        assert [f.result(10) for f in futures] == [True] * 5
    finally:
        go.set()
        executor.shutdown()


def test_a_server_takes_few_of_a_bounded_method_off_the_bus(
        fake_transport, monkeypatch):
    """``at_once`` bounds what a server takes of a method before one is
    served, however many of its workers are idle: the rest waits on the
    bus (a worker's backlog of host reports delayed every request)."""
    monkeypatch.setattr(concurrency, 'EXECUTOR', 'threading')
    endpoint = _Held()
    server = rpc.get_server(oslo_messaging.Target(topic='held', server='s1'),
                            [endpoint], transport=fake_transport,
                            at_once={'work': 2})
    server.start(override_pool_size=8)
    executor = server._work_executor
    slots = executor._method_slots['work'] = _WatchedSlots(
        executor._method_slots['work'])
    client = rpc.get_client(oslo_messaging.Target(topic='held'),
                            transport=fake_transport)
    queue = fake_transport._driver._exchange_manager.get_exchange(
        'scheduler')._get_topic_queue('held')
    try:
        for n in range(10):
            client.cast(CTX, 'work', n=n)
        _until(lambda: endpoint.started == 2)
        _until(slots.consumer_waits.is_set)
        # Six workers idle, yet two served, one in the consumer's hand,
        # the rest on the bus.
        assert endpoint.started == 2
        assert len(queue) >= 10 - 2 - 1
        endpoint.go.set()
        _until(lambda: endpoint.done == 10)
    finally:
        endpoint.go.set()
        server.stop()
        server.wait()


def test_a_service_takes_few_host_reports_at_once(start_service,
                                                  fake_transport,
                                                  monkeypatch):
    """Each report server of a worker holds at most
    ``REPORTS_AT_ONCE`` reports taken off the bus (they only compute);
    instance news is not bounded that way."""
    svc = start_service()
    reports = svc.manager.reports
    go = threading.Event()
    taken = []
    lock = threading.Lock()

    def held(ctxt, host_state, channel, shared=False):
        with lock:
            taken.append(host_state.host)
        go.wait(10)
    monkeypatch.setattr(reports, 'take_report', held)
    watched = []
    for server in svc.servers:
        limits = server._work_executor._method_slots
        if 'update_service_capabilities' in limits:
            limits['update_service_capabilities'] = _WatchedSlots(
                limits['update_service_capabilities'])
            watched.append(limits['update_service_capabilities'])
    # The reports topic's server and the 1.5 intake's.
    assert len(watched) == 2
    client = _client(fake_transport)
    try:
        for n in range(3 * service_mod.REPORTS_AT_ONCE):
            client.update_service_capabilities(
                CTX, fixtures.report('h%d' % n))
        # The consumer waits once every slot is taken; the last slot's
        # report may reach ``held`` a moment after.
        _until(lambda: any(w.consumer_waits.is_set() for w in watched)
               and len(taken) >= service_mod.REPORTS_AT_ONCE)
        assert len(taken) == service_mod.REPORTS_AT_ONCE
    finally:
        go.set()


class _Server:
    """Records stop() and wait(); stop() returns only once every server
    of the barrier is stopping, as consumers that let go side by side."""

    def __init__(self, name, barrier, events, fail=False):
        self.name, self.barrier, self.events = name, barrier, events
        self.fail = fail

    def stop(self):
        self.events.append(('stop', self.name))
        self.barrier.wait(timeout=5)
        if self.fail:
            raise RuntimeError('broken server')

    def wait(self):
        self.events.append(('wait', self.name))


def test_servers_stop_side_by_side_then_let_calls_in_flight_end():
    events = []
    barrier = threading.Barrier(3)
    servers = [_Server('requests', barrier, events),
               _Server('reports', barrier, events, fail=True),
               _Server('operators', barrier, events)]
    rpc.stop_servers(servers)  # one broken server stops no other
    assert not barrier.broken, 'stopped one after the other'
    assert [kind for kind, _ in events] == ['stop'] * 3 + ['wait'] * 3
    assert {name for _, name in events[3:]} == {s.name for s in servers}


class _StuckServer:
    """A server whose wait() never ends (a call in flight that hangs)."""

    def __init__(self):
        self.release = threading.Event()

    def stop(self):
        pass

    def wait(self):
        self.release.wait(30)


def test_a_server_still_stopping_at_the_grace_is_logged_and_left(caplog):
    stuck = _StuckServer()
    try:
        with caplog.at_level(logging.ERROR, logger='scheduler.rpc'):
            assert rpc.stop_servers([stuck], grace=0.5) is False
        text = caplog.text
        assert 'still in wait() after the 0.5 s stop grace' in text
        # What it was doing, for the operator to see.
        assert 'rpc-server-wait-0' in text and 'in wait' in text
    finally:
        stuck.release.set()


def test_servers_left_behind_while_the_broker_is_down_are_one_warning(
        caplog):
    """Their connections retry the broker without a limit: expected,
    so not an ERROR with stacks."""
    stuck = _StuckServer()
    try:
        with caplog.at_level(logging.DEBUG, logger='scheduler.rpc'):
            assert rpc.stop_servers([stuck], grace=0.5,
                                    broker_down=True) is False
        errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
        assert errors == []
        [warning] = [r for r in caplog.records
                     if r.levelno == logging.WARNING]
        assert 'The message broker is unreachable: 1 RPC server(s) still ' \
            'in wait() after 0.5 s, left behind' in warning.getMessage()
    finally:
        stuck.release.set()


def test_a_broker_gone_during_the_stop_cuts_the_grace(
        monkeypatch, caplog):
    """The broker answered when the stop began and went during it (a
    node shutting down stops RabbitMQ too): the servers left waiting
    for it get ``down_grace``, not what is left of the stop grace."""
    monkeypatch.setattr(rpc, 'PROBE_EVERY', 0.05)
    answers = iter([True, True])
    probes = []

    def probe() -> bool:
        probes.append(1)
        return next(answers, False)

    stuck = _StuckServer()
    try:
        with caplog.at_level(logging.DEBUG, logger='scheduler.rpc'):
            assert rpc.stop_servers([stuck], grace=60, probe=probe,
                                    down_grace=0.2) is False
        assert len(probes) == 3
        errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
        assert errors == []
        [warning] = [r for r in caplog.records
                     if r.levelno == logging.WARNING]
        assert 'The message broker is unreachable: 1 RPC server(s) still ' \
            'in wait() after 0.2 s, left behind' in warning.getMessage()
    finally:
        stuck.release.set()


def test_a_stop_asks_the_broker_again_while_it_waits(start_service,
                                                     monkeypatch):
    """The service hands its servers' stop a probe and the short grace
    for a broker that goes during the stop."""
    svc = start_service()
    seen = []
    real_stop_servers = rpc.stop_servers

    def stop_servers(servers, **kwargs):
        seen.append(kwargs)
        return real_stop_servers(servers, **kwargs)

    monkeypatch.setattr(rpc, 'stop_servers', stop_servers)
    monkeypatch.setattr(rpc, 'broker_reachable',
                        lambda conf=None, timeout=1.0: True)
    svc.stop()
    [kwargs] = seen
    assert kwargs['down_grace'] == service_mod.BROKER_DOWN_GRACE
    assert kwargs['probe']() is True


@pytest.mark.parametrize('reachable, grace', [
    (False, service_mod.BROKER_DOWN_GRACE), (True, 48.0)])
def test_a_stop_gives_the_servers_a_short_grace_only_with_the_broker_down(
        start_service, monkeypatch, conf, reachable, grace):
    """A stopping service asks the broker once; unreachable, its
    servers get BROKER_DOWN_GRACE, not four fifths of
    graceful_shutdown_timeout."""
    svc = start_service()
    seen = []
    real_stop_servers = rpc.stop_servers

    def stop_servers(servers, grace=None, broker_down=False, **kwargs):
        seen.append((grace, broker_down))
        return real_stop_servers(servers, grace=grace,
                                 broker_down=broker_down, **kwargs)

    monkeypatch.setattr(rpc, 'stop_servers', stop_servers)
    monkeypatch.setattr(rpc, 'broker_reachable',
                        lambda conf=None, timeout=1.0: reachable)
    monkeypatch.setattr(service_mod, 'servers_grace', lambda: 48.0)
    svc.stop()
    assert seen == [(grace, not reachable)]


def test_broker_reachable_tries_once(monkeypatch, conf):
    """A refused connection is told at once, without kombu's pause
    before a second attempt."""
    sock = socket.socket()
    sock.bind(('127.0.0.1', 0))
    port = sock.getsockname()[1]
    sock.close()  # nobody listens there
    conf.config(transport_url='rabbit://guest:guest@127.0.0.1:%d/' % port)
    attempts = []
    real = kombu.Connection._connection_factory

    def counted(self):
        attempts.append(1)
        return real(self)

    monkeypatch.setattr(kombu.Connection, '_connection_factory', counted)
    assert rpc.broker_reachable(timeout=1.0) is False
    assert attempts == [1]
    conf.config(transport_url='fake:/')
    assert rpc.broker_reachable() is True


class _CancelHeld(_StuckServer):
    """A server whose consumer cancel is never answered."""

    def __init__(self):
        super().__init__()
        self.waited = threading.Event()

    def wait(self):
        self.waited.set()


def test_a_cancel_the_broker_never_answers_holds_no_call_in_flight(
        monkeypatch, caplog):
    server = _CancelHeld()
    monkeypatch.setattr(rpc, 'TAKEN_GRACE', 0.5)
    monkeypatch.setattr(rpc.taken_messages, 'serve_taken',
                        lambda s: s.release.wait(30))
    try:
        with caplog.at_level(logging.ERROR, logger='scheduler.rpc'):
            assert rpc.stop_servers([server], grace=20) is True
        assert server.waited.is_set()
        assert 'still cancelling their consumers after 0.5 s' in caplog.text
    finally:
        server.release.set()


class _HeldByTheDriver(_Unreachable):
    """A call the driver holds before publishing (a pooled connection
    reconnecting under its lock) until ``release`` is set."""

    def __init__(self, timeout):
        super().__init__(down=0, timeout=timeout)
        self.release = threading.Event()

    def call(self, ctxt, method, **kwargs):
        self.release.wait(120)
        return method


def test_a_call_the_driver_holds_ends_at_its_deadline():
    """Issue 28 item 6: 10 s calls took 15 s through a broker stop.

    The driver holds the call until the test lets it go, which it does
    only once the call ended: a call that waits for its driver never
    ends (the thread's join is a fail-safe, not a bound)."""
    cctxt = _HeldByTheDriver(timeout=0.5)
    ended: list = []

    def caller():
        try:
            rpc.call(cctxt, {}, 'select_destinations')
        except Exception as e:
            ended.append(e)
        else:
            ended.append(None)

    thread = threading.Thread(target=caller)
    thread.start()
    thread.join(60)
    held = not cctxt.release.is_set()
    cctxt.release.set()
    thread.join(60)
    assert held and len(ended) == 1, 'the call waited for its driver'
    assert isinstance(ended[0], rpc.MessageBusUnreachable)
    assert 'being re-established' in str(ended[0])
    assert isinstance(ended[0], oslo_messaging.MessagingTimeout)


def test_calls_run_in_daemon_threads_and_hand_back_errors():
    outcome = rpc._calls().submit(lambda: 1 / 0)
    assert outcome.done.wait(5)
    assert isinstance(outcome.error, ZeroDivisionError)
    names = [t for t in threading.enumerate() if t.name == 'rpc-call']
    assert names and all(t.daemon for t in names)


def test_a_stop_during_start_up_leaves_no_server_consuming(
        inventory, fake_transport, monkeypatch, conf):
    """SIGTERM while start() is still bringing its servers up (systemd
    stopping a unit that is starting): every server started is stopped,
    and none is started after the stop.  It used to stop only those
    already up; the rest came up after it, and the worker served on,
    deaf to the SIGTERM it had already taken."""
    monkeypatch.setattr(concurrency, 'EXECUTOR', 'threading')
    conf.config(weight_classes=['RAMWeigher'],
                enabled_filters=fixtures.CORE_FILTERS,
                group='filter_scheduler')
    svc = service_mod.Service.create(transport=fake_transport)
    held, gate = threading.Event(), threading.Event()
    events: list = []
    real_get_server = rpc.get_server

    def get_server(*args, **kwargs):
        server = real_get_server(*args, **kwargs)
        start, stop = server.start, server.stop
        name = 'server%d' % sum(1 for e in events if e[0] == 'made')
        events.append(('made', name))

        def starting():
            if sum(1 for e in events if e[0] == 'start') == 1:
                held.set()
                gate.wait(10)
            start()
            events.append(('start', name))

        def stopping():
            events.append(('stop', name))
            stop()
        server.start, server.stop = starting, stopping
        return server
    monkeypatch.setattr(rpc, 'get_server', get_server)

    starter = threading.Thread(target=svc.start, daemon=True)
    starter.start()
    assert held.wait(10)
    stopper = threading.Thread(target=svc.stop, daemon=True)
    stopper.start()
    _until(svc._stopping)
    gate.set()
    starter.join(20)
    stopper.join(20)
    assert not starter.is_alive() and not stopper.is_alive()
    started = {name for what, name in events if what == 'start'}
    stopped = {name for what, name in events if what == 'stop'}
    # The second start was held while the stop came: two servers came
    # up, none after, and each is stopped.
    assert len(started) == 2, events
    assert stopped == started, events


def test_the_tidy_up_list_names_every_queue_a_service_consumes(
        start_service, monkeypatch, conf):
    """Benchmarks, demos and tests delete what a service declared from
    ``rpc.service_names``: a server it starts on a topic the list does
    not name leaves a queue on the broker for good."""
    targets = []
    real = rpc.get_server

    def recording(target, *args, **kwargs):
        targets.append(target)
        return real(target, *args, **kwargs)

    monkeypatch.setattr(rpc, 'get_server', recording)
    svc = start_service()
    queues, exchanges = rpc.service_names(svc.topic, [svc.host])
    assert targets
    for target in targets:
        assert target.topic in queues
        assert '%s.%s' % (target.topic, target.server) in queues
        assert '%s_fanout' % target.topic in exchanges
        if target.exchange:
            assert target.exchange in exchanges
