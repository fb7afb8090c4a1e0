"""The consumer of quiet computes' liveness messages on RabbitMQ.

A liveness message (``report_alive``, API 1.6) is a cast a compute
publishes through oslo.messaging to the alive queue
(``rpc.alive_target``).  The host manager's work on one is a digest
compared and a time renewed, less than what an oslo.messaging RPC
server spends around each message: a wake-up, a green thread, a
dispatch and an acknowledgement.
This consumer takes them with kombu instead: it drains what the broker
has sent (at most a prefetch unacknowledged) through the channel's own
consumer (``basic_consume``), serves the batch in its own thread and
acknowledges it with one frame.

What stays as through the RPC server:

* trust per message: the sender is the ``user_id`` property RabbitMQ
  validated on that message (``trust``), and ``ReportsEndpoint.take_alive``
  checks it against each node the message names;
* the checks and the rejections of malformed messages (one rate-limited
  line each, ``rejections``), the metrics and the report lag;
* the context a message came with, as a ``RequestContext`` wherever
  anything but its sender is read (``context.Deferred``: built there,
  once; a liveness message's path reads only the sender, unless it
  casts back to the compute or logs a line about the message);
* a backlog stays on the broker (bounded prefetch), and what a worker
  took but did not serve is requeued by the broker when the worker dies
  or stops (acknowledged only once served);
* a broker that goes away is reconnected to, and nothing but a stop ends
  the consumer.

oslo.messaging's wire format is read here (``decode``): its envelope
and how it packs a context.  So is how it declares a topic queue
(``queue_of``), so that services of either kind share the queue.  Both
are checked against the library by tests/unit/test_library_privates.py.

The ``fake://`` transport has no AMQP properties to trust: there the
service keeps its RPC server (``get_server``).
"""

import contextlib
import json
import socket
import threading
import time
import uuid

import kombu
from oslo_config import cfg
from oslo_log import log as logging
import oslo_messaging

from scheduler import broker_login
from scheduler import concurrency
from scheduler import context
from scheduler import exception
from scheduler import message_limits
from scheduler import rejections
from scheduler import rpc
from scheduler import trust

LOG = logging.getLogger(__name__)
CONF = cfg.CONF

#: Messages taken off the bus and not yet acknowledged, at most, where
#: ``[oslo_messaging_rabbit] rabbit_qos_prefetch_count`` sets no bound:
#: the batch a wake-up may serve.  The rest waits on the broker.
PREFETCH = 100

#: Seconds one wait for the broker lasts, at most: how soon a stop is
#: noticed, and how often the connection's heartbeat is checked.
WAKE_EVERY = 1.0

#: Seconds a wake-up waits for more messages before it serves those it
#: found, unless the batch before was full: well below any report
#: interval, and what makes a steady trickle arrive in batches.
GATHER = 0.05

#: Seconds between two attempts to reach the broker, at most (the wait
#: doubles from one second up to it).
RECONNECT_MAX = 10.0
#: Seconds between two WARNINGs of one broker outage.
REPEAT_EVERY = 60.0

#: Seconds of silence after which the broker is deemed gone
#: (AMQP heartbeat, as oslo.messaging's default).
HEARTBEAT = 60

#: The method and API version this consumer serves.
METHOD = 'report_alive'
MAJOR, MINOR = 1, 6

#: oslo.messaging's wire format (checked by test_library_privates.py).
ENVELOPE_VERSION_KEY = 'oslo.version'
ENVELOPE_MESSAGE_KEY = 'oslo.message'
ENVELOPE_MAJOR = '2'
CONTEXT_PREFIX = '_context_'
_CONTEXT_PREFIX_LENGTH = len(CONTEXT_PREFIX)


class Malformed(exception.MalformedObject):
    """A message this consumer cannot read as a liveness message."""


