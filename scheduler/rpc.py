"""Transport, serializer, servers and clients: the bus, in one place."""

from collections.abc import Iterable
import os
import queue
import ssl
import threading
import time
import traceback
import typing
import urllib.parse
import weakref

import kombu
import kombu.exceptions

from oslo_config import cfg
from oslo_log import log as logging
import oslo_messaging
from oslo_utils import strutils

from scheduler import concurrency
from scheduler import context as scheduler_context
from scheduler import exception
from scheduler import loader
from scheduler import message_limits
from scheduler import rejections
from scheduler import replies
from scheduler import taken_messages
from scheduler import trust
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
    """Let a stopped RPC server or reply listener go within
    ``CONSUMER_IDLE_WAIT``.

    oslo.messaging's idle AMQP consumers back off exponentially and see
    a ``stop()`` only when a wait ends, so a stop waited out that
    back-off.  Its ceiling has no option, only a module constant read at
    every wait: lowered here.  Without that constant (another
    oslo.messaging) nothing is changed, and tests/unit/test_rpc.py fails.
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
        trust.stamp_published_messages()
        _TRANSPORTS[key] = oslo_messaging.get_rpc_transport(
            conf, url=url, allowed_remote_exmods=ALLOWED_EXMODS)
    return _TRANSPORTS[key]


_NOTIFIERS: dict = {}


def get_notifier(publisher_id: str):
    """A Notifier for versioned notifications.

    Driver, topics and transport come from oslo.messaging's
    ``[oslo_messaging_notifications]`` options; with no driver set, it
    sends nothing.
    """
    if publisher_id not in _NOTIFIERS:
        bound_consumer_idle_wait()
        trust.stamp_published_messages()
        transport = oslo_messaging.get_notification_transport(
            cfg.CONF, allowed_remote_exmods=ALLOWED_EXMODS)
        _NOTIFIERS[publisher_id] = oslo_messaging.Notifier(
            transport, publisher_id=publisher_id,
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


class RequestContextSerializer(objects_base.SchedulerObjectSerializer):
    """Serialises the request context and the versioned objects."""

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
        # Who published the message (``trust.note_sender``), never what
        # the message says.
        sender = trust.take_sender(ctxt)
        try:
            context = super().deserialize_context(ctxt)
        except _INPUT_ERRORS as e:
            raise exception.MalformedObject(
                what='request context',
                reason='%s: %s' % (type(e).__name__, e))
        context.sender = sender
        return context


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
        # Who published it, as the broker checked (scheduler.trust).
        trust.note_sender(incoming)
        # Its reply waits for a caller's queue as ``replies`` says.
        replies.take_over(incoming)
        message = incoming.message
        method = message.get('method')
        try:
            message_limits.check_arguments(method, incoming.ctxt,
                                           message.get('args', {}))
            return super().dispatch(incoming)
        except oslo_messaging.ExpectedException:
            raise
        except exception.PluginFailed as error:
            # A plugin's result the scheduler could not use
            # (``plugin_outputs``): its author's to fix.
            rejections.plugin_failed(method, error.kwargs['plugin'], error)
            raise oslo_messaging.ExpectedException()
        except (oslo_messaging.NoSuchMethod,
                oslo_messaging.UnsupportedVersion,
                exception.SchedulerException) as error:
            rejections.reject(method, error)
            raise oslo_messaging.ExpectedException()
        except _INPUT_ERRORS as error:
            blamed = _plugin_of(error)
            try:
                if blamed is not None:
                    rejections.plugin_failed(method, blamed[0], error)
                    raise exception.PluginFailed(
                        plugin=blamed[0], package=blamed[1],
                        error='%s: %s' % (type(error).__name__, error))
                raise exception.InvalidRequest(
                    reason='%s: %s' % (type(error).__name__, error))
            except exception.InvalidRequest as typed:
                rejections.reject(method, typed)
                raise oslo_messaging.ExpectedException()
            except exception.PluginFailed:
                raise oslo_messaging.ExpectedException()


def _plugin_of(error: BaseException) -> tuple | None:
    """``(function, package)`` of the innermost frame of ``error``'s
    traceback in an out-of-tree plugin's package
    (``loader.outside_package``), or None: an error raised there is the
    plugin's bug, whatever input met it, and its author needs the
    traceback; elsewhere Python's errors are bad input met by the
    scheduler's own checks."""
    blamed = None
    for frame, _line in traceback.walk_tb(error.__traceback__):
        package = loader.outside_package(frame.f_globals.get('__name__'))
        if package is not None:
            blamed = (frame.f_code.co_qualname, package)
    return blamed


