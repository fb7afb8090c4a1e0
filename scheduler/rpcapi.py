"""SchedulerAPI: the client that callers (a conductor) import.

It speaks the newest scheduler RPC API version the servers can take:
``[upgrade_levels] scheduler`` caps it during rolling upgrades (or
``auto`` asks a running scheduler), and every call falls back to what
the capped version allows, down to the legacy dict API of 1.0.
Objects are backported to the versions the server knows, and the
server backports the Selections it returns to ours.
"""

from oslo_config import cfg
from oslo_log import log as logging
import oslo_messaging

from scheduler import exception
from scheduler import objects
from scheduler.objects import base as objects_base
from scheduler import rpc

LOG = logging.getLogger(__name__)
CONF = cfg.CONF


class SchedulerAPI:
    """Client side of the scheduler RPC API (see SchedulerManager)."""

    VERSION = '1.4'

    def __init__(self, transport=None, timeout: int | None = None,
                 cast_retry: int | None = None):
        """``cast_retry``: how often a state-changing cast is tried again
        while the broker is unreachable.  None (oslo.messaging's
        default) waits until it is back, as a compute's reports should;
        a command-line tool sets a small number, so that it ends.
        """
        self._transport = transport
        self._timeout = timeout
        self._cast_retry = cast_retry
        self._client = None
        self._cast_clients: dict = {}
        self._server_manifest: dict | None = None

    # -- version negotiation --------------------------------------------

    @property
    def client(self):
        if self._client is None:
            cap = CONF.upgrade_levels.scheduler
            manifest = None
            if cap == 'auto':
                cap, manifest = self._ask_server_version()
            target = oslo_messaging.Target(topic=CONF.scheduler.topic,
                                           version='1.0')
            self._client = rpc.get_client(target, version_cap=cap,
                                          transport=self._transport,
                                          timeout=self._timeout)
            self._server_manifest = manifest
            LOG.debug('Scheduler RPC client capped at %s', cap or 'latest')
        return self._client

    def _ask_server_version(self) -> tuple:
        target = oslo_messaging.Target(topic=CONF.scheduler.topic,
                                       version='1.0')
        probe = rpc.get_client(target, transport=self._transport,
                               timeout=self._timeout)
        from scheduler import context as ctx_mod
        try:
            info = rpc.call(probe.prepare(version='1.2'),
                            ctx_mod.get_admin_context(), 'get_version_info')
        except oslo_messaging.MessagingTimeout:
            # No answer is not an old scheduler: nothing is cached, the
            # next call asks again.
            raise
        except (oslo_messaging.RemoteError,
                oslo_messaging.MessagingException) as e:
            # A 1.0/1.1 server has no get_version_info.
            LOG.info('Scheduler did not tell its version (%s); assuming '
                     '1.1', e.__class__.__name__)
            return '1.1', objects_base.MANIFEST_AT_RPC_1_1
        return info['rpc_version'], info['objects']

    def can_send_version(self, version: str) -> bool:
        return self.client.can_send_version(version)

    def _manifest_for_server(self) -> dict | None:
        """Object versions the server can read, when not our own."""
        if self._server_manifest is not None:
            return self._server_manifest
        if not self.client.can_send_version('1.2'):
            return objects_base.MANIFEST_AT_RPC_1_1
        return None

    def _backport(self, obj):
        manifest = self._manifest_for_server()
        if manifest is None:
            return obj
        return objects_base.obj_to_primitive_for(obj, manifest)

    # -- calls ------------------------------------------------------------

    def select_destinations(self, ctxt, spec_obj, instance_uuids=None,
                            return_objects: bool = True,
                            return_alternates: bool = False):
        """Choose destinations for ``spec_obj.num_instances`` instances.

        With ``return_objects`` (the default) returns one list of
        Selections per instance (first choice, then alternates when
        ``return_alternates``); otherwise the legacy list of dicts.
        Raises ``NoValidHost`` when the instances cannot all be placed.
        """
        client = self.client
        if client.can_send_version('1.1'):
            version = '1.2' if client.can_send_version('1.2') else '1.1'
            kwargs = {'spec_obj': self._backport(spec_obj),
                      'instance_uuids': instance_uuids,
                      'return_objects': return_objects,
                      'return_alternates': return_alternates}
            if version == '1.2':
                kwargs['peer_manifest'] = objects_base.obj_manifest()
            return rpc.call(client.prepare(version=version), ctxt,
                            'select_destinations', **kwargs)
        request_spec = spec_obj.to_legacy_request_spec_dict()
        if instance_uuids:
            request_spec['instance_uuids'] = list(instance_uuids)
        dests = rpc.call(
            client.prepare(version='1.0'), ctxt, 'select_destinations',
            request_spec=request_spec,
            filter_properties=spec_obj.to_legacy_filter_properties_dict())
        if not return_objects:
            return dests
        return [[objects.Selection.from_legacy_dict(d)] for d in dests]

    def schedule_run_instance(self, ctxt, spec_obj, instance_uuids) -> None:
        """Cast: place the instances and start them on their hosts."""
        client = self.client
        if client.can_send_version('1.1'):
            client.prepare(version='1.1').cast(
                ctxt, 'schedule_run_instance',
                spec_obj=self._backport(spec_obj),
                instance_uuids=list(instance_uuids))
            return
        request_spec = spec_obj.to_legacy_request_spec_dict()
        request_spec['instance_uuids'] = list(instance_uuids)
        client.prepare(version='1.0').cast(
            ctxt, 'schedule_run_instance', request_spec=request_spec,
            filter_properties=spec_obj.to_legacy_filter_properties_dict())

    # Casts that change state: from 1.4 on their own topics and
    # exchanges (see rpc.reports_topic/operator_topic), so that broker
    # permissions can keep them to computes and operators.

    def update_service_capabilities(self, ctxt, host_state) -> None:
        """Fanout cast from a compute agent: one node's state."""
        self._state_cast(rpc.reports_topic(), '1.0', ctxt,
                         'update_service_capabilities',
                         host_state=self._backport(host_state))

    def update_instance_info(self, ctxt, host_name, instance_uuids) -> None:
        self._state_cast(rpc.reports_topic(), '1.1', ctxt,
                         'update_instance_info', host_name=host_name,
                         instance_uuids=list(instance_uuids))

    def delete_instance_info(self, ctxt, host_name, instance_uuid) -> None:
        """Needs an admin context: it releases the instance's resources."""
        self._state_cast(rpc.reports_topic(), '1.1', ctxt,
                         'delete_instance_info', host_name=host_name,
                         instance_uuid=instance_uuid)

    def sync_instance_info(self, ctxt, host_name, instance_uuids) -> None:
        """Needs an admin context: placements not listed are dropped."""
        self._state_cast(rpc.reports_topic(), '1.1', ctxt,
                         'sync_instance_info', host_name=host_name,
                         instance_uuids=list(instance_uuids))

    def update_aggregates(self, ctxt, aggregates) -> None:
        """Needs an admin context (an operator's)."""
        self._state_cast(rpc.operator_topic(), '1.1', ctxt,
                         'update_aggregates',
                         aggregates=[self._backport(a) for a in aggregates])

    def delete_aggregate(self, ctxt, aggregate) -> None:
        """Needs an admin context (an operator's)."""
        self._state_cast(rpc.operator_topic(), '1.1', ctxt,
                         'delete_aggregate',
                         aggregate=self._backport(aggregate))

    def explain(self, ctxt, spec_obj) -> dict:
        """The scheduler's decisions for ``spec_obj``; nothing is claimed.

        Needs a 1.3 scheduler; admins get per-host reasons and ranking.
        """
        if not self.client.can_send_version('1.3'):
            raise exception.InvalidRequest(
                reason='explain needs scheduler API 1.3; this client is '
                       'capped lower by [upgrade_levels] scheduler')
        return rpc.call(self.client.prepare(version='1.3'), ctxt,
                        'explain', spec_obj=self._backport(spec_obj))

    def get_version_info(self, ctxt) -> dict:
        return rpc.call(self.client.prepare(version='1.2'), ctxt,
                        'get_version_info')

    def _state_cast(self, topic: str, legacy_version: str, ctxt,
                    method: str, **kwargs) -> None:
        """Fanout cast to ``topic`` (1.4), or to the request topic before.

        ``legacy_version`` is the version that introduced ``method`` on
        the request topic: below it the cast is not sent at all.
        """
        client = self.client
        if client.can_send_version('1.4'):
            if topic not in self._cast_clients:
                self._cast_clients[topic] = rpc.get_client(
                    rpc.own_exchange_target(topic, version='1.4'),
                    transport=self._transport, timeout=self._timeout)
            self._cast_clients[topic].prepare(
                fanout=True, retry=self._cast_retry).cast(
                    ctxt, method, **kwargs)
            return
        if not client.can_send_version(legacy_version):
            LOG.debug('Not sending %s: the scheduler API is capped below '
                      '%s', method, legacy_version)
            return
        client.prepare(fanout=True, version=legacy_version,
                       retry=self._cast_retry).cast(ctxt, method, **kwargs)