def decode(body) -> tuple:
    """``(method, args, context dict, version)`` of one message body as
    oslo.messaging's AMQP driver publishes a cast; ``Malformed`` for
    anything else."""
    try:
        envelope = json.loads(body)
        if not isinstance(envelope, dict):
            raise ValueError('not an envelope')
        version = envelope.get(ENVELOPE_VERSION_KEY)
        if (not isinstance(version, str)
                or version.split('.')[0] != ENVELOPE_MAJOR):
            raise ValueError('envelope version %r' % (version,))
        message = json.loads(envelope[ENVELOPE_MESSAGE_KEY])
        if not isinstance(message, dict):
            raise ValueError('not a message')
    except (ValueError, TypeError, KeyError, RecursionError) as e:
        raise Malformed(what='message', reason='%s: %s'
                        % (type(e).__name__, e))
    # (A JSON object's keys are strings.)
    ctxt = {key[_CONTEXT_PREFIX_LENGTH:]: value
            for key, value in message.items()
            if key.startswith(CONTEXT_PREFIX)}
    return (message.get('method'), message.get('args', {}), ctxt,
            message.get('version'))


def _compatible(version) -> bool:
    """Whether this server speaks API ``version`` (1.0 to 1.6)."""
    if version is None:
        return True
    try:
        major, minor = (int(part) for part in str(version).split('.'))
    except ValueError:
        return False
    return major == MAJOR and minor <= MINOR


def serve(endpoint, message) -> None:
    """Serve one kombu ``message`` of the alive queue as the RPC server
    would: the sender, the dispatcher's checks, then the manager's
    ``AliveEndpoint.report_alive``.  A message that is not a liveness
    message this server speaks is rejected (one rate-limited line)."""
    method = None
    try:
        method, args, ctxt, version = decode(message.body)
        if method != METHOD:
            raise exception.InvalidRequest(
                reason='only %s is served on this queue' % METHOD)
        if not _compatible(version):
            raise exception.InvalidRequest(
                reason='API version %r is not served (%d.%d at most)'
                % (version, MAJOR, MINOR))
        message_limits.check_arguments(method, ctxt, args)
    except exception.SchedulerException as e:
        rejections.reject(method if method is not None else METHOD, e,
                          what='cast')
        return
    # The path reads the sender; the rest of the context where it is
    # used (``context.Deferred``).
    request = context.Deferred(ctxt, trust.publisher_of(message))
    # What a newer compute adds is ignored, as the endpoint ignores it.
    endpoint.report_alive(request, nodes=args.get('nodes'),
                          sent_at=args.get('sent_at'))


def queue_of(conf: cfg.ConfigOpts | None = None,
             transport_url: str | None = None) -> kombu.Queue:
    """The alive queue, declared as oslo.messaging declares a topic
    queue (``declare_topic_consumer``), so that a service of either kind
    may declare it first."""
    conf = conf or CONF
    url = oslo_messaging.TransportURL.parse(
        conf, transport_url or conf.transport_url)

    def option(name):
        return rpc.rabbit_option(conf, url, name)
    quorum = option('rabbit_quorum_queue')
    durable = bool(option('amqp_durable_queues') or quorum)
    auto_delete = bool(option('amqp_auto_delete'))
    arguments = {}
    if option('rabbit_ha_queues'):
        arguments['x-ha-policy'] = 'all'
    if quorum:
        arguments['x-queue-type'] = 'quorum'
        for name, key in (
                ('rabbit_quorum_delivery_limit', 'x-delivery-limit'),
                ('rabbit_quorum_max_memory_length',
                 'x-max-in-memory-length'),
                ('rabbit_quorum_max_memory_bytes',
                 'x-max-in-memory-bytes')):
            if option(name):
                arguments[key] = option(name)
    exchange = kombu.Exchange(rpc.reports_topic(conf), type='topic',
                              durable=durable, auto_delete=auto_delete)
    topic = rpc.alive_topic(conf)
    return kombu.Queue(topic, exchange, routing_key=topic, durable=durable,
                       auto_delete=auto_delete, queue_arguments=arguments)