#: Messages a server may hold taken off the bus and not yet started,
#: per worker of its executor (``[DEFAULT] executor_thread_pool_size``).
QUEUED_PER_WORKER = 1


def _method_of(args: tuple) -> str | None:
    """The RPC method of what a server hands its executor: its
    ``_process_incoming(incoming)``, ``incoming`` one message or a batch
    of them (oslo.messaging's RPC server polls one at a time)."""
    incoming = args[0] if args else None
    if isinstance(incoming, (list, tuple)):
        incoming = incoming[0] if len(incoming) == 1 else None
    message = getattr(incoming, 'message', None)
    return message.get('method') if isinstance(message, dict) else None


def _bounded_executor(executor_cls: type, at_once: dict | None = None
                      ) -> type:
    """``executor_cls`` whose ``submit`` waits while its workers are
    busy and as many messages wait for them: back-pressure on the bus.

    ``at_once``: ``{method: n}``, methods of which the server holds at
    most ``n`` messages taken off the bus and not yet served (running
    or queued); the consumer waits, taking nothing more, until one is
    done (see ``get_server``).

    oslo.messaging acknowledges an RPC message (call or cast) as soon as
    its consumer receives it, before a worker takes it, and its
    executors queue what their workers cannot take yet without a bound;
    ``rabbit_qos_prefetch_count`` bounds only what is unacknowledged.
    A service slower than its casters would move the broker's whole
    queue into its memory, and the resident size would stay
    (doc/performance.md, "Ad hoc measurements").  Bounded here, the
    consumer stops reading while the bound is reached: the rest waits
    on the broker, unacknowledged and redelivered to another worker if
    this one dies, and another daemon on the topic gets its share.
    """
    limits = dict(at_once or {})

    class Bounded(executor_cls):
        bounded = True

        def __init__(self, max_workers: int = 64, **kwargs):
            super().__init__(max_workers=max_workers, **kwargs)
            # The monkey-patched (green) semaphores under eventlet: the
            # consumer that waits on them is a green thread there.
            self._slots = threading.Semaphore(
                max_workers * (1 + QUEUED_PER_WORKER))
            self._method_slots = {method: threading.Semaphore(n)
                                  for method, n in limits.items()}
            self._unbounded = False

        def unbound(self) -> None:
            """Take what is submitted from now on without waiting: for
            a stopping server's messages already taken off the bus
            (``taken_messages``), which nothing may hold back."""
            self._unbounded = True

        def submit(self, fn, *args, **kwargs):
            if self._unbounded:
                return super().submit(fn, *args, **kwargs)
            method_slots = self._method_slots.get(_method_of(args))
            if method_slots is not None:
                method_slots.acquire()
            self._slots.acquire()
            try:
                future = super().submit(fn, *args, **kwargs)
            except BaseException:
                self._done(None, method_slots)
                raise
            future.add_done_callback(
                lambda done: self._done(done, method_slots))
            return future

        def _done(self, _future, method_slots=None) -> None:
            self._slots.release()
            if method_slots is not None:
                method_slots.release()

    Bounded.__name__ = 'Bounded' + executor_cls.__name__
    return Bounded


def bound_intake(server, at_once: dict | None = None) -> None:
    """Make ``server`` (not started) take messages off the bus only as
    fast as it serves them (``_bounded_executor``, with ``at_once``).

    oslo.messaging offers no option for it: its server builds its
    executor from the class it keeps, replaced here before ``start``.
    Another oslo.messaging without that attribute is left unbounded,
    and tests/unit/test_rpc.py fails.
    """
    cls = getattr(server, '_executor_cls', None)
    if cls is not None and not getattr(cls, 'bounded', False):
        server._executor_cls = _bounded_executor(cls, at_once)


