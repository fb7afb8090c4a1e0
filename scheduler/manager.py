"""SchedulerManager: the RPC endpoint of the scheduler service.

A thin edge: it checks what arrives, converts legacy dicts, hands the
work to the configured driver and shapes the answer for the caller's
API and object versions.  The logic lives in the driver and the
HostManager.
"""

import contextlib
import time

from oslo_config import cfg
from oslo_log import log as logging
import oslo_messaging
from oslo_service import periodic_task

from scheduler import concurrency
from scheduler import driver as driver_mod
from scheduler import exception
from scheduler import loader
from scheduler import metrics
from scheduler import notifications
from scheduler import objects
from scheduler.objects import base as objects_base

LOG = logging.getLogger(__name__)
CONF = cfg.CONF

#: Largest num_instances one request may ask for.
MAX_INSTANCES_PER_REQUEST = 1000

_EXPECTED = (exception.NoValidHost, exception.InvalidRequest,
             exception.MalformedObject)


_OUTCOMES = ((exception.NoValidHost, 'no_valid_host'),
             (exception.InvalidRequest, 'invalid_request'),
             (exception.MalformedObject, 'malformed_object'))


@contextlib.contextmanager
def _measured(method: str):
    """Count a call and time it, labelled with how it ended."""
    started = time.monotonic()
    outcome = 'error'
    try:
        yield
        outcome = 'success'
    except Exception as e:
        outcome = next((label for cls, label in _OUTCOMES
                        if isinstance(e, cls)), 'error')
        raise
    finally:
        metrics.record_request(method, outcome, time.monotonic() - started)


def load_driver(name: str | None = None) -> driver_mod.Scheduler:
    """Instantiate the driver named by ``[scheduler] driver``."""
    name = name or CONF.scheduler.driver
    try:
        cls = loader.load_class(loader.DRIVER_NAMESPACE, name)
    except exception.PluginLoadError as e:
        raise exception.SchedulerDriverNotFound(
            name=name, namespace=loader.DRIVER_NAMESPACE,
            reason=e.kwargs.get('reason'))
    if not (isinstance(cls, type) and issubclass(cls, driver_mod.Scheduler)):
        raise exception.SchedulerDriverNotFound(
            name=name, namespace=loader.DRIVER_NAMESPACE,
            reason='%r is not a subclass of scheduler.driver.Scheduler'
            % (cls,))
    return cls()


