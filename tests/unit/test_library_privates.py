"""Each private name of a library the scheduler still relies on, with
a test that fails when a new release of that library moves it.

The places (and why no public API does) are in each module's own
docstring; the others are tested where they are used:
``trust.RAW_MESSAGE_ATTRIBUTE`` and ``trust.FAKE_DRIVER_MODULE`` in
test_trust.py, ``amqpdriver.ACK_REQUEUE_EVERY_SECONDS_MAX`` in
test_rpc.py, the notification listener's
``_poll_style_listener``, ``_on_incoming``, ``_consumers`` and
``_connection_lock`` in test_taken_messages.py, and the AMQP driver's
``_send_reply``, ``_obsolete_reply_queues`` and ``_get_connection`` in
test_replies.py.
"""

import inspect
import logging
import sys
import threading

from oslo_config import cfg
import oslo_messaging
from oslo_messaging._drivers import amqpdriver
from oslo_messaging._drivers import base as om_drivers
from oslo_messaging._drivers import impl_rabbit
from oslo_messaging import server as om_server

from scheduler import concurrency
from scheduler import rejections
from scheduler import rpc


def test_the_rpc_server_builds_its_executor_from_executor_cls(fake_transport):
    # rpc.bound_intake replaces the class oslo.messaging's server keeps
    # and builds its executor from at start.
    assert 'self._executor_cls(' in inspect.getsource(
        om_server.MessageHandlingServer)
    server = rpc.get_server(
        oslo_messaging.Target(topic='privates', server='h1'), [],
        transport=fake_transport)
    assert getattr(server._executor_cls, 'bounded', False)


def test_the_amqp_driver_opens_its_reply_queue_in_get_reply_q(
        fake_transport):
    # rpc._reply_queue_open reads transport._driver._get_reply_q.
    assert isinstance(fake_transport._driver,
                      om_drivers.BaseDriver)
    assert issubclass(impl_rabbit.RabbitDriver, amqpdriver.AMQPDriverBase)
    opener = amqpdriver.AMQPDriverBase._get_reply_q
    assert list(inspect.signature(opener).parameters) == ['self']


def test_the_records_rejections_takes_are_still_logged_there():
    modules = {'oslo.messaging._drivers.impl_rabbit': impl_rabbit,
               'oslo_messaging._drivers.amqpdriver': amqpdriver}
    for logger, start in rejections.DroppedMessageFilter.RECORDS:
        module = modules[logger]
        assert module.LOG.name == logger
        assert start in inspect.getsource(module)


# -- alive_consumer: oslo.messaging's wire format and topic queues -----------

def _cast_body(ctxt: dict, method: str, args: dict, version: str) -> bytes:
    """A cast's body as the AMQP driver publishes it (``_send``: the
    context packed into the message, a unique id, the envelope), then
    JSON as kombu writes it."""
    from oslo_messaging._drivers import amqp as rpc_amqp
    from oslo_messaging._drivers import common as rpc_common
    from oslo_serialization import jsonutils
    message = {'method': method, 'args': args, 'version': version}
    rpc_amqp.pack_context(message, ctxt)
    rpc_amqp._add_unique_id(message)
    return jsonutils.dumps(rpc_common.serialize_msg(message)).encode()


def test_the_alive_consumer_reads_the_amqp_drivers_casts():
    from scheduler import alive_consumer
    # The driver's cast path still packs the context and wraps it in
    # the envelope the consumer decodes.
    source = inspect.getsource(amqpdriver.AMQPDriverBase._send)
    assert 'rpc_amqp.pack_context(msg, ctxt)' in source
    assert 'msg = rpc_common.serialize_msg(msg)' in source
    body = _cast_body({'user_id': 'u1', 'request_id': 'req-1'},
                      'report_alive', {'nodes': [['h', 'n', 'd']],
                                       'sent_at': 1.5}, '1.6')
    assert alive_consumer.decode(body) == (
        'report_alive', {'nodes': [['h', 'n', 'd']], 'sent_at': 1.5},
        {'user_id': 'u1', 'request_id': 'req-1'}, '1.6')