def get_server(target: oslo_messaging.Target, endpoints: list,
               transport: oslo_messaging.Transport | None = None,
               at_once: dict | None = None):
    """An RPC server that dispatches only exposed methods.

    With ``ExplicitRPCAccessPolicy`` only endpoint methods marked with
    ``oslo_messaging.expose`` are callable over the bus.
    ``get_rpc_server`` cannot take a dispatcher class, so ours (with the
    checks above) replaces the one it built before the server starts.
    The server takes messages off the bus no faster than it serves them
    (``bound_intake``).

    ``at_once``: ``{method: n}``; of each of these methods the server
    takes at most ``n`` messages off the bus before one is served, even
    with idle workers: for work that only computes, where more at once
    only delays everything else the process does (see
    ``service.REPORTS_AT_ONCE``).  A message behind them on the bus
    waits too.
    """
    message_limits.install()
    rejections.install_log_filter()
    replies.watch_broker()
    serializer = ServerSerializer()
    policy = oslo_messaging.ExplicitRPCAccessPolicy
    server = oslo_messaging.get_rpc_server(
        transport or get_transport(), target, endpoints,
        executor=concurrency.EXECUTOR, serializer=serializer,
        access_policy=policy)
    server.dispatcher = Dispatcher(endpoints, serializer, policy)
    bound_intake(server, at_once)
    return server


#: Seconds a stopping server may take to cancel its consumers
#: (``taken_messages.serve_taken``) before the stop goes on without it.
TAKEN_GRACE = 3.0


#: Seconds between two looks at the broker while a stop waits for its
#: servers (``stop_servers``' ``probe``).
PROBE_EVERY = 2.0


