"""The client the scheduler uses to cast to compute agents."""

from oslo_config import cfg
import oslo_messaging

from scheduler import rpc

CONF = cfg.CONF

#: Casts the broker must route to a queue, or hand back as an error.
MANDATORY = oslo_messaging.TransportOptions(at_least_once=True)

#: What a cast that did not reach a compute's queue raises.
UNDELIVERED = (oslo_messaging.MessageUndeliverable,
               oslo_messaging.MessageDeliveryFailure,
               oslo_messaging.ClientSendError)


class ComputeAPI:
    """Casts to ``Target(topic=[compute] topic, server=<host>)``.

    API version history:

    * 1.0 - run_instance(instance_uuid, node, spec_obj, limits),
            terminate_instance(instance_uuid)
    * 1.1 - send_report(node): send the node's full report now; only
            computes that send liveness messages (scheduler API 1.6)
            are asked, and they serve it
    """

    VERSION = '1.1'

    def __init__(self, transport=None):
        self._transport = transport
        self._client = None

    @property
    def client(self):
        # Created on first use: the transport must not be opened before
        # the service forks its workers.
        if self._client is None:
            target = oslo_messaging.Target(topic=CONF.compute.topic,
                                           version=self.VERSION)
            self._client = rpc.get_client(target, transport=self._transport)
        return self._client

    def run_instance(self, context, host: str, node: str, instance_uuid: str,
                     spec_obj, limits=None) -> None:
        """Cast the build to ``host``; raises if the broker cannot route it.

        Published with the AMQP mandatory flag and publisher confirms: a
        cast to a host whose queue does not exist (the compute is gone,
        or has not re-declared it since a broker restart) raises
        ``oslo_messaging.MessageUndeliverable`` instead of vanishing, and
        the driver tries another host (``Scheduler.schedule_each``).  An
        unreachable broker blocks until it is back (``retry=None``).
        """
        self._cast(host, '1.0', context, 'run_instance',
                   instance_uuid=instance_uuid, node=node,
                   spec_obj=spec_obj, limits=limits)

    def send_report(self, context, host: str, node: str) -> None:
        """Ask ``host`` for its full report of ``node`` (1.1).

        The scheduler asks when a liveness message (scheduler API 1.6)
        names a report it does not hold.  With the mandatory flag: a
        compute that is gone raises here, and its next liveness message
        asks again.
        """
        self._cast(host, '1.1', context, 'send_report', node=node)

    def terminate_instance(self, context, host: str,
                           instance_uuid: str) -> None:
        """Cast the termination to ``host``; raises if nothing takes it
        (as ``run_instance``), so that the sender can try again instead
        of the instance staying up while its caller thinks it gone."""
        self._cast(host, '1.0', context, 'terminate_instance',
                   instance_uuid=instance_uuid)

    def _cast(self, host: str, version: str, context, method: str,
              **kwargs) -> None:
        self.client.prepare(server=host, version=version,
                            transport_options=MANDATORY).cast(
                                context, method, **kwargs)
