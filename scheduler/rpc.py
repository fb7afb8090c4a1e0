"""Transport, serializer, servers and clients: the bus, in one place."""

import threading
import time
import urllib.parse
import weakref

import kombu

from oslo_config import cfg
from oslo_log import log as logging
import oslo_messaging

from scheduler import concurrency
from scheduler import context as scheduler_context
from scheduler import exception
from scheduler import message_limits
from scheduler import rejections
from scheduler.objects import base as objects_base
from scheduler import urls

LOG = logging.getLogger(__name__)

# Exceptions raised by these modules in the service are re-raised with
# their own type in callers.
ALLOWED_EXMODS = [exception.__name__]

_TRANSPORTS: dict = {}

#: Longest an idle RabbitMQ consumer waits on its socket before it looks
#: again whether its server (or reply listener) was told to stop.
CONSUMER_IDLE_WAIT = 0.5


def bound_consumer_idle_wait() -> None:
    """Let a stopped RPC server or reply listener go within 0.5 s.

    oslo.messaging's AMQP consumers back off while idle: they wait for
    a message 1 ms, then 2, 4 ... and at most 5 s at a time, and see a
    ``stop()`` only when that wait ends.  An idle service stopped its
    three servers one after the other: SIGTERM took 4 to 8 s (up to
    15 s) for nothing, and closing a caller's transport up to 5 s more.
    The back-off has no option; its ceiling is a module constant read
    at every wait, lowered here.  An idle consumer then wakes twice a
    second instead of every 5 s (a socket read timing out, a heartbeat
    check): an idle worker used 0.6% of a core instead of 0.45%.
    Without that constant (another oslo.messaging) nothing is changed,
    and tests/unit/test_rpc.py fails.
    """
    try:
        from oslo_messaging._drivers import amqpdriver
        # The rabbit driver bounds one of its options by this ceiling
        # when first imported: it must see the original.
        from oslo_messaging._drivers import impl_rabbit  # noqa: F401
    except ImportError:
        return
    name = 'ACK_REQUEUE_EVERY_SECONDS_MAX'
    if getattr(amqpdriver, name, 0) > CONSUMER_IDLE_WAIT:
        setattr(amqpdriver, name, CONSUMER_IDLE_WAIT)


def get_transport(conf: cfg.ConfigOpts | None = None,
                  url: str | None = None) -> oslo_messaging.Transport:
    """The RPC transport for ``url`` (default ``[DEFAULT] transport_url``).

    One transport per URL per process: ``fake://`` only delivers within
    one transport object, so the demo's service, simulator and caller
    must share it.
    """
    conf = conf or cfg.CONF
    key = url or conf.transport_url or ''
    if key not in _TRANSPORTS:
        bound_consumer_idle_wait()
        _TRANSPORTS[key] = oslo_messaging.get_rpc_transport(
            conf, url=url, allowed_remote_exmods=ALLOWED_EXMODS)
    return _TRANSPORTS[key]


def get_notification_transport(conf: cfg.ConfigOpts | None = None):
    bound_consumer_idle_wait()
    return oslo_messaging.get_notification_transport(
        conf or cfg.CONF, allowed_remote_exmods=ALLOWED_EXMODS)


_NOTIFIERS: dict = {}


def get_notifier(publisher_id: str, conf: cfg.ConfigOpts | None = None):
    """A Notifier for versioned notifications.

    Driver, topics and transport come from oslo.messaging's
    ``[oslo_messaging_notifications]`` options; with no driver set, it
    sends nothing.
    """
    if publisher_id not in _NOTIFIERS:
        conf = conf or cfg.CONF
        _NOTIFIERS[publisher_id] = oslo_messaging.Notifier(
            get_notification_transport(conf), publisher_id=publisher_id,
            serializer=RequestContextSerializer())
    return _NOTIFIERS[publisher_id]


def cleanup() -> None:
    """Close every transport this process opened."""
    for notifier in _NOTIFIERS.values():
        notifier.transport.cleanup()
    _NOTIFIERS.clear()
    for transport in _TRANSPORTS.values():
        transport.cleanup()
    _TRANSPORTS.clear()


