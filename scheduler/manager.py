"""SchedulerManager: the RPC endpoint of the scheduler service.

A thin edge: it checks what arrives, converts legacy dicts, hands the
work to the configured driver and shapes the answer for the caller's
API and object versions.  The logic lives in the driver and the
HostManager.
"""

import contextlib
import json
import time

from oslo_config import cfg
from oslo_log import log as logging
import oslo_messaging
from oslo_service import periodic_task

from scheduler import concurrency
from scheduler import driver as driver_mod
from scheduler import exception
from scheduler import loader
from scheduler import memory
from scheduler import metrics
from scheduler import notifications
from scheduler import objects
from scheduler import rejections
from scheduler.objects import base as objects_base

LOG = logging.getLogger(__name__)
CONF = cfg.CONF

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
    * 1.4 - compute casts (update_service_capabilities, update/delete/
            sync_instance_info) travel on the reports topic
            (ReportsEndpoint) and operator casts (update_aggregates,
            delete_aggregate) on the operator topic (OperatorEndpoint),
            each on its own exchange; this topic takes them from older
            clients only while ``[scheduler] accept_legacy_casts``.
            sync_instance_info and delete_instance_info need an admin
            context.

    Only methods marked ``oslo_messaging.expose`` can be called over the
    bus (``rpc.get_server`` uses ExplicitRPCAccessPolicy).
    """

    target = oslo_messaging.Target(version='1.4')

    def __init__(self, driver: driver_mod.Scheduler | None = None):
        super().__init__(CONF)
        # spacing=0 in the decorators means oslo's 60 s default: run
        # every task at [scheduler] periodic_task_interval instead.
        self._periodic_spacing = dict.fromkeys(
            self._periodic_spacing, CONF.scheduler.periodic_task_interval)
        self.driver = driver or load_driver()
        self.reports = ReportsEndpoint(self)
        self.operator = OperatorEndpoint(self)

    # -- RPC: placement -------------------------------------------------

    @oslo_messaging.expose
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
        self._check_cost(spec_obj)
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

    @oslo_messaging.expose
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
            self._check_cost(spec_obj)
        except exception.SchedulerException as e:
            rejections.reject('schedule_run_instance', e, what='cast')
            return
        if not uuids:
            rejections.reject('schedule_run_instance',
                              exception.InvalidRequest(
                                  reason='no instance uuids'), what='cast')
            return
        self.driver.schedule_run_instance(ctxt, spec_obj, uuids)

    @oslo_messaging.expose
    @oslo_messaging.expected_exceptions(*_EXPECTED)
    def explain(self, ctxt, spec_obj=None):
        """Why hosts pass or fail for ``spec_obj``, without placing it.

        Returns a dict: per-filter counts, per-host rejection reasons and
        the weighed ranking with each weigher's contribution.  Per-host
        details name hosts, so only admins get them.
        """
        with _measured('explain'):
            spec_obj = self._spec_from_args(None, None, spec_obj)
            self._check_cost(spec_obj)
            result = self.driver.explain(ctxt, spec_obj)
        if not getattr(ctxt, 'is_admin', False):
            result['rejected'] = {}
            result['ranking'] = []
        return result

    @oslo_messaging.expose
    def get_version_info(self, ctxt):
        """This service's RPC API version and object versions."""
        return {'rpc_version': self.target.version,
                'objects': objects_base.obj_manifest()}

    # -- RPC 1.0-1.3: casts older clients still send to this topic -------

    def _legacy(self, method: str) -> bool:
        """Whether to take a compute/operator cast on the request topic."""
        if CONF.scheduler.accept_legacy_casts:
            return True
        rejections.reject(method, exception.NotAuthorized(
            reason='casts that change state are taken on the reports and '
                   'operator topics only ([scheduler] '
                   'accept_legacy_casts = false)'), what='cast')
        return False

    @oslo_messaging.expose
    def update_service_capabilities(self, ctxt, host_state=None,
                                    **newer_arguments):
        if self._legacy('update_service_capabilities'):
            self.reports.update_service_capabilities(ctxt, host_state)

    @oslo_messaging.expose
    def update_instance_info(self, ctxt, host_name, instance_uuids):
        if self._legacy('update_instance_info'):
            self.reports.update_instance_info(ctxt, host_name,
                                              instance_uuids)

    @oslo_messaging.expose
    def delete_instance_info(self, ctxt, host_name, instance_uuid):
        if self._legacy('delete_instance_info'):
            self.reports.delete_instance_info(ctxt, host_name,
                                              instance_uuid)

    @oslo_messaging.expose
    def sync_instance_info(self, ctxt, host_name, instance_uuids):
        if self._legacy('sync_instance_info'):
            self.reports.sync_instance_info(ctxt, host_name, instance_uuids)

    @oslo_messaging.expose
    def update_aggregates(self, ctxt, aggregates):
        if self._legacy('update_aggregates'):
            self.operator.update_aggregates(ctxt, aggregates)

    @oslo_messaging.expose
    def delete_aggregate(self, ctxt, aggregate):
        if self._legacy('delete_aggregate'):
            self.operator.delete_aggregate(ctxt, aggregate)

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

    @periodic_task.periodic_task(spacing=0)
    def _return_freed_memory(self, ctxt):
        # After a fleet's first reports, a backlog's flush or an explain
        # over every host: off the event loop (ctypes lets the GIL go).
        done = concurrency.run_blocking(memory.trim)
        if done is not None:
            LOG.info('Gave %(released)d MB of freed memory back to the '
                     'operating system in %(ms).0f ms (%(held)d MB were '
                     'held free)', {'released': done.released >> 20,
                                    'held': done.held >> 20,
                                    'ms': done.seconds * 1e3})

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
        limit = CONF.limits.max_instances_per_request
        if num < 1 or num > limit:
            raise exception.InvalidRequest(
                reason='num_instances must be 1..%d ([limits] '
                       'max_instances_per_request), not %d' % (limit, num))
        return spec_obj

    def _check_cost(self, spec_obj) -> None:
        """Refuse a JsonFilter query whose evaluation would hold a worker.

        Cost is the query's operators and values times the known hosts:
        what filtering one instance evaluates.
        """
        query = spec_obj.get_scheduler_hint('query')
        if not query:
            return
        try:
            terms = _count_terms(json.loads(query) if isinstance(query, str)
                                 else query)
        except (ValueError, TypeError, RecursionError):
            return  # JsonFilter itself answers unreadable queries
        hosts = len(self.driver.host_manager.get_all_host_states())
        limit = CONF.limits.json_query_max_cost
        if terms * hosts > limit:
            raise exception.InvalidRequest(
                reason='JsonFilter query of %d terms over %d hosts costs '
                       '%d evaluations, more than [limits] '
                       'json_query_max_cost (%d)'
                % (terms, hosts, terms * hosts, limit))

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


