"""How long a reply waits for its caller's reply queue.

oslo.messaging's rabbit driver publishes a reply with the mandatory
flag: when the caller's ``reply_<uuid>`` queue does not exist it
publishes it again every quarter second for
``kombu_missing_consumer_retry_timeout`` seconds, holding the worker
that served the call, then drops it and every other reply to that queue
for a minute.  Two kinds of callers have no queue:

* a dead one, whose replies must cost little: the service waits
  ``config.REPLY_RETRY_SECONDS``;
* a live one just after a broker restart, which declares its reply
  queue again only after its reconnection back-off, and the service may
  be back first: dropped, its calls would each wait their whole timeout.

When the service last lost the broker tells them apart: every caller it
serves just after a restart has just published its call, so is alive.
For ``RECOVERY_SECONDS`` after this process last lost the broker a
reply waits longer (``RECOVERY_WAIT``, counted from the broker's last
trouble), and its queue is never dropped for a minute.  At most half
the executor's workers wait longer than the short retry at a time
(``_LONG_WAITS``).

A stopping service waits the short retry only (``stopping()``): its
callers may have given up, and a long wait would hold the worker's exit
past the stop budget; a live caller times out and tries again.
"""

import functools
import logging as std_logging
import re
import time

from oslo_config import cfg
from oslo_log import log as logging

from scheduler import concurrency

LOG = logging.getLogger(__name__)
CONF = cfg.CONF

#: Seconds after this process last lost the broker during which a reply
#: may wait for its queue longer than the short retry.
RECOVERY_SECONDS = 60.0
#: How long a reply may wait for its queue in that period: past the
#: slowest reconnection back-off of a caller (oslo.messaging's
#: ``rabbit_interval_max``, 30 s by default).
RECOVERY_WAIT = 35.0
#: Seconds between two attempts to deliver a reply.
RETRY_INTERVAL = 0.25

#: The rabbit driver's logger (oslo.log names the loggers of oslo_*
#: modules oslo.*): it says when a connection fails and when it is back.
_DRIVER_LOGGER = 'oslo.messaging._drivers.impl_rabbit'


#: What the rabbit driver's lines of a failed connection attempt say.
_ATTEMPT_FAILED = ('Connection failed', 'is unreachable',
                   'closed the connection')
#: Seconds between two of those lines let through while the broker
#: stays away (the driver writes one per connection every
#: ``rabbit_interval_max``).
REPEAT_EVERY = 60.0
#: Seconds without such a line after which the next one begins a new
#: outage and is let through (a connection that came back after failed
#: attempts at start logs no reconnection line).
NEW_OUTAGE_AFTER = 10.0
#: What varies between lines of one failure: connection ids, pauses.
_NOT_THE_FAILURE = re.compile(r'\[[^]]*\]|[0-9.]+')


def _append(record: std_logging.LogRecord, text: str) -> None:
    record.msg, record.args = '%s %s' % (record.getMessage(), text), None


class _BrokerWatch(std_logging.Filter):
    """Notes when this process last lost (or regained) the broker, and
    keeps a broker that stays away to one line a minute.

    oslo.messaging offers no hook for its reconnections, only its log
    lines: a failure is a WARNING or ERROR line of the rabbit driver, a
    reconnection an INFO line.  A filter sees every record the driver
    logs at a level its logger is enabled for.  Of the lines of failed
    attempts it lets the first through, then one every
    ``REPEAT_EVERY`` seconds saying how many it held back (as DEBUG
    lines with debug on; each
    connection of each worker wrote one every 2 s: an ERROR a second
    for a service of two workers whose broker was down); the
    reconnection line says how many were held back since.
    """

    def __init__(self):
        super().__init__()
        self.last_trouble: float | None = None
        #: Set once, when the service begins to stop.
        self.stopping = False
        #: When the last failed attempt's line was let through.
        self._told: float | None = None
        self._held = 0
        #: When the last line of a failed attempt came, told or held.
        self._last = 0.0
        #: What the lines told in this outage said, less
        #: ``_NOT_THE_FAILURE``.
        self._kinds: set = set()

    def filter(self, record):
        failed = record.levelno >= std_logging.WARNING
        back = 'Reconnected to AMQP server' in str(record.msg)
        if not (failed or back):
            return True
        now = self.last_trouble = time.monotonic()
        if back:
            told, self._told, held, self._held = self._told, None, \
                self._held, 0
            if told is not None and held:
                _append(record, '(after %d more line(s) of failed '
                                'attempts, held back)' % held)
            return True
        if not any(text in str(record.msg) for text in _ATTEMPT_FAILED):
            return True
        last, self._last = self._last, now
        # The same failure whatever the connection and the pause: one
        # not told yet in this outage (a login refused after a password
        # rotation) is told.
        kind = _NOT_THE_FAILURE.sub('', record.getMessage())
        if self._told is None or now - last >= NEW_OUTAGE_AFTER:
            self._kinds = set()
        elif now - self._told < REPEAT_EVERY and kind in self._kinds:
            self._held += 1
            # With debug on, as a DEBUG line (handlers do not look at
            # the level again).
            if not std_logging.getLogger('scheduler').isEnabledFor(
                    std_logging.DEBUG):
                return False
            record.levelno, record.levelname = std_logging.DEBUG, 'DEBUG'
            return True
        self._kinds.add(kind)
        if self._held:
            _append(record, '(%d more such line(s) held back in the last '
                            '%d s)' % (self._held, now - self._told))
        self._told, self._held = now, 0
        return True

    def recovering(self) -> bool:
        if self.stopping:
            return False
        last = self.last_trouble
        return last is not None and \
            time.monotonic() - last < RECOVERY_SECONDS