class RequestContextSerializer(oslo_messaging.Serializer):
    """Serialises the request context and the versioned objects."""

    def __init__(self, base: oslo_messaging.Serializer | None = None):
        self._base = base or objects_base.SchedulerObjectSerializer()

    def serialize_entity(self, ctxt, entity):
        return self._base.serialize_entity(ctxt, entity)

    def deserialize_entity(self, ctxt, entity):
        return self._base.deserialize_entity(ctxt, entity)

    def serialize_context(self, ctxt):
        return ctxt.to_dict()

    def deserialize_context(self, ctxt):
        return scheduler_context.RequestContext.from_dict(ctxt)


class ServerSerializer(RequestContextSerializer):
    """The server's serializer: what cannot be read is a typed error.

    A malformed or too-new object, or a context that is not one, is
    raised as ``MalformedObject`` / ``IncompatibleObjectVersion``; the
    dispatcher turns that into the caller's reply and one warning line.
    """

    def deserialize_entity(self, ctxt, entity):
        try:
            return super().deserialize_entity(ctxt, entity)
        except exception.SchedulerException:
            raise
        except _INPUT_ERRORS as e:
            raise exception.MalformedObject(
                what='argument', reason='%s: %s' % (type(e).__name__, e))

    def deserialize_context(self, ctxt):
        try:
            return super().deserialize_context(ctxt)
        except _INPUT_ERRORS as e:
            raise exception.MalformedObject(
                what='request context',
                reason='%s: %s' % (type(e).__name__, e))


#: What bad input makes Python code raise: answered as InvalidRequest.
_INPUT_ERRORS = (TypeError, ValueError, AttributeError, KeyError,
                 IndexError, OverflowError, RecursionError, UnicodeError)


class Dispatcher(oslo_messaging.RPCDispatcher):
    """oslo.messaging's dispatcher, with callers' mistakes kept typed.

    Before dispatching it checks the shape and size of the arguments
    (``scheduler.message_limits``).  An unknown or unexposed method, an
    API version this server does not speak, unexpected keyword
    arguments, wrong types: the caller gets ``NoSuchMethod`` /
    ``UnsupportedVersion`` / ``InvalidRequest`` / ``MalformedObject``
    back, the service logs one rate-limited warning line without a
    traceback (``scheduler.rejections``) and keeps serving.
    """

    def dispatch(self, incoming):
        concurrency.slice_begins()
        message = incoming.message
        method = message.get('method')
        try:
            message_limits.check_arguments(method, incoming.ctxt,
                                           message.get('args', {}))
            return super().dispatch(incoming)
        except oslo_messaging.ExpectedException:
            raise
        except (oslo_messaging.NoSuchMethod,
                oslo_messaging.UnsupportedVersion,
                exception.SchedulerException) as error:
            rejections.reject(method, error)
            raise oslo_messaging.ExpectedException()
        except _INPUT_ERRORS as error:
            try:
                raise exception.InvalidRequest(
                    reason='%s: %s' % (type(error).__name__, error))
            except exception.InvalidRequest as typed:
                rejections.reject(method, typed)
                raise oslo_messaging.ExpectedException()


#: Messages a server may hold taken off the bus and not yet started,
#: per worker of its executor (``[DEFAULT] executor_thread_pool_size``).
QUEUED_PER_WORKER = 1