def stop_servers(servers: list, grace: float | None = None,
                 broker_down: bool = False,
                 probe: typing.Callable[[], bool] | None = None,
                 down_grace: float | None = None) -> bool:
    """Stop ``servers`` side by side, then let their calls in flight end.

    Each ``stop()`` returns when its consumer has let go (up to
    ``CONSUMER_IDLE_WAIT``): side by side, a process pays that once,
    not once per server.  Once every ``stop()`` returned nothing new is
    taken (``taken_messages.serve_taken``: the broker stops delivering
    and what it had delivered is served); ``wait()`` then lets the
    calls in flight finish and reply.  Errors are logged, not raised: a
    shutdown goes on.

    ``grace``: seconds the whole stop may take.  A server still busy
    then is logged with what its thread was doing and left behind (its
    thread does not hold the process: the stop goes on, the process
    exits); returns False.  Without it the stop waits as long as it
    takes.

    ``broker_down``: the caller found the broker unreachable.  The
    servers are then expected to be left behind at ``grace`` (their
    connections retry the broker without a limit), so that is one
    WARNING line, not an ERROR with stacks.

    ``probe``: tells whether the broker takes a connection now.  While
    the broker is not known to be down, it is asked every
    ``PROBE_EVERY`` seconds of the wait: a broker that goes away during
    the stop (a node shutting down stops RabbitMQ and the service
    together) leaves the replies of the calls in flight retrying
    without a limit, and the stop then waits ``down_grace`` seconds
    more at most, not what is left of ``grace``.
    """
    deadline = None if not grace else time.monotonic() + grace
    last_probe = time.monotonic()

    def look_at_broker() -> None:
        """Shorten the deadline once ``probe`` finds the broker gone."""
        nonlocal broker_down, deadline, grace, last_probe
        if probe is None or broker_down or down_grace is None:
            return
        if time.monotonic() - last_probe < PROBE_EVERY:
            return
        reachable = probe()
        last_probe = time.monotonic()
        if not reachable:
            broker_down = True
            cut = last_probe + down_grace
            if deadline is None or cut < deadline:
                deadline, grace = cut, down_grace
            LOG.info('The message broker became unreachable during the '
                     'stop: the RPC servers get %s s more', down_grace)

    def join(threads: list, until_of: typing.Callable[[], float | None]
             ) -> None:
        """Join ``threads`` until ``until_of()``, looking at the broker
        between slices of ``PROBE_EVERY`` seconds."""
        for thread in threads:
            while thread.is_alive():
                until = until_of()
                left = None if until is None else until - time.monotonic()
                if left is not None and left <= 0:
                    return
                watching = probe is not None and not broker_down
                slice_ = PROBE_EVERY if watching else None
                thread.join(left if slice_ is None else
                            slice_ if left is None else min(left, slice_))
                look_at_broker()

    def run(action: str, server) -> None:
        try:
            if action == 'serve_taken':
                taken_messages.serve_taken(server)
            else:
                getattr(server, action)()
        except Exception:
            LOG.exception('Error in %s() of an RPC server', action)

    for action in ('stop', 'serve_taken', 'wait'):
        threads = [threading.Thread(target=run, args=(action, server),
                                    name='rpc-server-%s-%d' % (action,
                                                               index),
                                    daemon=True)
                   for index, server in enumerate(servers)]
        for thread in threads:
            thread.start()
        # Cancelling consumers is one exchange with the broker: one that
        # does not answer it must not hold the calls in flight.
        taken_until = time.monotonic() + TAKEN_GRACE

        def until_of() -> float | None:
            if action != 'serve_taken':
                return deadline
            return taken_until if deadline is None \
                else min(deadline, taken_until)
        join(threads, until_of)
        stuck = [thread for thread in threads if thread.is_alive()]
        if stuck and broker_down:
            LOG.warning('The message broker is unreachable: %(count)d RPC '
                        'server(s) still in %(action)s() after %(grace)s s, '
                        'left behind; calls still in flight get no reply',
                        {'count': len(stuck), 'action': action,
                         'grace': grace})
            LOG.debug('Left behind:\n%s', concurrency.thread_stacks(stuck))
            return False
        if stuck and action == 'serve_taken' and (
                deadline is None or time.monotonic() < deadline):
            LOG.error('RPC server(s) still cancelling their consumers after '
                      '%(grace)s s; the calls in flight are waited for '
                      'without them:\n%(stacks)s',
                      {'grace': TAKEN_GRACE,
                       'stacks': concurrency.thread_stacks(stuck)})
        elif stuck:
            LOG.error('RPC server(s) still in %(action)s() after the %(grace)'
                      's s stop grace; exiting without them:\n%(stacks)s',
                      {'action': action, 'grace': grace,
                       'stacks': concurrency.thread_stacks(stuck)})
            return False
    return True


def reports_topic(conf: cfg.ConfigOpts | None = None) -> str:
    """Topic and exchange of compute casts (reports, instance info)."""
    return '%s_reports' % (conf or cfg.CONF).scheduler.topic


def intake_topic(conf: cfg.ConfigOpts | None = None) -> str:
    """Topic of the reports taken once per deployment (API 1.5)."""
    return '%s_intake' % reports_topic(conf)


def intake_target(**kwargs) -> oslo_messaging.Target:
    """Where computes cast their reports from API 1.5 on.

    On the reports exchange (the computes' publish permission names
    it), under a topic of its own: one queue, ``<topic>_reports_intake``,
    that the report workers of every scheduler service consume
    (``[scheduler] report_workers``, ``scheduler.report_consumers``), so
    that the broker hands each report to one of them (competing
    consumers).  The
    worker that takes a report writes it to the inventory; the others
    read it there (``HostManager.refresh_changed_reports``).  Older schedulers
    never consume this queue, which is how a compute tells them apart
    (``SchedulerAPI``).
    """
    return oslo_messaging.Target(exchange=reports_topic(),
                                 topic=intake_topic(), **kwargs)


def alive_topic(conf: cfg.ConfigOpts | None = None) -> str:
    """Topic of the computes' liveness messages (API 1.6)."""
    return '%s_alive' % reports_topic(conf)


