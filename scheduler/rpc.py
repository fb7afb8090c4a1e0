"""Transport, serializer, servers and clients: the bus, in one place."""

import urllib.parse

import kombu
from oslo_config import cfg
from oslo_log import log as logging
import oslo_messaging
from oslo_messaging.rpc import dispatcher as rpc_dispatcher
from oslo_messaging.rpc import server as rpc_server

from scheduler import concurrency
from scheduler import context as scheduler_context
from scheduler import exception
from scheduler.objects import base as objects_base
from scheduler import urls

LOG = logging.getLogger(__name__)

# Exceptions raised by these modules in the service are re-raised with
# their own type in callers.
ALLOWED_EXMODS = [exception.__name__]

_TRANSPORTS: dict = {}


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
        _TRANSPORTS[key] = oslo_messaging.get_rpc_transport(
            conf, url=url, allowed_remote_exmods=ALLOWED_EXMODS)
    return _TRANSPORTS[key]


def get_notification_transport(conf: cfg.ConfigOpts | None = None):
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
    """The server's serializer: unreadable arguments become typed replies.

    A malformed or too-new object in a request is answered to the caller
    as ``MalformedObject`` / ``IncompatibleObjectVersion``, with one
    warning line here instead of a traceback, and the server keeps
    serving.
    """

    def deserialize_entity(self, ctxt, entity):
        try:
            return super().deserialize_entity(ctxt, entity)
        except exception.MalformedObject as error:
            LOG.warning('Rejected a request argument: %s', error)
            # ExpectedException keeps the current exception as the
            # reply and makes oslo.messaging log it at debug level only.
            raise oslo_messaging.ExpectedException()


class Dispatcher(rpc_dispatcher.RPCDispatcher):
    """oslo.messaging's dispatcher, quiet about callers' mistakes.

    An unknown method or an API version this server does not speak is
    the caller's error: it still gets ``NoSuchMethod`` /
    ``UnsupportedVersion`` back, and the service logs one warning line
    instead of a traceback.
    """

    def dispatch(self, incoming):
        try:
            return super().dispatch(incoming)
        except (rpc_dispatcher.NoSuchMethod,
                rpc_dispatcher.UnsupportedVersion) as error:
            LOG.warning('Rejected a call: %s', error)
            raise oslo_messaging.ExpectedException()


def get_server(target: oslo_messaging.Target, endpoints: list,
               transport: oslo_messaging.Transport | None = None):
    """An RPC server with our serializer, dispatcher and executor.

    Built as ``oslo_messaging.get_rpc_server`` does, with our dispatcher.
    """
    dispatcher = Dispatcher(endpoints, ServerSerializer(),
                            rpc_dispatcher.DefaultRPCAccessPolicy)
    return rpc_server.RPCServer(transport or get_transport(), target,
                                dispatcher, concurrency.EXECUTOR)


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

    oslo.messaging retries a connection for ever (the reply queue of a
    call has no retry limit): a command-line tool asks first, so that a
    broker that is down is one line, not a hang.
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