def _bounded_executor(executor_cls: type) -> type:
    """``executor_cls`` whose ``submit`` waits while its workers are
    busy and as many messages wait for them: back-pressure on the bus.

    oslo.messaging acknowledges an RPC message (call or cast) as soon as
    its consumer receives it, before a worker takes it, and its
    executors queue what their workers cannot take yet without a bound;
    ``rabbit_qos_prefetch_count`` bounds only what is unacknowledged.
    A service slower than its casters (a fleet's first reports, a
    backlog after an outage) thus moved the broker's whole queue into
    its memory as decoded messages: measured at 100,000 hosts, up to
    five million objects at once, and a resident size of 0.8 to 1.2 GB
    that stayed (Python cannot move the objects kept between those that
    were freed).  Bounded here, the consumer stops reading while the
    bound is reached: the rest waits on the broker, unacknowledged
    and redelivered to another worker if this one dies, and another
    daemon on the topic gets its share.
    """
    class Bounded(executor_cls):
        bounded = True

        def __init__(self, max_workers: int = 64, **kwargs):
            super().__init__(max_workers=max_workers, **kwargs)
            # The monkey-patched (green) semaphore under eventlet: the
            # consumer that waits on it is a green thread there.
            self._slots = threading.Semaphore(
                max_workers * (1 + QUEUED_PER_WORKER))

        def submit(self, fn, *args, **kwargs):
            self._slots.acquire()
            try:
                future = super().submit(fn, *args, **kwargs)
            except BaseException:
                self._slots.release()
                raise
            future.add_done_callback(self._done)
            return future

        def _done(self, _future) -> None:
            self._slots.release()

    Bounded.__name__ = 'Bounded' + executor_cls.__name__
    return Bounded


def bound_intake(server) -> None:
    """Make ``server`` (not started) take messages off the bus only as
    fast as it serves them (``_bounded_executor``).

    oslo.messaging offers no option for it: its server builds its
    executor from the class it keeps, replaced here before ``start``.
    Another oslo.messaging without that attribute is left unbounded,
    and tests/unit/test_rpc.py fails.
    """
    cls = getattr(server, '_executor_cls', None)
    if cls is not None and not getattr(cls, 'bounded', False):
        server._executor_cls = _bounded_executor(cls)


def get_server(target: oslo_messaging.Target, endpoints: list,
               transport: oslo_messaging.Transport | None = None):
    """An RPC server that dispatches only exposed methods.

    Built by ``oslo_messaging.get_rpc_server`` with
    ``ExplicitRPCAccessPolicy``: only endpoint methods marked with
    ``oslo_messaging.expose`` are callable over the bus, not every
    public attribute.  ``get_rpc_server`` cannot take a dispatcher
    class, so ours (the same public RPCDispatcher, with the checks
    above) replaces the one it built before the server starts.
    Installs the message size bounds and the log filter for unreadable
    messages first.  The server takes messages off the bus no faster
    than it serves them (``bound_intake``).
    """
    message_limits.install()
    rejections.install_log_filter()
    serializer = ServerSerializer()
    policy = oslo_messaging.ExplicitRPCAccessPolicy
    server = oslo_messaging.get_rpc_server(
        transport or get_transport(), target, endpoints,
        executor=concurrency.EXECUTOR, serializer=serializer,
        access_policy=policy)
    server.dispatcher = Dispatcher(endpoints, serializer, policy)
    bound_intake(server)
    return server