def alive_target(**kwargs) -> oslo_messaging.Target:
    """Where computes cast ``report_alive`` from API 1.6 on.

    As the intake (``intake_target``): on the reports exchange, one
    queue (``<topic>_reports_alive``) that the report workers of every
    1.6 scheduler consume, each message taken by one of them.  A queue of
    its own, not the intake's: a 1.5 scheduler consumes the intake and
    would drop a method it does not know, while nothing but a 1.6
    scheduler consumes this one, which is how a compute without a cap
    tells that its liveness messages are heard (``SchedulerAPI``).
    """
    return oslo_messaging.Target(exchange=reports_topic(),
                                 topic=alive_topic(), **kwargs)


def operator_topic(conf: cfg.ConfigOpts | None = None) -> str:
    """Topic and exchange of operator casts (aggregates)."""
    return '%s_ops' % (conf or cfg.CONF).scheduler.topic


def service_names(topic: str, servers: Iterable[str] = ()
                  ) -> tuple[list[str], list[str]]:
    """The queues and exchanges scheduler services of ``topic`` declare.

    oslo.messaging never deletes what it declares: the topic queues,
    each server's own queue (``<topic>.<server>``) and the exchanges
    named like a topic stay on the broker after the last service of a
    test, benchmark or demo has stopped.  This is the one list of them,
    for whoever must tidy up (``delete_names``).  The fanout queues,
    whose names only the broker knows, go with their connections.
    """
    reports = '%s_reports' % topic
    bases = [topic, reports, '%s_ops' % topic, '%s_intake' % reports,
             '%s_alive' % reports]
    queues = bases + ['%s.%s' % (base, server) for base in bases
                      for server in servers]
    exchanges = bases[1:3] + ['%s_fanout' % base for base in bases]
    return queues, exchanges


def delete_names(connection: kombu.Connection, queues: Iterable[str],
                 exchanges: Iterable[str] = ()) -> None:
    """Delete ``queues`` and then ``exchanges`` from the broker.

    Deleting a name that does not exist is not an error for RabbitMQ.
    """
    channel = connection.default_channel
    for name in queues:
        channel.queue_delete(queue=name)
    for name in exchanges:
        channel.exchange_delete(exchange=name)


def tidy_service(topic: str, servers: Iterable[str] = (),
                 queues: Iterable[str] = (),
                 conf: cfg.ConfigOpts | None = None) -> bool:
    """Delete what services of ``topic`` (with ``servers``) declared,
    and ``queues`` besides, from the broker of ``conf``.

    For benchmarks and demos that end their own services.  Never raises:
    a tidy-up must not hide what ran before it.  Returns whether it
    could.
    """
    names, exchanges = service_names(topic, servers)
    try:
        with amqp_connection(conf, connect_timeout=5) as connection:
            delete_names(connection, names + list(queues), exchanges)
    except Exception as e:
        LOG.warning('Could not delete the queues of %(topic)s: %(error)s',
                    {'topic': topic, 'error': e})
        return False
    return True


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


def rabbit_option(conf: cfg.ConfigOpts, url, name: str):
    """``[oslo_messaging_rabbit] name``, or the transport URL's query
    value for it: oslo.messaging lets ``?ssl=1`` and the like override
    the file, and so must every connection made beside it."""
    value = conf.oslo_messaging_rabbit[name] \
        if 'oslo_messaging_rabbit' in conf else None
    if name in (url.query or {}):
        raw = url.query[name]
        value = (strutils.bool_from_string(raw) if isinstance(value, bool)
                 else raw)
    return value


def amqp_ssl_options(conf: cfg.ConfigOpts, url, hostname: str | None):
    """What oslo.messaging's rabbit driver hands kombu as ``ssl``.

    ``False`` without TLS, ``True`` for TLS with the system's defaults,
    or the CA, client certificate and key of ``[oslo_messaging_rabbit]``
    (and the name the broker's certificate must carry): a connection
    that dropped them could not verify a broker signed by a private CA.
    """
    if not rabbit_option(conf, url, 'ssl'):
        return False
    options: dict = {}
    for option, key in (('ssl_key_file', 'keyfile'),
                        ('ssl_cert_file', 'certfile'),
                        ('ssl_version', 'ssl_version')):
        value = rabbit_option(conf, url, option)
        if value:
            options[key] = value
    if 'ssl_version' in options:
        options['ssl_version'] = _ssl_version(options['ssl_version'])
    ca_file = rabbit_option(conf, url, 'ssl_ca_file')
    if ca_file:
        options.update(ca_certs=ca_file, cert_reqs=ssl.CERT_REQUIRED)
        if hostname:
            options['server_hostname'] = hostname
    return options or True


