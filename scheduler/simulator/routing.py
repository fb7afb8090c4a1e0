"""How casts addressed to many simulated hosts reach one RPC server.

The scheduler casts ``run_instance`` to ``Target(topic=[compute] topic,
server=<host>)``, as it would to a real compute agent.  Over RabbitMQ
oslo.messaging publishes that cast on the ``control_exchange`` topic
exchange with the routing key ``<topic>.<host>``, and a real compute's
RPC server consumes a queue bound with that key.

Over RabbitMQ an RPC server per simulated host would open more broker
connections than the broker allows.  So the simulator runs one RPC server per
process, on ``Target(topic, server=<fleet server name>)``, and adds one
binding per simulated host to that server's queue (``<topic>.<server
name>``): routing key ``<topic>.<host>`` -> the fleet's queue.  The
scheduler's contract does not change; the fleet's endpoint finds the
host from the cast's ``node`` argument (``run_instance``) or from the
instance (``terminate_instance``).

The bindings are made with kombu on one short-lived connection (the
only other connection the process opens besides its transport's) and
go away with the queue, which the fleet deletes when it stops.

They also go when the broker loses the queue (a restart, for a
non-durable queue, or someone deleting it): oslo.messaging declares the
queue again when it reconnects, with its own binding only, and every
build cast to a simulated host would then be unroutable.  So
``bind_hosts`` binds one more key last, the fleet's probe key, and
``BindingGuard`` casts to it every few seconds with the mandatory flag:
a cast the broker cannot route means the keys are gone, and they are
bound again.

Drivers other than RabbitMQ (``fake://`` in the demo and unit tests,
all in one process, no connections) get one RPC server per host on the
shared transport instead: ``needs_server_per_host()`` says which.
"""

from oslo_config import cfg
from oslo_log import log as logging
import oslo_messaging

from scheduler import compute_rpcapi
from scheduler import context as ctx_mod
from scheduler import rpc

LOG = logging.getLogger(__name__)

#: How many bindings go out before the broker is asked to confirm them.
BIND_BATCH = 500


def needs_server_per_host(conf: cfg.ConfigOpts) -> bool:
    """Drivers without bindings get one RPC server per simulated host."""
    return not rpc.is_amqp(conf)


def exchange_name(conf: cfg.ConfigOpts) -> str:
    """The exchange oslo.messaging publishes casts on."""
    return conf.control_exchange


def queue_name(topic: str, server: str) -> str:
    """The queue oslo.messaging's RabbitMQ driver declares for a server."""
    return '%s.%s' % (topic, server)


def probe_server(server: str) -> str:
    """The server name whose routing key says the hosts' keys are bound.

    Never a simulated host's name, which ends in ``-<number>``.
    """
    return '%s.bindings' % server


def bind_hosts(conf: cfg.ConfigOpts, topic: str, server: str,
               hosts, stopping=None) -> int:
    """Route ``<topic>.<host>`` for every host to the server's queue.

    The server must have started (its queue and the exchange exist).
    Bindings go out in batches without waiting for each reply; the
    broker confirms each batch.  The probe key (``probe_server``) is
    bound last, once every host's is.  Returns how many hosts were
    bound; stops early, without the probe key, when ``stopping`` (a
    threading.Event) is set.
    """
    queue = queue_name(topic, server)
    exchange = exchange_name(conf)
    bound = 0
    with rpc.amqp_connection(conf) as connection:
        channel = connection.channel()
        try:
            for host in hosts:
                if stopping is not None and stopping.is_set():
                    break
                channel.queue_bind(queue=queue, exchange=exchange,
                                   routing_key='%s.%s' % (topic, host),
                                   nowait=True)
                bound += 1
                if bound % BIND_BATCH == 0:
                    # A synchronous request: the broker has processed
                    # every binding before it, or the channel failed.
                    channel.queue_declare(queue=queue, passive=True)
            channel.queue_declare(queue=queue, passive=True)
            if stopping is None or not stopping.is_set():
                channel.queue_bind(
                    queue=queue, exchange=exchange,
                    routing_key='%s.%s' % (topic, probe_server(server)))
        finally:
            channel.close()
    LOG.debug('Bound %(count)d host routing keys to queue %(queue)s on '
              'exchange %(exchange)s', {'count': bound, 'queue': queue,
                                        'exchange': exchange})
    return bound


