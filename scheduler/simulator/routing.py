"""How casts addressed to many simulated hosts reach one RPC server.

The scheduler casts ``run_instance`` to ``Target(topic=[compute] topic,
server=<host>)``, as it would to a real compute agent.  Over RabbitMQ
oslo.messaging publishes that cast on the ``control_exchange`` topic
exchange with the routing key ``<topic>.<host>``, and a real compute's
RPC server consumes a queue bound with that key.

A simulator of 10,000 hosts cannot run 10,000 RPC servers: over
RabbitMQ each one opens its own broker connection, and the broker
allows about a thousand.  So the simulator runs one RPC server per
process, on ``Target(topic, server=<fleet server name>)``, and adds one
binding per simulated host to that server's queue (``<topic>.<server
name>``): routing key ``<topic>.<host>`` -> the fleet's queue.  The
scheduler's contract does not change; the fleet's endpoint finds the
host from the cast's ``node`` argument (``run_instance``) or from the
instance (``terminate_instance``).

The bindings are made with kombu on one short-lived connection (the
only other connection the process opens besides its transport's) and
go away with the queue, which the fleet deletes when it stops.

Drivers other than RabbitMQ (``fake://`` in the demo and unit tests,
all in one process, no connections) get one RPC server per host on the
shared transport instead: ``needs_server_per_host()`` says which.
"""

from oslo_config import cfg
from oslo_log import log as logging

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


def bind_hosts(conf: cfg.ConfigOpts, topic: str, server: str,
               hosts, stopping=None) -> int:
    """Route ``<topic>.<host>`` for every host to the server's queue.

    The server must have started (its queue and the exchange exist).
    Bindings go out in batches without waiting for each reply; the
    broker confirms each batch.  Returns how many hosts were bound;
    stops early when ``stopping`` (a threading.Event) is set.
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