_WATCH = _BrokerWatch()


def watch_broker() -> None:
    """Start noting broker failures (idempotent): a service calls it
    before its RPC servers start."""
    logger = std_logging.getLogger(_DRIVER_LOGGER)
    if _WATCH not in logger.filters:
        logger.addFilter(_WATCH)


def stopping() -> None:
    """The service is stopping: replies wait the short retry only, and
    those already waiting longer give up at it."""
    _WATCH.stopping = True


class _LongWaits:
    """Replies waiting for their queue beyond the short retry, bounded
    to half the executor's workers."""

    def __init__(self):
        self._lock = concurrency.native_lock()
        self._count = 0

    def limit(self) -> int:
        return max(1, int(CONF.executor_thread_pool_size) // 2)

    def take(self) -> bool:
        if not _WATCH.recovering():
            return False
        with self._lock:
            if self._count >= self.limit():
                return False
            self._count += 1
            return True

    def give(self) -> None:
        with self._lock:
            self._count -= 1


_LONG_WAITS = _LongWaits()


def _short_wait() -> float:
    return float(CONF.oslo_messaging_rabbit.
                 kombu_missing_consumer_retry_timeout)


def take_over(incoming) -> None:
    """Have ``incoming`` (a call being served) reply through ``send``.

    Only messages of oslo.messaging's AMQP drivers have a reply queue
    to wait for; others keep their own ``reply``.  The server calls
    ``incoming.reply`` once the dispatcher returns, in the same worker.
    """
    listener = getattr(incoming, 'listener', None)
    driver = getattr(listener, 'driver', None)
    if all(hasattr(incoming, name) for name in (
            '_send_reply', '_obsolete_reply_queues', 'reply_q',
            'orig_msg_id')) and hasattr(driver, '_get_connection'):
        incoming.reply = functools.partial(send, incoming)


def send(incoming, reply=None, failure=None) -> None:
    """Deliver a reply, waiting for its queue as the module says."""
    from oslo_messaging._drivers import amqp as rpc_amqp
    from oslo_messaging._drivers import common as rpc_common
    import oslo_messaging

    if not incoming.orig_msg_id:
        return  # a cast
    dropped = incoming._obsolete_reply_queues
    if not dropped.reply_q_valid(incoming.reply_q, incoming.msg_id):
        return
    driver = incoming.listener.driver
    started = time.monotonic()
    short = _short_wait()
    long_wait = False
    try:
        while True:
            try:
                with driver._get_connection(
                        rpc_common.PURPOSE_SEND) as conn:
                    incoming._send_reply(conn, reply, failure)
                if long_wait:
                    LOG.info('Delivered reply %(msg_id)s after %(waited).1fs '
                             'waiting for its queue %(queue)s to come back '
                             'after a broker restart',
                             {'msg_id': incoming.msg_id,
                              'queue': incoming.reply_q,
                              'waited': time.monotonic() - started})
                return
            except (oslo_messaging.MessageUndeliverable,
                    rpc_amqp.AMQPDestinationNotFound):
                waited = time.monotonic() - started
                if not long_wait and waited >= short:
                    long_wait = _LONG_WAITS.take()
                if long_wait and not _WATCH.stopping:
                    # From the broker's last trouble: a caller cannot
                    # declare its queue again while the broker keeps
                    # restarting, and each restart starts its
                    # reconnection anew.
                    since = max(started, _WATCH.last_trouble or started)
                    over = time.monotonic() - since >= RECOVERY_WAIT
                else:
                    over = waited >= short
                if over:
                    _give_up(incoming, waited, long_wait, dropped)
                    return
                time.sleep(RETRY_INTERVAL)
    finally:
        if long_wait:
            _LONG_WAITS.give()


def _give_up(incoming, waited: float, long_wait: bool, dropped) -> None:
    if long_wait or not _WATCH.recovering():
        # Its caller is gone: the next replies to it go at once.
        dropped.add(incoming.reply_q, incoming.msg_id)
    LOG.warning('Dropped reply %(msg_id)s: its queue %(queue)s did not '
                'exist for %(waited).1fs (its caller is gone)',
                {'msg_id': incoming.msg_id, 'queue': incoming.reply_q,
                 'waited': waited})
