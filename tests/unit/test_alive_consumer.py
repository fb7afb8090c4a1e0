"""The kombu consumer of liveness messages (scheduler.alive_consumer):
decoding, trust per message, rejections, batches and its lifecycle, on
kombu's in-memory transport."""

import json
import threading
import time
import uuid

import kombu
import pytest

from scheduler import alive_consumer
from scheduler import context
from scheduler import rejections
from scheduler import rpc


class Endpoint:
    """Stands for the manager's ``AliveEndpoint``."""

    def __init__(self, fail_on=None):
        self.taken = []
        self.fail_on = fail_on

    def report_alive(self, ctxt, nodes=None, sent_at=None,
                     **newer_arguments):
        if nodes == self.fail_on:
            raise RuntimeError('broken endpoint')
        self.taken.append((ctxt.sender, ctxt.user_id, ctxt.is_admin, nodes,
                           sent_at, newer_arguments))


class Message:
    """What the consumer reads of a kombu message."""

    def __init__(self, body, user_id=None):
        self.body = body
        self.properties = {} if user_id is None else {'user_id': user_id}


def _body(method='report_alive', args=None, version='1.6', ctxt=None,
          envelope='2.0') -> bytes:
    message = {'method': method, 'version': version,
               'args': {'nodes': [['h1', 'n1', 'd1']], 'sent_at': 5.0}
               if args is None else args,
               '_unique_id': uuid.uuid4().hex}
    for key, value in (ctxt or {'user': 'u', 'project': 'p'}).items():
        message['_context_%s' % key] = value
    return json.dumps({'oslo.version': envelope,
                       'oslo.message': json.dumps(message)}).encode()