def _ssl_version(name: str):
    """``[oslo_messaging_rabbit] ssl_version`` as the ssl module's constant
    (oslo.messaging's own names: tlsv1_2 and the like)."""
    wanted = 'PROTOCOL_' + name.upper().replace('SSLV', 'SSLv').replace(
        'TLSV', 'TLSv')
    try:
        return getattr(ssl, wanted)
    except AttributeError:
        raise exception.ConfigurationError(
            reason='[oslo_messaging_rabbit] ssl_version %r is not known to '
                   "this Python's ssl module" % name)


def amqp_connection(conf: cfg.ConfigOpts | None = None,
                    connect_timeout: float = 10,
                    transport_url: str | None = None) -> kombu.Connection:
    """A kombu connection to the broker(s) of ``[DEFAULT] transport_url``
    (or of ``transport_url``).

    For what oslo.messaging does not offer: bindings of many routing keys
    to one queue (the simulator) and a quick reachability or login check
    (the CLI, start-up).  It logs in as the transport does: hosts,
    credentials, virtual host, login method and TLS (CA, client
    certificate and key) of ``[oslo_messaging_rabbit]``.
    """
    conf = conf or cfg.CONF
    url = oslo_messaging.TransportURL.parse(
        conf, transport_url or conf.transport_url)
    vhost = url.virtual_host or '/'
    urls = []
    for host in url.hosts:
        user = urllib.parse.quote(host.username or 'guest', safe='')
        password = urllib.parse.quote(host.password or '', safe='')
        urls.append('amqp://%s:%s@%s:%s/%s' % (
            user, password, host.hostname or '127.0.0.1', host.port or 5672,
            urllib.parse.quote(vhost, safe='')))
    # As oslo.messaging: the name to verify is the broker's only with one
    # broker (several brokers need a certificate valid for each).
    hostname = url.hosts[0].hostname if len(url.hosts) == 1 else None
    kwargs = {}
    login_method = rabbit_option(conf, url, 'rabbit_login_method')
    if login_method:
        kwargs['login_method'] = login_method
    return kombu.Connection(';'.join(urls) or 'amqp://',
                            ssl=amqp_ssl_options(conf, url, hostname),
                            connect_timeout=connect_timeout, **kwargs)


#: Transport URL schemes that are RabbitMQ (AMQP 0-9-1 through kombu).
AMQP_SCHEMES = ('rabbit', 'amqp', 'kombu')


def is_amqp(conf: cfg.ConfigOpts | None = None,
            transport_url: str | None = None) -> bool:
    """Whether ``[DEFAULT] transport_url`` (or ``transport_url``) is
    RabbitMQ."""
    conf = conf or cfg.CONF
    url = oslo_messaging.TransportURL.parse(
        conf, transport_url or conf.transport_url)
    return (url.transport or '').split('+')[0] in AMQP_SCHEMES


def transport_url_of(transport) -> str | None:
    """The URL ``get_transport`` opened ``transport`` for (None: the
    configured one, or a transport made elsewhere)."""
    for key, known in _TRANSPORTS.items():
        if known is transport:
            return key or None
    return None


def check_broker(conf: cfg.ConfigOpts | None = None,
                 timeout: float = 5, attempts: int = 2) -> None:
    """Raise ``BrokerUnreachable`` unless the broker takes a connection.

    A command-line tool asks first: a broker that is down is then one
    line with the reason (refused, timed out, login failed) at once,
    rather than a ``MessageBusUnreachable`` at the end of the command's
    timeout (``call``).  ``attempts``: connections tried (kombu pauses
    between two).
    """
    conf = conf or cfg.CONF
    if not is_amqp(conf):
        return
    try:
        with amqp_connection(conf, connect_timeout=timeout) as connection:
            connection.ensure_connection(max_retries=attempts - 1,
                                         timeout=timeout)
    except Exception as e:
        raise exception.BrokerUnreachable(
            url=urls.masked_url(conf.transport_url),
            reason=str(e) or type(e).__name__)