def _configured_prefetch(conf: cfg.ConfigOpts) -> int:
    """The prefetch the service's oslo.messaging servers get, or
    ``PREFETCH`` where it sets no bound (0) or is not registered."""
    try:
        count = conf.oslo_messaging_rabbit.rabbit_qos_prefetch_count
    except (cfg.NoSuchOptError, cfg.NoSuchGroupError):
        return PREFETCH
    return count if count and count > 0 else PREFETCH


class AliveConsumer:
    """Takes the alive queue with kombu; the lifecycle of an
    oslo.messaging server (``start``, ``stop``, ``wait``) so that the
    service starts and stops it with the others (``rpc.stop_servers``).

    One thread (a green thread under eventlet) owns the connection,
    the channel and the batch: nothing else touches them.
    """

    def __init__(self, endpoint, transport_url: str | None = None,
                 conf: cfg.ConfigOpts | None = None,
                 prefetch: int | None = None):
        """``endpoint``: the manager's ``AliveEndpoint``; ``prefetch``:
        by default the service's ``rabbit_qos_prefetch_count``, as for
        its other servers (an operator's value wins)."""
        self._endpoint = endpoint
        self._conf = conf or CONF
        self._url = transport_url
        self._prefetch = prefetch or _configured_prefetch(self._conf)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._started = threading.Event()
        self._start_error: BaseException | None = None
        #: Times the consumer reached the broker and consumed.
        self.consuming = 0
        #: Attempts to reach the broker that failed since it consumed.
        self._failed_attempts = 0

    def start(self) -> None:
        """Declare the queue and consume it.  As an oslo.messaging
        server's, returns once the queue is declared and consumed,
        waiting for an unreachable broker, or once a stop is asked;
        raises a refused login (``broker_login.is_refusal``)."""
        self._thread = threading.Thread(target=self._run,
                                        name='alive-consumer', daemon=True)
        self._thread.start()
        self._started.wait()
        if self._start_error is not None:
            error, self._start_error = self._start_error, None
            self._thread.join()
            raise error

    def stop(self) -> None:
        """Stop taking messages: the message in hand is served and
        acknowledged with those before it; the rest of the batch and
        what the broker sent besides are requeued (``_serve``)."""
        self._stop.set()

    def wait(self) -> None:
        """Until the consumer has let go of the broker."""
        if self._thread is not None:
            self._thread.join()

    # -- the consumer's thread ------------------------------------------

    def _run(self) -> None:
        pause = 1.0
        told: tuple | None = None  # (when, error type) last warned of
        try:
            while not self._stop.is_set():
                connection = rpc.amqp_connection(
                    self._conf, transport_url=self._url)
                connection.heartbeat = HEARTBEAT
                failure = None
                try:
                    self._consume(connection)
                except Exception as e:
                    if not self.consuming and broker_login.is_refusal(e):
                        self._start_error = e
                        return
                    failure = e
                else:
                    pause = 1.0
                finally:
                    _release(connection)
                if failure is None:
                    continue
                if self._failed_attempts == 0:
                    told = None  # it consumed since: a new outage
                self._failed_attempts += 1
                # One WARNING an outage, again each REPEAT_EVERY or when
                # the error changes (a password rotated while away), not
                # one each attempt.
                now = time.monotonic()
                if told is None or told[1] is not type(failure) or \
                        now - told[0] >= REPEAT_EVERY:
                    told = (now, type(failure))
                    LOG.warning('Liveness messages: lost the message '
                                'broker (%(type)s: %(error)s); connecting '
                                'again every %(max)s s at most (failed '
                                'attempts so far: %(count)d)',
                                {'type': type(failure).__name__,
                                 'error': failure, 'max': RECONNECT_MAX,
                                 'count': self._failed_attempts})
                self._stop.wait(pause)
                pause = min(pause * 2, RECONNECT_MAX)
        finally:
            self._started.set()

    def _consume(self, connection) -> None:
        """Consume until a stop (returns) or a broker error (raises)."""
        batch: list = []
        connection.connect()
        channel = connection.channel()
        queue = queue_of(self._conf, self._url)(channel)
        queue.declare()
        channel.basic_qos(0, self._prefetch, False)
        # The channel's own consumer, not a kombu.Consumer: each message
        # is the transport's (py-amqp's), with its body and properties,
        # not converted again into a kombu message (``serve`` reads the
        # body itself).
        tag = 'alive-%s' % uuid.uuid4().hex
        channel.basic_consume(queue=queue.name, consumer_tag=tag,
                              no_ack=False, callback=batch.append)
        self.consuming += 1
        if self.consuming > 1:
            LOG.info('Liveness messages: consuming %s again (after %d '
                     'failed attempt(s))', rpc.alive_topic(self._conf),
                     self._failed_attempts)
        self._failed_attempts = 0
        self._started.set()
        full_before = False
        while True:
            try:
                connection.drain_events(timeout=WAKE_EVERY)
                if batch and not full_before:
                    # Messages arriving one at a time would each cost a
                    # wake-up and an acknowledgement: let the next ones
                    # of a trickle join the batch.  Not behind a full
                    # batch: a backlog is served as fast as it comes.
                    self._stop.wait(GATHER)
                while len(batch) < self._prefetch:
                    connection.drain_events(timeout=0)
            except socket.timeout:
                pass
            connection.heartbeat_check()
            full_before = len(batch) >= self._prefetch
            if batch:
                served = self._serve(batch)
                if served:
                    channel.basic_ack(batch[served - 1].delivery_tag,
                                      multiple=True)
                batch.clear()
            if self._stop.is_set():
                # What the broker sent since, and what a stop left
                # unserved in the batch, is requeued as the connection
                # closes, unacknowledged.
                channel.basic_cancel(tag)
                return

    def _serve(self, batch: list) -> int:
        """Serve ``batch`` in order until done or a stop is asked;
        returns how many were served (the first ones).

        A stop ends the batch after the message in hand: each message
        may cost reads of the inventory and casts to its computes
        (``ReportsEndpoint.take_alive``), a batch many times the stop's
        time when the database is slow.  What is left is not
        acknowledged, so the broker gives it to the next consumer of
        the queue: no liveness is lost, and none was promised to this
        worker.
        """
        concurrency.slice_begins()
        served = 0
        together = getattr(self._endpoint, 'batch', contextlib.nullcontext)
        with together():
            for message in batch:
                if self._stop.is_set():
                    break
                try:
                    serve(self._endpoint, message)
                except Exception:
                    # Never the consumer's end: the next one is served.
                    LOG.exception('Could not serve a liveness message')
                served += 1
                concurrency.cooperative_yield()
        if served < len(batch):
            LOG.info('Stopping: %d liveness message(s) taken off the bus '
                     'and not served are left to the broker',
                     len(batch) - served)
        return served


def _release(connection) -> None:
    try:
        connection.release()
    except Exception:  # gone with the broker
        LOG.debug('Closing the alive consumer\'s connection', exc_info=True)


def get_server(endpoint, server: str, transport=None, at_once: int = 1):
    """The server of the alive queue for a service: ``AliveConsumer``
    on RabbitMQ, an oslo.messaging RPC server otherwise (``fake://``,
    whose messages have no AMQP properties), taking at most
    ``at_once`` messages off the bus before one is served.

    ``endpoint``: the manager's ``AliveEndpoint``; ``server``: the
    service's host name.
    """
    url = rpc.transport_url_of(transport) if transport is not None \
        else None
    if rpc.is_amqp(transport_url=url):
        return AliveConsumer(endpoint, transport_url=url)
    return rpc.get_server(rpc.alive_target(server=server), [endpoint],
                          transport=transport,
                          at_once={METHOD: at_once})
