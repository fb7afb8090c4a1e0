"""The client the scheduler uses to cast to compute agents."""

from oslo_config import cfg
import oslo_messaging

from scheduler import rpc

CONF = cfg.CONF


class ComputeAPI:
    """Casts to ``Target(topic=[compute] topic, server=<host>)``.

    API version history:

    * 1.0 - run_instance(instance_uuid, node, spec_obj, limits),
            terminate_instance(instance_uuid)
    """

    VERSION = '1.0'

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
        cctxt = self.client.prepare(server=host, version='1.0')
        cctxt.cast(context, 'run_instance', instance_uuid=instance_uuid,
                   node=node, spec_obj=spec_obj, limits=limits)

    def terminate_instance(self, context, host: str,
                           instance_uuid: str) -> None:
        cctxt = self.client.prepare(server=host, version='1.0')
        cctxt.cast(context, 'terminate_instance', instance_uuid=instance_uuid)
