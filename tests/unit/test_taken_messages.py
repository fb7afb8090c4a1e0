"""taken_messages: what it relies on in oslo.messaging, and what it does.

The attributes are not oslo.messaging's public API: these tests fail
when another version renames them, rather than shutdowns silently
swallowing messages again (tests/functional/test_cast_delivery.py
shows the loss on the real broker).
"""

import inspect
import threading

from oslo_messaging._drivers import amqpdriver
from oslo_messaging._drivers import base as driver_base
from oslo_messaging._drivers import impl_rabbit
from oslo_messaging import server as server_mod

from scheduler import taken_messages


def test_oslo_messaging_still_has_what_it_uses():
    assert callable(server_mod.MessageHandlingServer._on_incoming)
    assert 'self._work_executor = ' in inspect.getsource(
        server_mod.MessageHandlingServer.start)
    adapter = inspect.getsource(driver_base.PollStyleListenerAdapter)
    assert 'self._poll_style_listener = ' in adapter
    listener = inspect.getsource(amqpdriver.AMQPListener.__init__)
    assert 'self.incoming = []' in listener
    assert 'self.conn = conn' in listener
    rabbit = inspect.getsource(impl_rabbit.Connection.__init__)
    assert 'self._consumers = {}' in rabbit
    assert 'self._connection_lock = ' in rabbit
    assert 'def cancel(self, tag)' in inspect.getsource(
        impl_rabbit.Consumer)
    # Acknowledged when received: the reason this module exists.
    assert 'acknowledge' in inspect.getsource(
        amqpdriver.RpcAMQPListener.__call__)


class _Consumer:
    def __init__(self, listener, late: list):
        self.listener = listener
        self.late = late
        self.cancelled = []

    def cancel(self, tag):
        # The broker's deliveries before its cancel-ok are read now.
        self.listener.incoming.extend(self.late)
        self.cancelled.append(tag)


class _Fake:
    pass


def _server(incoming: list, late: list):
    listener = _Fake()
    listener.incoming = incoming
    consumer = _Consumer(listener, late)
    listener.conn = _Fake()
    listener.conn.connection = _Fake()
    listener.conn.connection._connection_lock = threading.Lock()
    listener.conn.connection._consumers = {consumer: 'tag-1'}
    server = _Fake()
    server.listener = _Fake()
    server.listener._poll_style_listener = listener
    server.submitted = []
    server._on_incoming = server.submitted.append
    return server, consumer


def test_cancels_then_serves_every_taken_message_in_order():
    server, consumer = _server(['a', 'b'], late=['c'])
    assert taken_messages.serve_taken(server) == 3
    assert consumer.cancelled == ['tag-1']
    assert server.submitted == [['a'], ['b'], ['c']]


def test_what_was_taken_is_not_held_back_by_the_bound():
    server, _consumer = _server(['a'], late=[])
    server._work_executor = _Fake()
    calls = []
    server._work_executor.unbound = lambda: calls.append(
        list(server.submitted))
    assert taken_messages.serve_taken(server) == 1
    # Unbounded before anything was handed over.
    assert calls == [[]]


def test_other_listeners_are_left_alone():
    server = _Fake()
    server.listener = _Fake()
    assert taken_messages.serve_taken(server) == 0