def _count_terms(query) -> int:
    """Operators and values in a parsed JsonFilter query (no recursion)."""
    count, stack = 0, [query]
    while stack:
        node = stack.pop()
        count += 1
        if isinstance(node, list):
            stack.extend(node)
    return count


def _caller(ctxt) -> dict:
    """Who sent a cast, for the audit lines (as the context claims)."""
    return {'user': getattr(ctxt, 'user_id', None) or '-',
            'project': getattr(ctxt, 'project_id', None) or '-',
            'request': getattr(ctxt, 'request_id', None) or '-'}


def _require_admin(ctxt, method: str) -> bool:
    """Refuse (one warning line) a destructive cast without admin rights."""
    if getattr(ctxt, 'is_admin', False) is True:
        return True
    rejections.reject(method, exception.NotAuthorized(
        reason='needs an admin context (user %(user)s, project '
               '%(project)s)' % _caller(ctxt)), what='cast')
    return False


class _CastEndpoint:
    """An endpoint of casts served beside the manager (API 1.4)."""

    target = oslo_messaging.Target(version='1.4')

    def __init__(self, manager: SchedulerManager):
        self._manager = manager

    @property
    def _hosts(self):
        return self._manager.driver.host_manager


class ReportsEndpoint(_CastEndpoint):
    """Casts from compute agents, on the reports topic (API 1.4).

    Served on its own topic and exchange (``rpc.reports_target``) by its
    own RPC server, so that broker permissions can let a compute's
    credentials publish these and nothing else, and so that reports are
    never queued behind requests.
    """

    @oslo_messaging.expose
    def update_service_capabilities(self, ctxt, host_state=None,
                                    **newer_arguments):
        """Fanout cast from a compute: the state of one of its nodes.

        Arguments newer computes add are ignored (reports must flow
        during rolling upgrades).
        """
        if not isinstance(host_state, objects.HostState):
            rejections.reject('update_service_capabilities',
                              exception.MalformedObject(
                                  what='report',
                                  reason='a %s, not a HostState'
                                  % type(host_state).__name__),
                              what='cast')
            return
        try:
            self._manager.driver.update_service_capabilities(host_state)
            metrics.record_report()
        except Exception as e:
            rejections.reject('update_service_capabilities', e,
                              what='cast')

    @oslo_messaging.expose
    def update_instance_info(self, ctxt, host_name, instance_uuids):
        """New instances on ``host_name``: fulfils its claims, no others."""
        self._hosts.update_instance_info(
            _host_name(host_name), _uuid_list(instance_uuids))

    @oslo_messaging.expose
    def delete_instance_info(self, ctxt, host_name, instance_uuid):
        """An instance of ``host_name`` was deleted: free its resources."""
        if not _require_admin(ctxt, 'delete_instance_info'):
            return
        host = _host_name(host_name)
        if not isinstance(instance_uuid, str):
            raise exception.InvalidRequest(
                reason='instance_uuid must be a string')
        LOG.info('Instance %(uuid)s deleted on %(host)s (user %(user)s, '
                 'project %(project)s, request %(request)s)',
                 dict(_caller(ctxt), uuid=instance_uuid, host=host))
        self._hosts.delete_instance_info(host, instance_uuid)

    @oslo_messaging.expose
    def sync_instance_info(self, ctxt, host_name, instance_uuids):
        """A compute's full list of instances, sent now and then.

        Placements on the host that the list lacks are dropped, so an
        empty list erases every placement of the host: logged as a
        warning with the caller.
        """
        if not _require_admin(ctxt, 'sync_instance_info'):
            return
        host = _host_name(host_name)
        uuids = _uuid_list(instance_uuids)
        if not uuids:
            LOG.warning('Host %(host)s reports no instances: erasing its '
                        'placements (user %(user)s, project %(project)s, '
                        'request %(request)s)', dict(_caller(ctxt),
                                                     host=host))
        self._hosts.sync_instance_info(host, uuids)