def delete_queue(conf: cfg.ConfigOpts, topic: str, server: str) -> None:
    """Delete the fleet's queue, and with it every host binding.

    Nothing else consumes it: its name is unique to this process.
    """
    queue = queue_name(topic, server)
    try:
        with rpc.amqp_connection(conf) as connection:
            channel = connection.channel()
            channel.queue_delete(queue=queue)
            channel.close()
    except Exception as e:
        LOG.warning('Could not delete the fleet queue %(queue)s: %(error)s',
                    {'queue': queue, 'error': e})


def tidy_up(conf: cfg.ConfigOpts, topic: str) -> list:
    """Delete the compute topic queue if nothing else uses it; say what
    stays on the broker.

    oslo.messaging declares ``<topic>`` for every RPC server of the
    topic and never deletes it.  The broker deletes it here only while
    it has no consumer and no message (another simulator or compute
    keeps it).  The exchanges stay: a scheduler service may still
    publish on them.  Returns the names left, which are also logged
    with how to remove them.
    """
    left = []
    try:
        with rpc.amqp_connection(conf) as connection:
            channel = connection.channel()
            try:
                channel.queue_delete(queue=topic, if_unused=True,
                                     if_empty=True)
            finally:
                if channel.is_open:
                    channel.close()
    except Exception as e:
        LOG.debug('Queue %(queue)s kept: %(error)s',
                  {'queue': topic, 'error': e})
        left.append('queue %s' % topic)
    exchanges = [exchange_name(conf), '%s_fanout' % rpc.reports_topic(conf)]
    left += ['exchange %s' % name for name in exchanges]
    LOG.info('Left on the broker for other processes and the next run: '
             '%(left)s. Once no scheduler or compute uses them, remove '
             'them with rabbitmqadmin (delete queue name=... / delete '
             'exchange name=...), or run the simulator in a virtual host '
             'of its own and delete that.', {'left': ', '.join(left)})
    return left


class BindingGuard:
    """Binds the hosts' routing keys again when the broker lost them.

    ``check()`` casts ``bindings_probe`` to the fleet's probe key with
    the mandatory flag, on the fleet's own transport: the fleet's
    endpoint receives it and does nothing.  When the broker cannot
    route it, the queue was declared again without the fleet's keys:
    they are bound again, probe key last.  One cast per check, whatever
    the fleet's size; the hosts are bound again only when lost.
    """

    def __init__(self, conf: cfg.ConfigOpts, transport, topic: str,
                 server: str, hosts):
        self.conf = conf
        self.topic = topic
        self.server = server
        self.hosts = list(hosts)
        #: How many times the keys were found lost and bound again.
        self.rebinds = 0
        target = oslo_messaging.Target(topic=topic,
                                       server=probe_server(server),
                                       version='1.0')
        self._probe = rpc.get_client(target, transport=transport).prepare(
            transport_options=compute_rpcapi.MANDATORY, retry=0)

    def check(self, stopping=None) -> bool:
        """Whether the keys were in place; binds them again if not.

        Errors (the broker unreachable, the queue not declared again
        yet) are logged; the next check tries again.
        """
        try:
            self._probe.cast(ctx_mod.get_admin_context(), 'bindings_probe')
            return True
        except oslo_messaging.MessageUndeliverable:
            pass
        except Exception as e:
            # The broker is unreachable (oslo.messaging or kombu says so
            # in its own words): the reconnection is logged already.
            LOG.debug('Could not probe the fleet queue bindings: %s', e)
            return False
        queue = queue_name(self.topic, self.server)
        try:
            bound = bind_hosts(self.conf, self.topic, self.server,
                               self.hosts, stopping=stopping)
        except Exception as e:  # the queue may not be back yet
            LOG.warning('The queue %(queue)s has lost the routing keys of '
                        'its hosts, and binding them again failed: '
                        '%(error)s; trying again later',
                        {'queue': queue, 'error': e})
            return False
        self.rebinds += 1
        LOG.warning('The queue %(queue)s had lost the routing keys of its '
                    'hosts (the broker restarted, or the queue was deleted '
                    'and declared again): bound %(count)d host(s) again',
                    {'queue': queue, 'count': bound})
        return False