def broker_reachable(conf: cfg.ConfigOpts | None = None,
                     timeout: float = 1.0) -> bool:
    """Whether the broker takes a connection now (one attempt, within
    ``timeout`` seconds); always True for transports without one."""
    try:
        check_broker(conf, timeout=timeout, attempts=1)
    except exception.BrokerUnreachable:
        return False
    return True


class MessageBusUnreachable(oslo_messaging.MessagingTimeout):
    """A call's timeout ran out before the message bus took the call.

    A ``MessagingTimeout``, so callers that handle a scheduler that does
    not answer handle this too; its own type lets a tool say that the
    bus, not the scheduler, is the problem.
    """


class NoServerConsuming(oslo_messaging.MessagingTimeout):
    """A call's timeout ran out while no server consumed its topic.

    The broker had no queue for it (every queue went with a broker
    restart and the servers had not declared theirs again, or none
    runs): nobody took the call.
    """


class _ReplyQueueOpener:
    """Opens one transport's reply queue in a thread of its own.

    A thread of the runtime's ``threading`` (green under eventlet), like
    the callers that wait for it and the driver's lock it takes: no
    native thread meets a green primitive here.

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

#: What a call's thread is given beyond the caller's timeout to end by
#: itself (with the driver's own MessagingTimeout) before the caller
#: stops waiting for it.
CALL_GRACE = 0.2


class _Outcome:
    def __init__(self):
        self.done = threading.Event()
        self.value = None
        self.error: BaseException | None = None


class _CallThreads:
    """Daemon threads of the runtime (green under eventlet) that make
    calls, as many as calls were ever in flight at once.

    Daemons: a call stuck in the driver must not keep the process from
    exiting (a pool of ``concurrent.futures`` is joined at exit).
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._idle = 0
        self._jobs: queue.Queue = queue.Queue()

    def submit(self, func, *args, **kwargs) -> _Outcome:
        outcome = _Outcome()
        with self._lock:
            start = self._idle == 0
            if not start:
                self._idle -= 1
        self._jobs.put((outcome, func, args, kwargs))
        if start:
            threading.Thread(target=self._work, name='rpc-call',
                             daemon=True).start()
        return outcome

    def _work(self) -> None:
        while True:
            outcome, func, args, kwargs = self._jobs.get()
            try:
                outcome.value = func(*args, **kwargs)
            except BaseException as e:  # handed to the caller
                outcome.error = e
            outcome.done.set()
            del outcome, func, args, kwargs
            with self._lock:
                self._idle += 1


_CALLS: tuple | None = None


def _calls() -> _CallThreads:
    """This process's ``_CallThreads`` (a forked child makes its own)."""
    global _CALLS
    found = _CALLS
    if found is None or found[0] != os.getpid():
        with _OPENERS_LOCK:
            found = _CALLS
            if found is None or found[0] != os.getpid():
                found = _CALLS = (os.getpid(), _CallThreads())
    return found[1]


def _within(deadline: float, method: str, timeout: float, func, *args,
            **kwargs):
    """``func(*args, **kwargs)``, or MessageBusUnreachable at the deadline.

    The driver can block a call before publishing it, whatever its
    ``retry``: a pooled connection whose heartbeat thread lost the
    broker reconnects under the connection's lock, with the retries
    (unbounded for a cast's connection) and back-off of whoever first
    opened it, and a call that takes that connection waits for the
    lock.  Made in a thread of ``_calls`` here, a call is waited
    for until its deadline only; a call blocked past it is published
    when the lock is free, and nobody waits for its reply.
    """
    outcome = _calls().submit(func, *args, **kwargs)
    if not outcome.done.wait(max(0.0, deadline - time.monotonic())
                             + CALL_GRACE):
        raise MessageBusUnreachable(
            'Could not send %s within %ss: the connection to the message '
            'bus is being re-established' % (method, timeout))
    if outcome.error is not None:
        raise outcome.error
    return outcome.value


