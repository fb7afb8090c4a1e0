"""How long a reply waits for its caller's queue (``scheduler.replies``)."""

import contextlib
import logging
import threading
import time

import oslo_messaging
from oslo_messaging._drivers import amqpdriver
from oslo_messaging._drivers import impl_rabbit
import pytest

from scheduler import replies


class _Driver:
    @contextlib.contextmanager
    def _get_connection(self, purpose):
        yield object()


class _Listener:
    driver = _Driver()


class _Incoming:
    """A call being served whose reply queue appears after ``missing``
    seconds (never with None)."""

    listener = _Listener()

    def __init__(self, missing, cache=None, reply_q='reply_x'):
        self.orig_msg_id = self.msg_id = 'msg-1'
        self.reply_q = reply_q
        self._obsolete_reply_queues = cache or \
            amqpdriver.ObsoleteReplyQueuesCache()
        self._created = replies.time.monotonic()
        self._missing = missing
        self.sent: list = []
        self.attempts = 0

    def _send_reply(self, conn, reply=None, failure=None):
        self.attempts += 1
        if not self._obsolete_reply_queues.reply_q_valid(self.reply_q,
                                                         self.msg_id):
            return
        if self._missing is None or \
                replies.time.monotonic() - self._created < self._missing:
            raise oslo_messaging.MessageUndeliverable(
                Exception('NO_ROUTE'), '', self.reply_q, {})
        self.sent.append(reply)


@pytest.fixture
def quick(monkeypatch, conf):
    """A short retry of 0.2 s, a long one of 3 s, no broker trouble."""
    conf.config(kombu_missing_consumer_retry_timeout=0,
                group='oslo_messaging_rabbit')
    monkeypatch.setattr(replies, '_short_wait', lambda: 0.2)
    monkeypatch.setattr(replies, 'RECOVERY_WAIT', 3.0)
    monkeypatch.setattr(replies, 'RETRY_INTERVAL', 0.02)
    monkeypatch.setattr(replies._WATCH, 'last_trouble', None)
    monkeypatch.setattr(replies._WATCH, 'stopping', False)
    monkeypatch.setattr(replies._WATCH, '_told', None)
    monkeypatch.setattr(replies._WATCH, '_held', 0)
    monkeypatch.setattr(replies._WATCH, '_last', 0.0)
    monkeypatch.setattr(replies._WATCH, '_kinds', set())


class _Clock:
    """``replies``' time, without waiting: each thread has its own
    monotonic clock, which ``sleep`` moves on at once, running what
    ``at`` put at a time it passes."""

    def __init__(self):
        self._local = threading.local()
        self._due: list = []

    def monotonic(self) -> float:
        return getattr(self._local, 'now', 0.0)

    def sleep(self, seconds: float) -> None:
        self._local.now = self.monotonic() + seconds
        for when, func in list(self._due):
            if when <= self._local.now:
                self._due.remove((when, func))
                func()

    def at(self, when: float, func) -> None:
        self._due.append((when, func))


@pytest.fixture
def clock(quick, monkeypatch):
    """``quick``, on a clock of its own: no test reads the wall clock
    (they did, and a loaded machine could make them fail)."""
    fake = _Clock()
    monkeypatch.setattr(replies, 'time', fake)
    return fake


def _broker_lost():
    logger = logging.getLogger(replies._DRIVER_LOGGER)
    replies.watch_broker()
    logger.error('[x] AMQP server on 127.0.0.1:5672 is unreachable')


def test_a_dead_caller_costs_the_short_retry(clock):
    incoming = _Incoming(missing=None)
    replies.send(incoming, 'answer')
    # The short retry, well below the long wait.
    assert 0.2 <= clock.monotonic() < 3.0
    # Its next replies go at once.
    again = _Incoming(missing=None, cache=incoming._obsolete_reply_queues)
    replies.send(again, 'answer')
    assert again.attempts <= 1 and again.sent == []


def test_a_live_caller_after_a_broker_restart_gets_its_reply(clock):
    """Its queue comes back after the short retry: delivered."""
    _broker_lost()
    incoming = _Incoming(missing=0.6)
    replies.send(incoming, 'answer')
    assert incoming.sent == ['answer']


def test_away_from_a_restart_the_same_caller_is_dropped(clock):
    """What the long wait is for: the short retry drops it."""
    incoming = _Incoming(missing=0.6)
    replies.send(incoming, 'answer')
    assert incoming.sent == []


def test_after_a_restart_a_dead_caller_costs_the_long_wait_at_most(clock):
    _broker_lost()
    incoming = _Incoming(missing=None)
    replies.send(incoming, 'answer')
    assert 3.0 <= clock.monotonic() < 3.0 + 2 * replies.RETRY_INTERVAL
    assert incoming.sent == []


def test_a_broker_restarted_again_restarts_the_long_wait(clock):
    """A caller cannot declare its queue while the broker keeps
    restarting: the long wait counts from the last restart."""
    _broker_lost()
    incoming = _Incoming(missing=4.0)
    clock.at(2.0, _broker_lost)
    replies.send(incoming, 'answer')
    assert incoming.sent == ['answer']


def test_a_stopping_service_waits_the_short_retry_only(clock):
    """Just after a restart, but stopping: the reply to a caller that is
    gone must not hold the service's exit for the long wait."""
    _broker_lost()
    replies.stopping()
    incoming = _Incoming(missing=None)
    replies.send(incoming, 'answer')
    assert 0.2 <= clock.monotonic() < 3.0
    assert incoming.sent == []