def _declared_topic_queue(**settings):
    """The consumer ``Connection.declare_topic_consumer`` declares with
    the connection's ``settings``."""
    declared = []
    defaults = dict(durable=False, amqp_auto_delete=False,
                    rabbit_ha_queues=False, enable_cancel_on_failover=False,
                    rabbit_quorum_queue=False,
                    rabbit_quorum_queue_config=impl_rabbit.QuorumMemConfig(
                        0, 0, 0))
    defaults.update(settings)
    connection = type('Connection', (), dict(
        defaults, declare_consumer=lambda self, c: declared.append(c)))()
    impl_rabbit.Connection.declare_topic_consumer(
        connection, 'ex', 'ex_alive')
    return declared[0]


def test_the_alive_queue_is_declared_as_oslo_messaging_declares_it(conf):
    from oslo_messaging import opts as om_opts

    from scheduler import alive_consumer
    # How the driver's connection derives ``durable`` from the options.
    assert 'self.amqp_durable_queues or self.rabbit_quorum_queue' in \
        inspect.getsource(impl_rabbit.Connection)
    # On CONF itself, as the rabbit driver registers them: options
    # registered through the fixture are unregistered after the test,
    # and later tests setting them before any driver loads would fail.
    for group, options in om_opts.list_opts():
        if group == 'oslo_messaging_rabbit':
            cfg.CONF.register_opts(options, group=group)
    conf.config(transport_url='rabbit://u:p@127.0.0.1:5672/')
    cases = [({}, {}),
             ({'amqp_durable_queues': True, 'amqp_auto_delete': True},
              {'durable': True, 'amqp_auto_delete': True}),
             ({'rabbit_ha_queues': True}, {'rabbit_ha_queues': True}),
             ({'rabbit_quorum_queue': True,
               'rabbit_quorum_delivery_limit': 3,
               'rabbit_quorum_max_memory_length': 5,
               'rabbit_quorum_max_memory_bytes': 7},
              {'durable': True, 'rabbit_quorum_queue': True,
               'rabbit_quorum_queue_config': impl_rabbit.QuorumMemConfig(
                   3, 5, 7)})]
    names = ('amqp_durable_queues', 'amqp_auto_delete', 'rabbit_ha_queues',
             'rabbit_quorum_queue', 'rabbit_quorum_delivery_limit',
             'rabbit_quorum_max_memory_length',
             'rabbit_quorum_max_memory_bytes')
    for options, settings in cases:
        for name in names:
            cfg.CONF.clear_override(name, group='oslo_messaging_rabbit')
        conf.config(group='oslo_messaging_rabbit', **options)
        ours = alive_consumer.queue_of()
        theirs = _declared_topic_queue(**settings)
        assert ours.queue_arguments == theirs.queue_arguments, options
        assert ours.durable == theirs.durable, options
        assert ours.auto_delete == theirs.queue_auto_delete, options
        assert (ours.exchange.type, ours.exchange.durable,
                ours.exchange.auto_delete) == (
            theirs.exchange.type, theirs.exchange.durable,
            theirs.exchange.auto_delete), options
        assert ours.routing_key == ours.name


def test_loggers_take_the_logging_modules_lock_by_its_name():
    # concurrency._defer_native_log_records swaps ``logging._lock`` for
    # a native lock: that only helps while logging takes the lock it
    # finds under that name when a logger's level cache misses.
    taken = []
    real = logging._lock

    class Recording:
        def acquire(self, *args, **kwargs):
            taken.append(True)
            return real.acquire(*args, **kwargs)

        def release(self):
            real.release()

        def __enter__(self):
            self.acquire()
            return self

        def __exit__(self, *exc):
            self.release()

    logging._lock = Recording()
    try:
        logging.getLogger('library-privates-%d' % id(taken)).isEnabledFor(
            logging.INFO)
    finally:
        logging._lock = real
    assert taken


def test_current_frames_gives_a_native_threads_stack():
    # concurrency.thread_stacks logs what a thread left behind at stop
    # is doing from ``sys._current_frames()``.
    parked = threading.Event()
    release = threading.Event()

    def park_here_for_the_test():
        parked.set()
        release.wait(10)

    thread = threading.Thread(target=park_here_for_the_test)
    thread.start()
    try:
        assert parked.wait(10)
        assert thread.ident in sys._current_frames()
        assert 'park_here_for_the_test' in concurrency.thread_stacks([thread])
    finally:
        release.set()
        thread.join(10)