def call(cctxt, ctxt, method: str, **kwargs):
    """``cctxt.call(ctxt, method, **kwargs)``, over within its timeout.

    oslo.messaging's rabbit driver retries publishing a call for as long
    as the broker is unreachable (``retry=None``) and only then starts
    the call's timeout.  Here each attempt publishes once
    (``retry=0``), attempts repeat every ``SEND_RETRY_INTERVAL``
    seconds, and each waits for the reply only for what is left of the
    caller's timeout (the client's, else ``[DEFAULT]
    rpc_response_timeout``); the reply queue (``_ReplyQueueOpener``)
    and the attempts (``_within``) are bounded by it too.  Past the
    deadline the caller gets ``MessageBusUnreachable`` (a
    ``MessagingTimeout``) when the bus took no attempt by then, and
    ``MessagingTimeout`` when no scheduler answered it.  An attempt
    the driver still holds then is published once its connection is
    back, and may be served: a caller retries with the same instance
    uuids, which get the same placements.

    ``cctxt`` is prepared with the AMQP mandatory flag
    (``transport_options=TransportOptions(at_least_once=True)``, as
    ``SchedulerAPI`` does: a prepared context passes it on, its own
    ``prepare`` cannot set it).  Just after a broker restart the
    broker takes calls before the servers have declared their queues
    again: it returns such a call, which is published again until a
    queue takes it; past the deadline the caller gets
    ``NoServerConsuming`` (a ``MessagingTimeout``).
    """
    timeout = cctxt.timeout or cfg.CONF.rpc_response_timeout
    deadline = time.monotonic() + timeout
    if not _reply_queue_open(cctxt.transport, timeout):
        raise MessageBusUnreachable(
            'Could not send %s within %ss: the message bus is unreachable '
            '(no connection for the reply)' % (method, timeout))
    failures = unconsumed = 0
    #: Whether the last attempt reached a broker that had no queue.
    no_queue = False
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0 and no_queue:
            raise NoServerConsuming(
                'No server consumed %s within %ss: no queue of topic %s '
                '(%d attempts)' % (method, timeout, cctxt.target.topic,
                                   unconsumed))
        if remaining <= 0:
            raise MessageBusUnreachable(
                'Could not send %s within %ss: the message bus is '
                'unreachable (%d attempts)' % (method, timeout, failures))
        try:
            return _within(deadline, method, timeout,
                           cctxt.prepare(retry=0, timeout=remaining).call,
                           ctxt, method, **kwargs)
        except oslo_messaging.MessageUndeliverable:
            # Returned by the broker: no queue had it, so nobody serves
            # it; sending it again cannot run it twice.
            unconsumed += 1
            no_queue = True
            if unconsumed == 1:
                # Not a warning: the outcome is the call's (an answer,
                # or NoServerConsuming), and a command prints one line.
                LOG.info('No server consumes %(topic)s for %(method)s '
                         'yet; trying again for %(left).1fs',
                         {'topic': cctxt.target.topic, 'method': method,
                          'left': remaining})
        except kombu.exceptions.OperationalError as e:
            # The connection failed under the call (the broker went
            # away): it may have been sent, so it is not sent again; the
            # caller gets the bus's own typed error, not kombu's.
            raise MessageBusUnreachable(
                'Could not complete %s: the message bus connection failed '
                '(%s)' % (method, e)) from e
        except oslo_messaging.MessageDeliveryFailure as e:
            failures += 1
            no_queue = False
            if failures == 1:
                LOG.warning('Cannot send %(method)s: %(error)s; trying '
                            'again for %(left).1fs',
                            {'method': method, 'error': e,
                             'left': remaining})
        # Not published (a successful attempt returned): again soon.
        time.sleep(max(0.0, min(SEND_RETRY_INTERVAL,
                                deadline - time.monotonic())))