def test_at_most_half_the_workers_wait_long(quick, conf, monkeypatch):
    conf.config(executor_thread_pool_size=4)
    _broker_lost()
    ended: dict = {}

    def reply(n):
        started = time.monotonic()
        replies.send(_Incoming(missing=None, reply_q='reply_%d' % n))
        ended[n] = time.monotonic() - started
    threads = [threading.Thread(target=reply, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert sorted(1 if t >= 1.5 else 0 for t in ended.values()) == \
        [0, 0, 1, 1]
    assert replies._LONG_WAITS._count == 0


def test_a_caller_dropped_just_after_a_restart_is_not_dropped_for_long(
        clock, conf):
    """No long wait left: its reply goes after the short retry, but its
    next replies are tried again (its queue may come back)."""
    conf.config(executor_thread_pool_size=2)
    _broker_lost()
    replies._LONG_WAITS._count = 1
    try:
        first = _Incoming(missing=None)
        replies.send(first)
        assert first._obsolete_reply_queues.reply_q_valid('reply_x', 'm')
    finally:
        replies._LONG_WAITS._count = 0


def test_the_broker_watch_sees_the_rabbit_drivers_lines():
    """The driver logs through the logger the watch filters."""
    assert impl_rabbit.LOG.logger.name == replies._DRIVER_LOGGER


def test_only_amqp_messages_are_taken_over():
    class Other:
        def reply(self, reply=None, failure=None):
            return 'own'
    other = Other()
    replies.take_over(other)
    assert other.reply() == 'own'
    incoming = _Incoming(missing=0)
    replies.take_over(incoming)
    incoming.reply('answer')
    assert incoming.sent == ['answer']


def test_the_drivers_message_has_what_send_uses():
    """When this fails, oslo.messaging's AMQP reply changed: read
    ``replies.send`` again."""
    for name in ('_send_reply', 'reply'):
        assert hasattr(amqpdriver.AMQPIncomingMessage, name)
    assert hasattr(amqpdriver.AMQPDriverBase, '_get_connection')
    assert hasattr(amqpdriver.ObsoleteReplyQueuesCache, 'add')


def test_the_drivers_own_message_is_taken_over(quick):
    """With oslo.messaging's own incoming message class: ``send`` is
    what the server will call, and it delivers through the driver."""
    sent = []

    class Conn:
        def direct_send(self, reply_q, msg):
            sent.append(reply_q)

    class Driver:
        @contextlib.contextmanager
        def _get_connection(self, purpose):
            yield Conn()

    class Listener:
        driver = Driver()

    message = amqpdriver.AMQPIncomingMessage(
        Listener(), {}, {}, 'unique', 'msg-1', 'reply_live', None,
        amqpdriver.ObsoleteReplyQueuesCache(), None)
    replies.take_over(message)
    assert message.reply.func is replies.send
    message.reply({'answer': 42})
    assert sent == ['reply_live']


def test_a_broker_that_stays_away_is_one_line_a_minute(clock, caplog):
    """The driver writes a line for every failed attempt of every
    connection, every 2 s; the operator reads one a minute, with the
    count of those held back, and the line of the reconnection."""
    replies.watch_broker()
    logger = logging.getLogger(replies._DRIVER_LOGGER)
    caplog.set_level(logging.INFO, logger=replies._DRIVER_LOGGER)
    for _ in range(31):  # 0 s to 60 s
        logger.error('Connection failed: %s (retrying in %s seconds)',
                     '[Errno 111] ECONNREFUSED', 2.0)
        logger.error('[%(connection_id)s] AMQP server on %(hostname)s is '
                     'unreachable', {'connection_id': 'c2',
                                     'hostname': '127.0.0.1'})
        clock.sleep(2)
    # A connection that got through logs no line; another outage
    # after a quiet while is told at once.
    clock.sleep(20)
    logger.error('[c3] AMQP server on 127.0.0.1 is unreachable')
    clock.sleep(2)
    logger.error('[c3] AMQP server on 127.0.0.1 is unreachable')
    # Another failure (the password was rotated meanwhile): told.
    logger.error('[c4] AMQP server on 127.0.0.1 is unreachable: '
                 'ACCESS_REFUSED')
    logger.info('[c3] Reconnected to AMQP server on 127.0.0.1:5672')
    lines = [r.getMessage() for r in caplog.records
             if r.name == replies._DRIVER_LOGGER]
    assert lines == [
        'Connection failed: [Errno 111] ECONNREFUSED (retrying in 2.0 '
        'seconds)',
        '[c2] AMQP server on 127.0.0.1 is unreachable',
        'Connection failed: [Errno 111] ECONNREFUSED (retrying in 2.0 '
        'seconds) (58 more such line(s) held back in the last 60 s)',
        '[c3] AMQP server on 127.0.0.1 is unreachable (1 more such line(s) '
        'held back in the last 22 s)',
        '[c4] AMQP server on 127.0.0.1 is unreachable: ACCESS_REFUSED '
        '(1 more such line(s) held back in the last 2 s)',
        '[c3] Reconnected to AMQP server on 127.0.0.1:5672']
    assert replies._WATCH.recovering()