class SchedulerManager(periodic_task.PeriodicTasks):
    """Chooses hosts for instances.

    API version history:

    * 1.0 - the legacy dict API of the seed: select_destinations(
            request_spec, filter_properties) returning one
            ``{'host', 'nodename', 'limits'}`` dict per instance;
            schedule_run_instance(request_spec, filter_properties);
            update_service_capabilities(host_state)
    * 1.1 - versioned objects: select_destinations(spec_obj,
            instance_uuids, return_objects, return_alternates) returning
            Selections; schedule_run_instance(spec_obj, instance_uuids);
            update/delete/sync_instance_info; update_aggregates,
            delete_aggregate
    * 1.2 - get_version_info(); select_destinations(peer_manifest):
            Selections backported to the caller's object versions
    * 1.3 - explain(spec_obj): the pipeline's decisions, nothing claimed
    """

    target = oslo_messaging.Target(version='1.3')

    def __init__(self, driver: driver_mod.Scheduler | None = None):
        super().__init__(CONF)
        # spacing=0 in the decorators means oslo's 60 s default: run
        # every task at [scheduler] periodic_task_interval instead.
        self._periodic_spacing = dict.fromkeys(
            self._periodic_spacing, CONF.scheduler.periodic_task_interval)
        self.driver = driver or load_driver()

    # -- RPC: placement -------------------------------------------------

    @oslo_messaging.expected_exceptions(*_EXPECTED)
    def select_destinations(self, ctxt, request_spec=None,
                            filter_properties=None, spec_obj=None,
                            instance_uuids=None, return_objects=False,
                            return_alternates=False, peer_manifest=None):
        """Choose destinations; see the version history for the shapes."""
        with _measured('select_destinations'):
            return self._select_destinations(
                ctxt, request_spec, filter_properties, spec_obj,
                instance_uuids, return_objects, return_alternates,
                peer_manifest)

    def _select_destinations(self, ctxt, request_spec, filter_properties,
                             spec_obj, instance_uuids, return_objects,
                             return_alternates, peer_manifest):
        spec_obj = self._spec_from_args(request_spec, filter_properties,
                                        spec_obj)
        if instance_uuids is None and isinstance(request_spec, dict):
            instance_uuids = request_spec.get('instance_uuids')
        uuids = self._instance_uuids(spec_obj, instance_uuids)
        driver_name = type(self.driver).__name__
        notifications.select_start(ctxt, spec_obj, driver_name)
        try:
            selections = self.driver.select_destinations(
                ctxt, spec_obj, uuids, return_alternates=return_alternates)
        except Exception as e:
            notifications.select_error(ctxt, spec_obj, driver_name, e)
            if isinstance(e, exception.NoValidHost):
                # The driver logged why at INFO (the filter walk names
                # the filter that emptied the list).
                LOG.debug('No valid host for instance(s) %(uuids)s: '
                          '%(reason)s', {'uuids': uuids or '-',
                                         'reason': e.kwargs.get('reason')})
            raise
        notifications.select_end(ctxt, spec_obj, driver_name, selections)
        metrics.record_selections(driver_name, len(selections))
        if not return_objects:
            return [alts[0].to_legacy_dict() for alts in selections]
        if peer_manifest is None:
            # A 1.1 caller: it reads the objects API 1.1 shipped with.
            peer_manifest = objects_base.MANIFEST_AT_RPC_1_1
        if objects_base.needs_backport(peer_manifest):
            return [[objects_base.obj_to_primitive_for(s, peer_manifest)
                     for s in alts] for alts in selections]
        return selections

    def schedule_run_instance(self, ctxt, request_spec=None,
                              filter_properties=None, spec_obj=None,
                              instance_uuids=None):
        """Cast: place each instance and cast run_instance to its host."""
        try:
            spec_obj = self._spec_from_args(request_spec, filter_properties,
                                            spec_obj)
            if instance_uuids is None and isinstance(request_spec, dict):
                instance_uuids = request_spec.get('instance_uuids')
            uuids = self._instance_uuids(spec_obj, instance_uuids)
        except exception.SchedulerException as e:
            LOG.warning('Dropped schedule_run_instance: %s', e)
            return
        if not uuids:
            LOG.warning('Dropped schedule_run_instance: no instance uuids')
            return
        self.driver.schedule_run_instance(ctxt, spec_obj, uuids)

    @oslo_messaging.expected_exceptions(*_EXPECTED)
    def explain(self, ctxt, spec_obj=None):
        """Why hosts pass or fail for ``spec_obj``, without placing it.

        Returns a dict: per-filter counts, per-host rejection reasons and
        the weighed ranking with each weigher's contribution.  Per-host
        details name hosts, so only admins get them.
        """
        with _measured('explain'):
            spec_obj = self._spec_from_args(None, None, spec_obj)
            result = self.driver.explain(ctxt, spec_obj)
        if not getattr(ctxt, 'is_admin', False):
            result['rejected'] = {}
            result['ranking'] = []
        return result

    def get_version_info(self, ctxt):
        """This service's RPC API version and object versions."""
        return {'rpc_version': self.target.version,
                'objects': objects_base.obj_manifest()}

    # -- RPC: what computes and operators report ------------------------

    def update_service_capabilities(self, ctxt, host_state=None, **kwargs):
        """Fanout cast from a compute: the state of one of its nodes."""
        if not isinstance(host_state, objects.HostState):
            LOG.warning('Ignored a capabilities report that is not a '
                        'HostState: %.200r', host_state)
            return
        try:
            self.driver.update_service_capabilities(host_state)
            metrics.record_report()
        except Exception as e:
            LOG.warning('Ignored the report of %s/%s: %s',
                        host_state.obj_get('host'),
                        host_state.obj_get('nodename'), e)

    def update_instance_info(self, ctxt, host_name, instance_uuids):
        self.driver.host_manager.update_instance_info(host_name,
                                                      list(instance_uuids))

    def delete_instance_info(self, ctxt, host_name, instance_uuid):
        self.driver.host_manager.delete_instance_info(host_name,
                                                      instance_uuid)

    def sync_instance_info(self, ctxt, host_name, instance_uuids):
        """A compute's full list of instances, sent now and then."""
        self.driver.host_manager.sync_instance_info(host_name,
                                                    list(instance_uuids))

    def update_aggregates(self, ctxt, aggregates):
        """Fanout cast: aggregates were created or changed."""
        try:
            self.driver.host_manager.update_aggregates(list(aggregates))
            LOG.info('Aggregate(s) %s updated',
                     ', '.join(a.name for a in aggregates))
        except Exception as e:
            LOG.warning('Ignored an aggregate update: %s', e)

    def delete_aggregate(self, ctxt, aggregate):
        self.driver.host_manager.delete_aggregate(aggregate)
        LOG.info('Aggregate %s deleted', aggregate.name)

    # -- housekeeping ---------------------------------------------------

    @periodic_task.periodic_task(spacing=0, run_immediately=True)
    def _flush_inventory(self, ctxt):
        # Thousands of rows: written off the event loop so that requests
        # keep being served meanwhile.
        concurrency.run_blocking(self.driver.host_manager.flush)

    @periodic_task.periodic_task(spacing=0)
    def _check_down_hosts(self, ctxt):
        self.driver.host_manager.check_down_hosts()
        self.driver.host_manager.forget_deleted_nodes()

    @periodic_task.periodic_task(spacing=0)
    def _expire_claims(self, ctxt):
        concurrency.run_blocking(self.driver.host_manager.expire_claims)

    @periodic_task.periodic_task(spacing=0)
    def _refresh_aggregates(self, ctxt):
        self.driver.host_manager.refresh_aggregates()

    @periodic_task.periodic_task(spacing=0, run_immediately=True)
    def _publish_metrics(self, ctxt):
        hosts = self.driver.host_manager
        metrics.set_hosts(known=len(hosts.get_all_host_states()),
                          up=len(hosts.get_up_host_states()))
        metrics.flush()

    def reset(self) -> None:
        """Apply a reloaded configuration to new requests (SIGHUP)."""
        self.driver.reset()

    # -- argument checks ------------------------------------------------

    @staticmethod
    def _spec_from_args(request_spec, filter_properties, spec_obj):
        if spec_obj is None:
            if not isinstance(request_spec, dict):
                raise exception.InvalidRequest(
                    reason='neither spec_obj nor a request_spec dict given')
            if filter_properties is not None and not isinstance(
                    filter_properties, dict):
                raise exception.InvalidRequest(
                    reason='filter_properties must be a dict')
            try:
                spec_obj = objects.RequestSpec.from_primitives(
                    request_spec, filter_properties or {})
            except (ValueError, TypeError, AttributeError, KeyError) as e:
                raise exception.InvalidRequest(
                    reason='unreadable legacy request: %s' % e)
        if not isinstance(spec_obj, objects.RequestSpec):
            raise exception.InvalidRequest(
                reason='spec_obj is a %s, not a RequestSpec'
                % type(spec_obj).__name__)
        if not spec_obj.obj_attr_is_set('flavor'):
            raise exception.InvalidRequest(reason='the request has no flavor')
        if (spec_obj.get_scheduler_hint('group')
                and spec_obj.obj_get('instance_group') is None):
            # Ignoring it would silently break (anti-)affinity.
            raise exception.InvalidRequest(
                reason='the "group" hint must be resolved by the caller '
                       'into instance_group (policy, rules, members, '
                       'hosts); this scheduler keeps no server groups')
        num = spec_obj.num_instances
        if num < 1 or num > MAX_INSTANCES_PER_REQUEST:
            raise exception.InvalidRequest(
                reason='num_instances must be 1..%d, not %d'
                % (MAX_INSTANCES_PER_REQUEST, num))
        return spec_obj

    @staticmethod
    def _instance_uuids(spec_obj, instance_uuids) -> list:
        if instance_uuids is None:
            legacy = spec_obj.obj_get('instance_uuid')
            return [legacy] if legacy and spec_obj.num_instances == 1 else []
        if (not isinstance(instance_uuids, (list, tuple))
                or not all(isinstance(u, str) for u in instance_uuids)):
            raise exception.InvalidRequest(
                reason='instance_uuids must be a list of strings')
        if instance_uuids and len(instance_uuids) != spec_obj.num_instances:
            raise exception.InvalidRequest(
                reason='%d instance uuids for num_instances=%d'
                % (len(instance_uuids), spec_obj.num_instances))
        return list(instance_uuids)