def stop_servers(servers: list) -> None:
    """Stop ``servers`` side by side, then let their calls in flight end.

    Each ``stop()`` returns when its consumer has let go (up to
    ``CONSUMER_IDLE_WAIT``): side by side, a process pays that once,
    not once per server.  Once every ``stop()`` returned nothing new is
    taken; ``wait()`` then lets the calls in flight finish and reply.
    Errors are logged, not raised: a shutdown goes on.
    """
    def run(action: str, server) -> None:
        try:
            getattr(server, action)()
        except Exception:
            LOG.exception('Error in %s() of an RPC server', action)

    for action in ('stop', 'wait'):
        threads = [threading.Thread(target=run, args=(action, server),
                                    name='rpc-server-%s-%d' % (action,
                                                               index))
                   for index, server in enumerate(servers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()


def reports_topic(conf: cfg.ConfigOpts | None = None) -> str:
    """Topic and exchange of compute casts (reports, instance info)."""
    return '%s_reports' % (conf or cfg.CONF).scheduler.topic


def operator_topic(conf: cfg.ConfigOpts | None = None) -> str:
    """Topic and exchange of operator casts (aggregates)."""
    return '%s_ops' % (conf or cfg.CONF).scheduler.topic


def own_exchange_target(topic: str, **kwargs) -> oslo_messaging.Target:
    """A target on an exchange of its own, named like its topic.

    RabbitMQ permissions are per exchange and queue name: a topic on the
    shared control exchange could be published to by anyone allowed to
    publish any request.  Fanout casts go to ``<topic>_fanout``.
    """
    return oslo_messaging.Target(exchange=topic, topic=topic, **kwargs)


def get_client(target: oslo_messaging.Target, version_cap: str | None = None,
               transport: oslo_messaging.Transport | None = None,
               timeout: int | None = None):
    """An RPC client with our serializer."""
    return oslo_messaging.get_rpc_client(
        transport or get_transport(), target, version_cap=version_cap,
        serializer=RequestContextSerializer(), timeout=timeout)


def amqp_connection(conf: cfg.ConfigOpts | None = None,
                    connect_timeout: float = 10) -> kombu.Connection:
    """A kombu connection to the broker(s) of ``[DEFAULT] transport_url``.

    For what oslo.messaging does not offer: bindings of many routing keys
    to one queue (the simulator) and a quick reachability check (the
    CLI).  Only hosts, credentials, virtual host and
    ``[oslo_messaging_rabbit] ssl`` are taken from the configuration.
    """
    conf = conf or cfg.CONF
    url = oslo_messaging.TransportURL.parse(conf, conf.transport_url)
    vhost = url.virtual_host or '/'
    urls = []
    for host in url.hosts:
        user = urllib.parse.quote(host.username or 'guest', safe='')
        password = urllib.parse.quote(host.password or '', safe='')
        urls.append('amqp://%s:%s@%s:%s/%s' % (
            user, password, host.hostname or '127.0.0.1', host.port or 5672,
            urllib.parse.quote(vhost, safe='')))
    ssl = bool(conf.oslo_messaging_rabbit.ssl) \
        if 'oslo_messaging_rabbit' in conf else False
    return kombu.Connection(';'.join(urls) or 'amqp://', ssl=ssl,
                            connect_timeout=connect_timeout)


#: Transport URL schemes that are RabbitMQ (AMQP 0-9-1 through kombu).
AMQP_SCHEMES = ('rabbit', 'amqp', 'kombu')


def is_amqp(conf: cfg.ConfigOpts | None = None) -> bool:
    """Whether ``[DEFAULT] transport_url`` is RabbitMQ."""
    conf = conf or cfg.CONF
    url = oslo_messaging.TransportURL.parse(conf, conf.transport_url)
    return (url.transport or '').split('+')[0] in AMQP_SCHEMES


def check_broker(conf: cfg.ConfigOpts | None = None,
                 timeout: float = 5) -> None:
    """Raise ``BrokerUnreachable`` unless the broker takes a connection.

    A command-line tool asks first: a broker that is down is then one
    line with the reason (refused, timed out, login failed) at once,
    rather than a ``MessageBusUnreachable`` at the end of the command's
    timeout (``call``).
    """
    conf = conf or cfg.CONF
    if not is_amqp(conf):
        return
    try:
        with amqp_connection(conf, connect_timeout=timeout) as connection:
            connection.ensure_connection(max_retries=1, timeout=timeout)
    except Exception as e:
        raise exception.BrokerUnreachable(
            url=urls.masked_url(conf.transport_url),
            reason=str(e) or type(e).__name__)


class MessageBusUnreachable(oslo_messaging.MessagingTimeout):
    """A call's timeout ran out before the message bus took the call.

    A ``MessagingTimeout``, so callers that handle a scheduler that does
    not answer handle this too; its own type lets a tool say that the
    bus, not the scheduler, is the problem.
    """


class _ReplyQueueOpener:
    """Opens one transport's reply queue in a thread of its own.

    oslo.messaging's AMQP driver opens the queue its replies come back
    on at a process's first call, on a connection that waits for the
    broker without a limit (and under a lock every later call takes).
    Opened here in the background instead, a call gives up at its
    deadline while the queue goes on being opened for the calls after
    it; once open it stays open, and the driver reconnects it by itself.
    """

    def __init__(self, open_queue):
        self._open_queue = open_queue
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None

    def wait(self, timeout: float) -> bool:
        """Whether the queue is open within ``timeout`` seconds.

        Raises what opening it raised (a refused login, for example);
        the next call then tries again.
        """
        with self._lock:
            failed = self._done.is_set() and self._error is not None
            if self._thread is None or failed:
                self._done.clear()
                self._error = None
                self._thread = threading.Thread(
                    target=self._run, name='rpc-reply-queue', daemon=True)
                self._thread.start()
        if not self._done.wait(max(timeout, 0.0)):
            return False
        if self._error is not None:
            raise self._error
        return True

    def _run(self) -> None:
        try:
            self._open_queue()
        except Exception as e:  # handed to the waiting caller
            self._error = e
        self._done.set()


_OPENERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_OPENERS_LOCK = threading.Lock()


def _reply_queue_open(transport, timeout: float) -> bool:
    """Whether ``transport`` can take a call's reply within ``timeout``.

    Only oslo.messaging's AMQP drivers open a reply queue (their
    ``_get_reply_q``); other drivers have nothing to wait for.
    """
    driver = getattr(transport, '_driver', None)
    open_queue = getattr(driver, '_get_reply_q', None)
    if open_queue is None:
        return True
    with _OPENERS_LOCK:
        opener = _OPENERS.get(driver)
        if opener is None:
            opener = _OPENERS[driver] = _ReplyQueueOpener(open_queue)
    return opener.wait(timeout)


#: Seconds between two attempts to publish a call while the broker is
#: unreachable (see ``call``).
SEND_RETRY_INTERVAL = 0.5


def call(cctxt, ctxt, method: str, **kwargs):
    """``cctxt.call(ctxt, method, **kwargs)``, over within its timeout.

    oslo.messaging's rabbit driver retries publishing a call for as long
    as the broker is unreachable (``retry=None``, with a growing
    backoff) and only then starts the call's timeout: a 5 s call took
    13 s through a 10 s outage, and blocks for the whole of a longer
    one.  Here each attempt publishes once (``retry=0``), attempts
    repeat every ``SEND_RETRY_INTERVAL`` seconds, and each waits for the
    reply only for what is left of the caller's timeout (the client's,
    else ``[DEFAULT] rpc_response_timeout``).  The reply queue a
    process's first call needs is opened in the background
    (``_ReplyQueueOpener``), so the first call is bounded too.  Past
    the deadline the caller gets ``MessageBusUnreachable`` (a
    ``MessagingTimeout``) when the bus never took the call, and
    ``MessagingTimeout`` when no scheduler answered it.  A call that
    could not be published was not sent, so repeating it cannot run it
    twice.
    """
    timeout = cctxt.timeout or cfg.CONF.rpc_response_timeout
    deadline = time.monotonic() + timeout
    if not _reply_queue_open(cctxt.transport, timeout):
        raise MessageBusUnreachable(
            'Could not send %s within %ss: the message bus is unreachable '
            '(no connection for the reply)' % (method, timeout))
    failures = 0
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise MessageBusUnreachable(
                'Could not send %s within %ss: the message bus is '
                'unreachable (%d attempts)' % (method, timeout, failures))
        try:
            return cctxt.prepare(retry=0, timeout=remaining).call(
                ctxt, method, **kwargs)
        except oslo_messaging.MessageDeliveryFailure as e:
            failures += 1
            if failures == 1:
                LOG.warning('Cannot send %(method)s: %(error)s; trying '
                            'again for %(left).1fs',
                            {'method': method, 'error': e,
                             'left': remaining})
            time.sleep(max(0.0, min(SEND_RETRY_INTERVAL,
                                    deadline - time.monotonic())))