def _nested(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


@pytest.fixture
def rejected(monkeypatch):
    got = []
    monkeypatch.setattr(rejections, 'reject',
                        lambda method, error, what='call':
                        got.append((method, type(error).__name__, what)))
    return got


def test_the_sender_is_the_brokers_user_id_not_the_context():
    endpoint = Endpoint()
    forged = _body(ctxt={'user': 'admin', 'is_admin': True,
                         'roles': ['admin']})
    alive_consumer.serve(endpoint, Message(forged, user_id=b'compute-1'))
    alive_consumer.serve(endpoint, Message(forged))
    assert [t[0] for t in endpoint.taken] == ['compute-1', None]
    # The context's own fields are the sender's, as through the server.
    assert endpoint.taken[0][1:3] == ('admin', True)
    assert endpoint.taken[0][3:5] == ([['h1', 'n1', 'd1']], 5.0)


def test_each_message_has_its_own_context_built_where_read():
    # A compute makes a new context (a new request id) for each report:
    # each message's is its own, its fields read as a RequestContext's,
    # its sender never one its values name.
    endpoint = Endpoint()
    for n in range(3):
        alive_consumer.serve(endpoint, Message(_body(ctxt={
            'user': 'u%d' % n, 'request_id': 'req-%d' % n,
            'sender': 'admin', 'scheduler_trusted_sender': 'admin'}), 'c'))
    assert [t[:3] for t in endpoint.taken] == [
        ('c', 'u0', False), ('c', 'u1', False), ('c', 'u2', False)]

    got = []
    endpoint.report_alive = lambda ctxt, **kw: got.append(ctxt)
    alive_consumer.serve(endpoint, Message(_body(ctxt={
        'user': 'u', 'request_id': 'req-x', 'roles': ['r']}), None))
    deferred = got[0]
    assert deferred.sender is None
    assert deferred.request_id == 'req-x' and deferred.roles == ['r']
    request = deferred.request()
    assert request is deferred.request()  # built once
    assert isinstance(request, context.RequestContext)
    assert request.sender is None
    assert request.to_dict()['request_id'] == 'req-x'


def test_log_lines_about_a_message_name_its_request():
    from oslo_context import context as oslo_context
    first = context.Deferred({'request_id': 'req-1'}, 'c')
    second = context.Deferred({'request_id': 'req-2'}, 'c')
    first.request()
    second.request()
    context.for_log(first)
    assert oslo_context.get_current().request_id == 'req-1'
    context.for_log(second)
    assert oslo_context.get_current().request_id == 'req-2'


def test_arguments_newer_computes_add_are_ignored():
    endpoint = Endpoint()
    alive_consumer.serve(endpoint, Message(_body(
        args={'nodes': [['h', 'n', 'd']], 'sent_at': 1.0, 'more': 2,
              'ctxt': 3}), 'c'))
    assert endpoint.taken == [('c', 'u', False, [['h', 'n', 'd']], 1.0, {})]


@pytest.mark.parametrize('body, reason', [
    (b'not json', 'Malformed'),
    (b'[1, 2]', 'Malformed'),
    (json.dumps({'oslo.version': '3.0', 'oslo.message': '{}'}).encode(),
     'Malformed'),
    (json.dumps({'oslo.version': '2.0', 'oslo.message': '[]'}).encode(),
     'Malformed'),
    (json.dumps({'oslo.version': '2.0'}).encode(), 'Malformed'),
    (_body(method='sync_instance_info'), 'InvalidRequest'),
    (_body(version='2.0'), 'InvalidRequest'),
    (_body(version='1.7'), 'InvalidRequest'),
    (_body(version='one'), 'InvalidRequest'),
    (_body(args=[1]), 'InvalidRequest'),
    (_body(args={'nodes': _nested(100)}), 'InvalidRequest'),
])
def test_malformed_messages_are_rejected_one_line_each(body, reason,
                                                       rejected):
    endpoint = Endpoint()
    alive_consumer.serve(endpoint, Message(body, 'c'))
    assert endpoint.taken == []
    assert len(rejected) == 1
    assert rejected[0][1:] == (reason, 'cast')


def test_messages_of_older_api_versions_are_served():
    endpoint = Endpoint()
    alive_consumer.serve(endpoint, Message(_body(version='1.0'), 'c'))
    assert len(endpoint.taken) == 1


# -- the consumer's loop, on kombu's in-memory transport -----------------

@pytest.fixture
def memory_broker(monkeypatch, conf):
    """Every connection the consumer opens is one to a kombu in-memory
    broker of the test's own; ``opened`` counts them and
    ``refuse`` makes the next ones fail."""
    state = {'opened': 0, 'refuse': 0}
    vhost = 'alive-%s' % uuid.uuid4().hex

    def connection(conf=None, transport_url=None, connect_timeout=10):
        state['opened'] += 1
        if state['refuse']:
            state['refuse'] -= 1
            return kombu.Connection('amqp://127.0.0.1:1//',
                                    connect_timeout=0.1)
        return kombu.Connection('memory:///%s' % vhost)
    monkeypatch.setattr(rpc, 'amqp_connection', connection)
    monkeypatch.setattr(alive_consumer, 'WAKE_EVERY', 0.05)
    conf.config(transport_url='rabbit://guest:guest@127.0.0.1:5672/')

    def publish(count, user_id='compute-1', body=None):
        with kombu.Connection('memory:///%s' % vhost) as conn:
            producer = conn.Producer()
            queue = alive_consumer.queue_of()
            for n in range(count):
                producer.publish(body or _body(args={
                    'nodes': [['h%d' % n, 'n', 'd']], 'sent_at': 1.0}),
                    exchange=queue.exchange, routing_key=queue.routing_key,
                    declare=[queue], content_type='application/json',
                    content_encoding='utf-8', user_id=user_id)
    state['publish'] = publish
    return state


def _wait(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, 'waited too long'
        time.sleep(0.01)


def test_the_consumer_serves_batches_and_stops(memory_broker):
    endpoint = Endpoint(fail_on=[['h3', 'n', 'd']])
    consumer = alive_consumer.AliveConsumer(endpoint, prefetch=4)
    memory_broker['publish'](10)
    consumer.start()
    try:
        # One message the endpoint cannot serve does not end the rest.
        _wait(lambda: len(endpoint.taken) == 9)
        memory_broker['publish'](3)
        _wait(lambda: len(endpoint.taken) == 12)
    finally:
        consumer.stop()
        consumer.wait()
    assert {t[3][0][0] for t in endpoint.taken} == {
        'h%d' % n for n in range(10) if n != 3} | {'h0', 'h1', 'h2'}
    assert all(t[0] == 'compute-1' for t in endpoint.taken)
    assert not consumer._thread.is_alive()


def test_a_batch_is_served_as_one_where_the_endpoint_can(memory_broker):
    import contextlib
    batches = []

    class Batching(Endpoint):
        @contextlib.contextmanager
        def batch(self):
            batches.append([])
            yield
            batches[-1].append('end')

        def report_alive(self, ctxt, nodes=None, sent_at=None, **newer):
            super().report_alive(ctxt, nodes, sent_at, **newer)
            batches[-1].append(nodes[0][0])
    endpoint = Batching()
    consumer = alive_consumer.AliveConsumer(endpoint, prefetch=4)
    memory_broker['publish'](6)
    consumer.start()
    try:
        _wait(lambda: len(endpoint.taken) == 6)
    finally:
        consumer.stop()
        consumer.wait()
    served = [host for batch in batches for host in batch[:-1]]
    assert sorted(served) == ['h%d' % n for n in range(6)]
    assert all(batch[-1] == 'end' and len(batch) <= 5 for batch in batches)


def test_a_stop_leaves_the_rest_of_the_batch_to_the_broker(
        memory_broker, monkeypatch):
    """A stop asked while a batch is served ends it after the message in
    hand: the rest is not served by the stopping consumer (each may cost
    inventory reads) and not lost either: the next consumer takes it."""
    consumer = None

    class Stopping(Endpoint):
        def report_alive(self, ctxt, nodes=None, sent_at=None, **newer):
            super().report_alive(ctxt, nodes, sent_at, **newer)
            consumer.stop()
    first = Stopping()
    consumer = alive_consumer.AliveConsumer(first, prefetch=5)
    memory_broker['publish'](5)
    with monkeypatch.context() as patch:
        # As RabbitMQ requeues what a closed channel left unacknowledged
        # (kombu's in-memory transport drops it by default; it also
        # acknowledges one message where asked for several, so only
        # while the first consumer closes).
        patch.setattr(kombu.transport.memory.Channel, 'do_restore', True)
        consumer.start()
        consumer.wait()
    assert len(first.taken) == 1
    second = Endpoint()
    next_consumer = alive_consumer.AliveConsumer(second, prefetch=5)
    next_consumer.start()
    try:
        _wait(lambda: len(second.taken) == 4)
    finally:
        next_consumer.stop()
        next_consumer.wait()
    assert ({t[3][0][0] for t in first.taken + second.taken}
            == {'h%d' % n for n in range(5)})


def test_a_broker_that_goes_away_is_reached_again(memory_broker,
                                                  monkeypatch):
    endpoint = Endpoint()
    consumer = alive_consumer.AliveConsumer(endpoint)
    memory_broker['refuse'] = 2
    monkeypatch.setattr(alive_consumer, 'RECONNECT_MAX', 0.04)
    slept = []
    wait = consumer._stop.wait

    def pause(timeout=None):
        if timeout != alive_consumer.GATHER:
            slept.append(timeout)
        return wait(0.01)
    monkeypatch.setattr(consumer._stop, 'wait', pause)
    memory_broker['publish'](2)
    consumer.start()
    try:
        _wait(lambda: len(endpoint.taken) == 2)
        assert memory_broker['opened'] == 3 and len(slept) == 2
        # A connection lost while consuming is opened again.
        broken = threading.Event()

        def drain(self, **kwargs):
            broken.set()
            raise ConnectionResetError('broker restarted')
        with monkeypatch.context() as patch:
            patch.setattr(kombu.Connection, 'drain_events', drain)
            _wait(broken.is_set)
        memory_broker['publish'](2)
        _wait(lambda: len(endpoint.taken) == 4)
        assert consumer.consuming >= 2
    finally:
        consumer.stop()
        consumer.wait()


def test_a_stop_while_the_broker_is_away_ends_the_start(memory_broker):
    consumer = alive_consumer.AliveConsumer(Endpoint())
    memory_broker['refuse'] = 10 ** 6
    starting = threading.Thread(target=consumer.start)
    starting.start()
    _wait(lambda: memory_broker['opened'] >= 1)
    consumer.stop()
    starting.join(10)
    consumer.wait()
    assert not starting.is_alive() and consumer.consuming == 0


def test_a_refused_login_fails_the_start(memory_broker, monkeypatch):
    from scheduler import broker_login
    consumer = alive_consumer.AliveConsumer(Endpoint())
    memory_broker['refuse'] = 1
    monkeypatch.setattr(broker_login, 'is_refusal', lambda e: True)
    with pytest.raises(Exception):
        consumer.start()


def test_fake_transports_keep_the_rpc_server(fake_transport):
    server = alive_consumer.get_server(object(), 'h1', fake_transport, 4)
    assert not isinstance(server, alive_consumer.AliveConsumer)


def test_rabbit_transports_get_the_consumer(conf):
    conf.config(transport_url='rabbit://guest:guest@127.0.0.1:5672/')
    server = alive_consumer.get_server(object(), 'h1', None, 4)
    assert isinstance(server, alive_consumer.AliveConsumer)


def test_a_context_made_here_is_never_the_senders():
    # The consumer sets ``sender`` from the message, whatever it is by
    # default for a context made in the process.
    assert context.RequestContext().sender == context.LOCAL_SENDER


def test_a_deferred_context_copies_and_prints_without_building():
    import copy
    deferred = context.Deferred({'request_id': 'req-c'}, 'c')
    copied = copy.copy(deferred)
    assert copied.sender == 'c' and copied.request_id == 'req-c'
    assert deferred._request is None
    with pytest.raises(AttributeError):
        deferred._nothing


def test_a_broker_away_for_many_attempts_is_one_warning(
        memory_broker, monkeypatch, caplog):
    """Each failed attempt was a WARNING (every 10 s for as long as the
    broker stayed away, the exception appended to each)."""
    endpoint = Endpoint()
    consumer = alive_consumer.AliveConsumer(endpoint)
    memory_broker['refuse'] = 6
    monkeypatch.setattr(alive_consumer, 'RECONNECT_MAX', 0.01)
    memory_broker['publish'](1)
    consumer.start()
    try:
        _wait(lambda: len(endpoint.taken) == 1)
    finally:
        consumer.stop()
        consumer.wait()
    warnings = [r.getMessage() for r in caplog.records
                if r.name == alive_consumer.LOG.logger.name
                and r.levelname == 'WARNING']
    assert len(warnings) == 1, warnings