class OperatorEndpoint(_CastEndpoint):
    """Operators' casts, on the operator topic (API 1.4).

    Audited at INFO with the caller; they need an admin context.  Their
    own topic and exchange let broker permissions keep them to the
    operators' credentials.
    """

    @oslo_messaging.expose
    def update_aggregates(self, ctxt, aggregates):
        """Fanout cast: aggregates were created or changed."""
        if not _require_admin(ctxt, 'update_aggregates'):
            return
        if (not isinstance(aggregates, (list, tuple))
                or not all(isinstance(a, objects.Aggregate)
                           for a in aggregates)):
            raise exception.InvalidRequest(
                reason='aggregates must be a list of Aggregate objects')
        try:
            self._hosts.update_aggregates(list(aggregates))
        except Exception as e:
            rejections.reject('update_aggregates', e, what='cast')
            return
        LOG.info('Aggregate(s) %(names)s updated (user %(user)s, project '
                 '%(project)s, request %(request)s)',
                 dict(_caller(ctxt),
                      names=', '.join(a.name for a in aggregates)))

    @oslo_messaging.expose
    def delete_aggregate(self, ctxt, aggregate):
        if not _require_admin(ctxt, 'delete_aggregate'):
            return
        if not isinstance(aggregate, objects.Aggregate):
            raise exception.InvalidRequest(
                reason='aggregate must be an Aggregate object')
        self._hosts.delete_aggregate(aggregate)
        LOG.warning('Aggregate %(name)s deleted (user %(user)s, project '
                    '%(project)s, request %(request)s)',
                    dict(_caller(ctxt), name=aggregate.name))


def _host_name(value) -> str:
    if not isinstance(value, str) or not value or len(value) > 255:
        raise exception.InvalidRequest(reason='host_name must be a '
                                              'non-empty string')
    return value


def _uuid_list(value) -> list:
    if (not isinstance(value, (list, tuple))
            or not all(isinstance(u, str) for u in value)):
        raise exception.InvalidRequest(
            reason='instance_uuids must be a list of strings')
    return list(value)
