"""SchedulerManager: the RPC endpoint of the scheduler service.

A thin edge: it checks what arrives, converts legacy dicts, hands the
work to the configured driver and shapes the answer for the caller's
API and object versions.  The logic lives in the driver and the
HostManager.
"""

import collections
import contextlib
import datetime
import functools
import inspect
import json
import threading
import time

from oslo_config import cfg
from oslo_log import log as logging
import oslo_messaging
from oslo_service import periodic_task

from scheduler import cast_ledger
from scheduler import concurrency
from scheduler import context
from scheduler.db import availability
from scheduler.db import models
from scheduler.db import taken_casts
from scheduler import driver as driver_mod
from scheduler import exception
from scheduler import hearing
from scheduler import loader
from scheduler import memory
from scheduler import metrics
from scheduler import notifications
from scheduler import objects
from scheduler import plugin_outputs
from scheduler import rejections
from scheduler import rpc
from scheduler.replay import trace
from scheduler import report_lag
from scheduler.resources import liveness
from scheduler import trust
from scheduler.objects import base as objects_base

LOG = logging.getLogger(__name__)
CONF = cfg.CONF

#: The errors a caller is expected to handle, and their metric labels.
_OUTCOMES = ((exception.NoValidHost, 'no_valid_host'),
             (exception.InvalidRequest, 'invalid_request'),
             (exception.MalformedObject, 'malformed_object'),
             (exception.InventoryUnavailable, 'inventory_unavailable'),
             (exception.NotAuthorized, 'not_authorized'))
_EXPECTED = tuple(cls for cls, _label in _OUTCOMES)
#: The caller's mistakes among them: one warning line each.  The
#: dispatcher passes expected exceptions on without a word, the driver
#: says why there is no valid host, and an outage is said once.
_REFUSALS = (exception.InvalidRequest, exception.MalformedObject,
             exception.NotAuthorized)


def _outage_quiet(what: str):
    """A periodic task that skips its run while the database is away.

    oslo.service logs a task's error with a traceback on every run; an
    outage is counted instead (``availability``), and the task does
    its work again at its next run.
    """
    def decorate(task):
        @functools.wraps(task)
        def run(self, ctxt):
            try:
                return task(self, ctxt)
            except Exception as e:
                if not availability.is_outage(e):
                    raise
                availability.count(what)
        return run
    return decorate


@contextlib.contextmanager
def _served(method: str):
    """Count a call and time it, labelled with how it ended.

    A database outage met meanwhile becomes InventoryUnavailable:
    counted in the outage's tally (``availability``), logged once per
    outage, never with a traceback; callers get the typed error and
    retry later.  A refused request (``_REFUSALS``) is one rate-limited
    warning line (``rejections``).
    """
    started = time.monotonic()
    outcome = 'error'
    try:
        try:
            yield
        except _REFUSALS as e:
            rejections.reject(method, e)
            raise
        except Exception as e:
            if not availability.is_outage(e):
                raise
            availability.count(method)
            raise availability.unavailable(e) from e
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
    return plugin_outputs.guard(cls())


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
            context.  What a message may do depends on the broker user
            that published it (``scheduler.trust``), not on its
            context alone.
    * 1.5 - computes cast update_service_capabilities to the intake
            topic (``rpc.intake_target``: one queue every worker of
            every service shares), so that one worker takes each report
            and the others read it from the inventory; the fanout of
            1.4 is still served.
    * 1.6 - report_alive(nodes, sent_at): a quiet compute's liveness
            message, on a queue of its own (``rpc.alive_target``,
            AliveEndpoint): each node's name and the digest of its last
            full report instead of the report; a node whose digest the
            scheduler does not hold is asked for its full report
            (compute API 1.1 ``send_report``).

    Only methods marked ``oslo_messaging.expose`` can be called over the
    bus (``rpc.get_server`` uses ExplicitRPCAccessPolicy).
    """

    target = oslo_messaging.Target(version='1.6')

    def __init__(self, driver: driver_mod.Scheduler | None = None):
        super().__init__(CONF)
        # spacing=0 in the decorators means oslo's 60 s default: run
        # every task at [scheduler] periodic_task_interval instead.
        self._periodic_spacing = dict.fromkeys(
            self._periodic_spacing, CONF.scheduler.periodic_task_interval)
        self.driver = driver or load_driver()
        self.reports = ReportsEndpoint(self)
        self.intake = IntakeEndpoint(self.reports)
        self.alive = AliveEndpoint(self.reports)
        self.operator = OperatorEndpoint(self)
        #: When the report lag was last said to be too long.
        self._lag_warned_at = 0.0
        self.hearing = hearing.Hearing(
            probe=lambda: rpc.broker_reachable(
                timeout=hearing.PROBE_TIMEOUT),
            last_report=lambda: self.reports.lag.noted_at,
            vouched=lambda: self.reports.lag.holders_heard_at)

    # -- RPC: placement -------------------------------------------------

    @oslo_messaging.expose
    @oslo_messaging.expected_exceptions(*_EXPECTED)
    def select_destinations(self, ctxt, request_spec=None,
                            filter_properties=None, spec_obj=None,
                            instance_uuids=None, return_objects=False,
                            return_alternates=False, peer_manifest=None):
        """Choose destinations; see the version history for the shapes."""
        with _served('select_destinations'):
            self.driver.host_manager.ensure_loaded()
            return self._select_destinations(
                ctxt, request_spec, filter_properties, spec_obj,
                instance_uuids, return_objects, return_alternates,
                peer_manifest)

    def _select_destinations(self, ctxt, request_spec, filter_properties,
                             spec_obj, instance_uuids, return_objects,
                             return_alternates, peer_manifest):
        spec_obj, uuids = self._checked(ctxt, request_spec,
                                        filter_properties, spec_obj,
                                        instance_uuids)
        driver_name = type(self.driver).__name__
        notifications.select_start(ctxt, spec_obj, driver_name)
        served = trace.serving(self.driver, spec_obj, uuids)
        try:
            selections = self.driver.select_destinations(
                ctxt, spec_obj, uuids, return_alternates=return_alternates,
                **served.kwargs)
        except Exception as e:
            served.refused(e)
            notifications.select_error(ctxt, spec_obj, driver_name, e)
            if isinstance(e, exception.NoValidHost):
                # The driver logged why at INFO (the filter walk names
                # the filter that emptied the list).
                LOG.debug('No valid host for instance(s) %(uuids)s: '
                          '%(reason)s', {'uuids': uuids or '-',
                                         'reason': e.kwargs.get('reason')})
            raise
        served.answered(selections)
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
        """Cast: place each instance and cast run_instance to its host.

        The broker forgot the cast when this worker's connection read
        it: its row in the inventory (``cast_ledger.record``), written
        first, lets another worker serve it if this one dies before
        claiming its instances (``_take_over_casts``).
        """
        args = {'request_spec': request_spec,
                'filter_properties': filter_properties,
                'spec_obj': spec_obj, 'instance_uuids': instance_uuids}
        taken = cast_ledger.record(ctxt, args)
        self._serve_cast(ctxt, taken, **args)

    def _serve_cast(self, ctxt, taken, request_spec=None,
                    filter_properties=None, spec_obj=None,
                    instance_uuids=None) -> None:
        """A cast, fresh or taken over (``taken``: its row, if any)."""
        if taken is not None and self.driver.stopping:
            # Taken off the bus and not started when the stop began: the
            # stop waits only for the builds under way.
            cast_ledger.hand_back(taken)
            return
        try:
            spec_obj, uuids = self._checked(ctxt, request_spec,
                                            filter_properties, spec_obj,
                                            instance_uuids)
        except exception.SchedulerException as e:
            rejections.reject('schedule_run_instance', e, what='cast')
            cast_ledger.forget(taken)
            return
        if not uuids:
            rejections.reject('schedule_run_instance',
                              exception.InvalidRequest(
                                  reason='no instance uuids'), what='cast')
            cast_ledger.forget(taken)
            return
        if taken is not None and len(taken.instance_uuids) < len(uuids):
            # Taken over: the instances placed meanwhile are not built
            # again.
            uuids = [u for u in uuids if u in taken.instance_uuids]
            spec_obj.num_instances = len(uuids)
        try:
            with taken_casts.serving(taken):
                self.driver.schedule_run_instance(ctxt, spec_obj, uuids)
        except exception.CastTakenOver:
            LOG.info('Stopped serving the cast for instance(s) %s: '
                     'another worker took it over', ', '.join(uuids))
            return
        except exception.CastHandedBack:
            cast_ledger.hand_back(taken)
            return
        except Exception as e:
            # A driver that raised: served again later only if the
            # inventory was away (it may be back then), never a cast
            # that fails the same way at every takeover.
            if not availability.is_outage(e):
                cast_ledger.forget(taken)
            raise
        # Each instance claimed, or logged as not built (NoValidHost, no
        # compute took it, the inventory unavailable).
        cast_ledger.forget(taken)

    @oslo_messaging.expose
    @oslo_messaging.expected_exceptions(*_EXPECTED)
    def explain(self, ctxt, spec_obj=None):
        """Why hosts pass or fail for ``spec_obj``, without placing it.

        Returns a dict: per-filter counts, per-host rejection reasons and
        the weighed ranking with each weigher's contribution.  Per-host
        details name hosts, so only admins get them (an admin context
        from an operator's credential: ``trust.is_admin``).
        """
        with _served('explain'):
            self.driver.host_manager.ensure_loaded()
            spec_obj = self._spec_from_args(None, None, spec_obj)
            self._check_cost(spec_obj)
            uuid = spec_obj.obj_get('instance_uuid')
            trust.check_forced_hosts(ctxt, spec_obj, [uuid] if uuid else [],
                                     self._instance_places)
            result = self.driver.explain(ctxt, spec_obj)
        if not trust.is_admin(ctxt):
            result['rejected'] = {}
            result['ranking'] = []
        return result

    def _instance_places(self, uuids: list) -> dict:
        """Where each of ``uuids`` is, for a user's rebuild check
        (``trust.rebuilds_in_place``): its claim in the inventory, else
        the node whose last report lists it (an instance placed before
        the inventory knew of it)."""
        hosts = self.driver.host_manager
        found = dict(hosts.placements(list(uuids)))
        missing = set(uuids) - set(found)
        if missing:
            for view in hosts.get_all_host_states():
                for uuid in missing.intersection(view.instance_uuids):
                    found[uuid] = {'host': view.host,
                                   'nodename': view.nodename}
        return found

    @oslo_messaging.expose
    def get_version_info(self, ctxt):
        """This service's RPC API version and object versions."""
        return {'rpc_version': self.target.version,
                'objects': objects_base.obj_manifest()}

    # -- RPC 1.0-1.3: casts older clients still send to this topic -------

    def _legacy(self, method: str) -> bool:
        """Whether to take a compute/operator cast on the request topic.

        Callers may publish there too: what is taken is then held to
        the sender's credential (``trust.REQUEST_TOPIC``).
        """
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
            self.reports.take_report(ctxt, host_state, trust.REQUEST_TOPIC)

    @oslo_messaging.expose
    def update_instance_info(self, ctxt, host_name, instance_uuids):
        if self._legacy('update_instance_info'):
            self.reports.take_instances(ctxt, host_name, instance_uuids,
                                        trust.REQUEST_TOPIC)

    @oslo_messaging.expose
    def delete_instance_info(self, ctxt, host_name, instance_uuid):
        if self._legacy('delete_instance_info'):
            self.reports.take_deletion(ctxt, host_name, instance_uuid,
                                       trust.REQUEST_TOPIC)

    @oslo_messaging.expose
    def sync_instance_info(self, ctxt, host_name, instance_uuids):
        if self._legacy('sync_instance_info'):
            self.reports.take_sync(ctxt, host_name, instance_uuids,
                                   trust.REQUEST_TOPIC)

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
        # Thousands of rows: under eventlet the database drivers yield
        # while they wait, so requests keep being served meanwhile.  Not
        # on a native thread: the inventory's engine and its pool are
        # green there (``concurrency.run_native``).
        self.driver.host_manager.flush()

    @periodic_task.periodic_task(spacing=0, run_immediately=True)
    @_outage_quiet('loading the saved host states (put off)')
    def _load_saved_state(self, ctxt):
        # Start-up could not (the database was away): load once it is
        # back, even if no request comes.
        self.driver.host_manager.ensure_loaded()

    @periodic_task.periodic_task(spacing=0)
    def _replay_instance_news(self, ctxt):
        self.reports.replay_deferred()

    @periodic_task.periodic_task(spacing=0)
    @_outage_quiet('checking down hosts')
    def _check_down_hosts(self, ctxt):
        # What the other workers took first: a host whose reports
        # another worker takes is not down.
        self.driver.host_manager.refresh_reports()
        self.driver.host_manager.check_down_hosts()
        self.driver.host_manager.forget_deleted_nodes()

    @periodic_task.periodic_task(spacing=0)
    @_outage_quiet('expiring claims')
    def _expire_claims(self, ctxt):
        for placement in self.driver.host_manager.expire_claims():
            # Never built: a replay frees it at this point too.
            trace.released(placement['host'], placement['instance_uuid'])

    @periodic_task.periodic_task(spacing=0)
    @_outage_quiet('taking over casts')
    def _take_over_casts(self, ctxt):
        if self.driver.stopping:
            return  # it would hand each back at once
        # Casts taken by a worker that died (or is stuck) before it
        # claimed their instances: the inventory gives each to exactly
        # one worker, which serves it as a fresh cast.
        for taken, cast_ctxt, args in cast_ledger.take_over(
                self.driver.host_manager.placements):
            self._serve_cast(cast_ctxt, taken, **args)

    @periodic_task.periodic_task(spacing=0)
    @_outage_quiet('refreshing aggregates')
    def _refresh_aggregates(self, ctxt):
        self.driver.host_manager.refresh_aggregates()

    @periodic_task.periodic_task(spacing=0)
    def _watch_hearing(self, ctxt):
        self.hearing.check()

    @periodic_task.periodic_task(spacing=0, run_immediately=True)
    def _publish_metrics(self, ctxt):
        self._watch_report_lag()
        hosts = self.driver.host_manager
        metrics.set_hosts(known=len(hosts.get_all_host_states()),
                          up=len(hosts.get_up_host_states()))

    #: Seconds between two warnings that reports are late.
    LAG_WARNING_EVERY = 60.0

    def _watch_report_lag(self) -> None:
        """Publish the report lag, let liveness allow for it, and warn
        when reports wait on the bus longer than the report interval."""
        interval = CONF.scheduler.report_interval
        lag = self.reports.lag.current(
            stale_after=CONF.scheduler.service_down_time)
        metrics.set_report_lag(lag)
        liveness.set_intake_lag(lag)
        now = time.monotonic()
        if lag > interval and now - self._lag_warned_at >= \
                self.LAG_WARNING_EVERY:
            self._lag_warned_at = now
            LOG.warning('Compute reports wait %(lag).1f s on the bus before '
                        'a worker takes them, more than report_interval '
                        '(%(interval)d s): the schedulers do not keep up '
                        'with the fleet (raise [scheduler] report_workers, '
                        'add services, or lengthen report_interval); '
                        'hosts are not judged '
                        'down for that wait',
                        {'lag': lag, 'interval': interval})

    @periodic_task.periodic_task(spacing=0)
    def _return_freed_memory(self, ctxt):
        # After a fleet's first reports, a backlog's flush or an explain
        # over every host: off the event loop (ctypes lets the GIL go).
        done = concurrency.run_native(memory.trim)
        if done is not None:
            LOG.info('Gave %(released)d MB of freed memory back to the '
                     'operating system in %(ms).0f ms (%(held)d MB were '
                     'held free)', {'released': done.released >> 20,
                                    'held': done.held >> 20,
                                    'ms': done.seconds * 1e3})

    def reset(self) -> None:
        """Apply a reloaded configuration to new requests (SIGHUP)."""
        # First: the bindings apply whatever the driver makes of the rest.
        trust.log_binding()
        self.driver.reset()
        trace.reset()

    # -- argument checks ------------------------------------------------

    def _checked(self, ctxt, request_spec, filter_properties, spec_obj,
                 instance_uuids) -> tuple:
        """``(spec_obj, instance uuids)`` of a placement request, checked:
        its shape, its cost and the caller's right to force hosts."""
        spec_obj = self._spec_from_args(request_spec, filter_properties,
                                        spec_obj)
        if instance_uuids is None and isinstance(request_spec, dict):
            instance_uuids = request_spec.get('instance_uuids')
        _check_numbers(spec_obj.flavor, _FLAVOR_NUMBERS, 'flavor')
        for field in ('project_id', 'user_id'):
            if spec_obj.obj_get(field) is not None:
                models.storable(spec_obj.obj_get(field), field)
        if instance_uuids is None:
            legacy = spec_obj.obj_get('instance_uuid')
            uuids = [models.storable(legacy, 'instance_uuid', _UUID)] \
                if legacy and spec_obj.num_instances == 1 else []
        else:
            uuids = _uuid_list(instance_uuids)
            if uuids and len(uuids) != spec_obj.num_instances:
                raise exception.InvalidRequest(
                    reason='%d instance uuids for num_instances=%d'
                    % (len(uuids), spec_obj.num_instances))
        self._check_cost(spec_obj)
        trust.check_forced_hosts(ctxt, spec_obj, uuids,
                                 self._instance_places)
        return spec_obj, uuids

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
    """Who sent a cast, for the audit lines: as the context claims, and
    as the broker says (``sender``)."""
    return {'user': getattr(ctxt, 'user_id', None) or '-',
            'project': getattr(ctxt, 'project_id', None) or '-',
            'request': getattr(ctxt, 'request_id', None) or '-',
            'sender': trust.describe(ctxt)}


def _require_admin(ctxt, method: str) -> bool:
    """Refuse (one warning line) an operator's cast from anyone else:
    an admin context from an operator's credential (``trust.is_admin``).
    """
    if trust.is_admin(ctxt):
        return True
    rejections.reject(method, exception.NotAuthorized(
        reason='needs an admin context from an operator credential (user '
               '%(user)s, project %(project)s, %(sender)s)'
               % _caller(ctxt)), what='cast')
    return False


def _may_speak_for(ctxt, method: str, host: str, channel: str,
                   admin: bool = False) -> bool:
    """Refuse (one warning line) a compute's cast about ``host`` from a
    credential that does not own it (``trust.may_speak_for``); with
    ``admin``, also one whose context is not an admin's."""
    if admin and getattr(ctxt, 'is_admin', False) is not True:
        rejections.reject(method, exception.NotAuthorized(
            reason='needs an admin context (user %(user)s, project '
                   '%(project)s)' % _caller(ctxt)), what='cast')
        return False
    if trust.may_speak_for(ctxt, host, channel):
        return True
    rejections.reject(method, trust.refusal(
        ctxt, 'a cast about host %s on the %s' % (host, channel)),
        what='cast')
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
    never queued behind requests.  Each cast is about one host: it is
    taken only from a credential that may speak for that host
    (``trust.may_speak_for``; ``[trust] compute_users``).  The
    ``take_*`` methods serve the same casts arriving the pre-1.4 way,
    on the request topic; they are not exposed on the bus.

    Instance news (built, deleted, the full list) that meets a database
    outage is kept, in the order it came, and applied once the database
    is back (at the next such cast or periodic run): a compute sends it
    once.  Later news of a host with news kept waits behind it, so that
    each host's news stays in order; news of other hosts is applied at
    once (one queue for every host could never empty while news kept
    arriving).  Beyond ``MAX_DEFERRED`` the oldest is dropped, counted
    in the outage's tally and in the line that says what was applied.
    """

    target = oslo_messaging.Target(version='1.5')

    #: Instance news kept during an outage, at most.
    MAX_DEFERRED = 10000

    def __init__(self, manager: 'SchedulerManager'):
        super().__init__(manager)
        self._deferred: collections.deque = collections.deque()
        #: host -> how many of the kept news are about it.
        self._kept_hosts: collections.Counter = collections.Counter()
        self._deferred_lock = concurrency.native_lock()
        self._replaying = False
        self._dropped = 0
        # Deleted instances free their hosts as soon as the database is
        # back, not at the next periodic run.
        availability.when_back(self.replay_deferred)
        #: How long the reports taken waited on the bus.
        self.lag = report_lag.ReportLag()
        #: node key -> when (monotonic) its full report was last asked.
        self._asked: dict = {}
        self._asked_lock = concurrency.native_lock()
        #: The batch of liveness messages this thread serves, if any
        #: (``alive_batch``).
        self._alive_batch = threading.local()

    def _apply(self, method: str, host: str, *args):
        """``HostManager.<method>(host, *args)``, or kept for later;
        what it returned (None when kept)."""
        args = (host,) + args
        with self._deferred_lock:
            behind = self._kept_hosts[host] > 0
        if behind:
            # Behind what is kept of this host: its news stays in order.
            self._defer(method, args)
            self.replay_deferred()
            return None
        try:
            return getattr(self._hosts, method)(*args)
        except Exception as e:
            if not availability.is_outage(e):
                raise
            self._defer(method, args)
            return None

    def _defer(self, method: str, args: tuple) -> None:
        availability.count('instance news kept for later')
        with self._deferred_lock:
            self._deferred.append((method, args))
            self._kept_hosts[args[0]] += 1
            if len(self._deferred) > self.MAX_DEFERRED:
                self._forget(self._deferred[0])  # the lock is re-entrant
                self._dropped += 1
            else:
                return
        availability.count('instance news dropped (too many kept)')

    def _next_wave(self) -> list:
        """The oldest kept news of each host, oldest first (under
        ``_deferred_lock``): news of different hosts, applicable in any
        order, each host's next only once these are applied."""
        wave, hosts = [], set()
        for item in self._deferred:
            if item[1][0] not in hosts:
                hosts.add(item[1][0])
                wave.append(item)
        return wave

    def _forget(self, item: tuple) -> None:
        """Off the kept news: ``item``, applied or refused."""
        with self._deferred_lock:
            self._deferred.remove(item)
            host = item[1][0]
            self._kept_hosts[host] -= 1
            if not self._kept_hosts[host]:
                del self._kept_hosts[host]

    #: News a wave applies together, each kind in one write (HostManager
    #: method of one news -> of several): deletions first, so that
    #: deleted instances free their hosts soon.
    _BATCHED = (('delete_instance_info', 'delete_instances_info'),
                ('update_instance_info', 'update_instances_info'))

    def replay_deferred(self) -> None:
        """Apply the news kept during an outage, in waves of one news
        per host (``_next_wave``), each kind of ``_BATCHED`` in one
        write, not a round trip a news.  Stops at the first that meets
        the outage still."""
        with self._deferred_lock:
            if self._replaying or not self._deferred:
                return
            self._replaying = True
        counts = {'applied': 0, 'failed': 0}
        try:
            while True:
                with self._deferred_lock:
                    wave = self._next_wave()
                if not wave:
                    break
                for method, batch_method in self._BATCHED:
                    same = [item for item in wave if item[0] == method]
                    if len(same) < 2:
                        continue
                    try:
                        getattr(self._hosts, batch_method)(
                            [args for _method, args in same])
                    except Exception as e:
                        if availability.is_outage(e):
                            return
                        # One by one below, to tell which is refused.
                    else:
                        counts['applied'] += len(same)
                        for item in same:
                            self._forget(item)
                        wave = [i for i in wave if i not in same]
                for item in wave:
                    if not self._replay_one(item, counts):
                        return
        finally:
            with self._deferred_lock:
                self._replaying = False
                dropped, self._dropped = self._dropped, 0
            applied, failed = counts['applied'], counts['failed']
            if applied or failed or dropped:
                LOG.info('Applied %(applied)d instance news kept during '
                         'the database outage (%(failed)d refused, '
                         '%(dropped)d dropped: more than %(max)d were '
                         'kept)', {'applied': applied, 'failed': failed,
                                   'dropped': dropped,
                                   'max': self.MAX_DEFERRED})

    def _replay_one(self, item: tuple, counts: dict) -> bool:
        """Apply one kept news; False when it meets the outage still."""
        method, args = item
        try:
            getattr(self._hosts, method)(*args)
            counts['applied'] += 1
        except Exception as e:
            if availability.is_outage(e):
                return False
            counts['failed'] += 1
            LOG.warning('Could not apply %(method)s%(args)r kept during a '
                        'database outage: %(error)s',
                        {'method': method, 'args': args, 'error': e})
        self._forget(item)
        return True

    def log_unsaved(self) -> None:
        """At shutdown: say what instance news could not be applied."""
        with self._deferred_lock:
            kept = len(self._deferred)
        if kept:
            LOG.warning('Stopping with %d instance news not applied (the '
                        'inventory database was unavailable); the next '
                        'full list of each compute (sync_instance_info) '
                        'corrects the inventory', kept)

    @oslo_messaging.expose
    def update_service_capabilities(self, ctxt, host_state=None,
                                    **newer_arguments):
        """Fanout cast from a compute: the state of one of its nodes.

        Arguments newer computes add are ignored (reports must flow
        during rolling upgrades).
        """
        self.take_report(ctxt, host_state, trust.REPORTS_TOPIC)

    def take_report(self, ctxt, host_state, channel: str,
                    shared: bool = False) -> None:
        """``shared``: from the intake queue, where no other worker hears
        it (``HostManager.update_from_report``)."""
        method = 'update_service_capabilities'
        if not isinstance(host_state, objects.HostState):
            rejections.reject(method, exception.MalformedObject(
                what='report', reason='a %s, not a HostState'
                % type(host_state).__name__), what='cast')
            return
        try:
            host = trust.check_host_name(host_state.obj_get('host'))
            if host_state.obj_get('nodename') is not None:
                trust.check_node_name(host_state.nodename)
            if host_state.obj_get('uuid') is not None:
                # A column of the inventory's hosts: one the database
                # refuses would fail the write of every report with it.
                models.storable(host_state.uuid, 'node uuid', _UUID)
            _check_numbers(host_state, _REPORT_NUMBERS, 'report')
        except exception.InvalidRequest as e:
            rejections.reject(method, e, what='cast')
            return
        if not _may_speak_for(ctxt, method, host, channel):
            return
        try:
            driver = self._manager.driver
            if shared and _takes_shared(driver):
                driver.update_service_capabilities(host_state, shared=True)
            else:
                driver.update_service_capabilities(host_state)
            metrics.record_report()
            self.lag.note(host_state.obj_get('updated_at'))
        except Exception as e:
            rejections.reject(method, e, what='cast')

    #: Most nodes one liveness message may name.
    MAX_ALIVE_NODES = 1000
    #: Longest digest a liveness message may carry.
    MAX_DIGEST_LENGTH = 80

    def take_alive(self, ctxt, nodes, sent_at=None) -> None:
        """A liveness message (API 1.6): check each node's entry and its
        sender's right to speak for the host, renew the nodes whose
        digest matches (``HostManager.take_alive``), and ask the
        computes of the others for their full reports
        (``ask_full_reports``)."""
        method = 'report_alive'

        def reject(error):
            # The line names the message's request (its context may
            # be built only now: ``context.Deferred``).
            context.for_log(ctxt)
            rejections.reject(method, error, what='cast')
        if (not isinstance(nodes, (list, tuple)) or not nodes
                or len(nodes) > self.MAX_ALIVE_NODES):
            reject(exception.MalformedObject(
                what='liveness message', reason='nodes must be a list of '
                '1 to %d [host, nodename, digest]' % self.MAX_ALIVE_NODES))
            return
        taken = []
        batch = getattr(self._alive_batch, 'current', None)
        if batch is None:
            speaks_for = trust.speaker(ctxt, trust.REPORTS_TOPIC)
        else:
            speaks_for = batch.speaker(trust.sender(ctxt))
        for entry in nodes:
            try:
                key, digest = _alive_entry(entry, self.MAX_DIGEST_LENGTH)
            except exception.InvalidRequest as e:
                reject(e)
                continue
            if speaks_for(key[0]):
                taken.append((key, digest))
            else:
                reject(trust.refusal(ctxt, 'a cast about host %s on the %s'
                                     % (key[0], trust.REPORTS_TOPIC)))
        if not taken:
            return
        try:
            wanted = self._hosts.take_alive(taken)
        except Exception as e:
            reject(e)
            return
        if batch is None:
            metrics.record_report(len(taken) - len(wanted))
        else:
            batch.renewed += len(taken) - len(wanted)
        if isinstance(sent_at, (int, float)) and not isinstance(
                sent_at, bool):
            try:
                self.lag.note(datetime.datetime.fromtimestamp(
                    sent_at, datetime.timezone.utc))
            except (ValueError, OverflowError, OSError):
                pass
        if wanted:
            self.ask_full_reports(ctxt, wanted)

    @contextlib.contextmanager
    def alive_batch(self):
        """Liveness messages served one after the other in this thread,
        as a batch (``alive_consumer``): each sender's rights are judged
        once for the batch (``trust.speaker_of``: they depend on the
        sender and the configuration alone), the nodes renewed are
        counted once, at its end.  Each message is checked, trusted and
        taken as alone."""
        batch = _AliveBatch()
        self._alive_batch.current = batch
        try:
            yield
        finally:
            self._alive_batch.current = None
            metrics.record_report(batch.renewed)

    def ask_full_reports(self, ctxt, keys: list) -> None:
        """Cast ``send_report`` to the computes of nodes ``keys``
        (compute API 1.1), each at most once per ``[scheduler]
        report_interval`` by this worker: their liveness messages named
        a report this worker does not hold."""
        now = time.monotonic()
        every = CONF.scheduler.report_interval
        with self._asked_lock:
            if len(self._asked) > self.MAX_ASKED:
                self._asked = {key: when for key, when in self._asked.items()
                               if now - when < every}
            due = [key for key in keys
                   if now - self._asked.get(key, float('-inf')) >= every]
            for key in due:
                self._asked[key] = now
        if due:
            context.for_log(ctxt)
        compute = self._manager.driver.compute_rpcapi
        for host, node in due:
            LOG.debug('Liveness of %s/%s names a report this worker does '
                      'not hold: asking for its full report', host, node)
            try:
                compute.send_report(ctxt, host, node)
            except Exception as e:  # its next liveness asks again
                LOG.info('Could not ask %(host)s for its full report of '
                         '%(node)s: %(error)s',
                         {'host': host, 'node': node, 'error': e})

    #: Asked nodes remembered before the old ones are dropped.
    MAX_ASKED = 10000

    @oslo_messaging.expose
    def update_instance_info(self, ctxt, host_name, instance_uuids):
        """New instances on ``host_name``: fulfils its claims, no others."""
        self.take_instances(ctxt, host_name, instance_uuids,
                            trust.REPORTS_TOPIC)

    def take_instances(self, ctxt, host_name, instance_uuids,
                       channel: str) -> None:
        host = _host_name(host_name)
        uuids = _uuid_list(instance_uuids)
        if _may_speak_for(ctxt, 'update_instance_info', host, channel):
            self._apply('update_instance_info', host, uuids)

    @oslo_messaging.expose
    def delete_instance_info(self, ctxt, host_name, instance_uuid):
        """An instance of ``host_name`` was deleted: free its resources."""
        self.take_deletion(ctxt, host_name, instance_uuid,
                           trust.REPORTS_TOPIC)

    def take_deletion(self, ctxt, host_name, instance_uuid,
                      channel: str) -> None:
        host = _host_name(host_name)
        models.storable(instance_uuid, 'instance_uuid', _UUID)
        if not _may_speak_for(ctxt, 'delete_instance_info', host, channel,
                              admin=True):
            return
        LOG.info('Instance %(uuid)s deleted on %(host)s (user %(user)s, '
                 'project %(project)s, request %(request)s, %(sender)s)',
                 dict(_caller(ctxt), uuid=instance_uuid, host=host))
        self._apply('delete_instance_info', host, instance_uuid)
        trace.released(host, instance_uuid)

    @oslo_messaging.expose
    def sync_instance_info(self, ctxt, host_name, instance_uuids):
        """A compute's full list of instances, sent now and then.

        Placements on the host that the list lacks are dropped, so an
        empty list erases every placement of the host: logged as a
        warning with the caller.
        """
        self.take_sync(ctxt, host_name, instance_uuids, trust.REPORTS_TOPIC)

    def take_sync(self, ctxt, host_name, instance_uuids,
                  channel: str) -> None:
        host = _host_name(host_name)
        uuids = _uuid_list(instance_uuids)
        if not _may_speak_for(ctxt, 'sync_instance_info', host, channel,
                              admin=True):
            return
        if not uuids:
            LOG.warning('Host %(host)s reports no instances: erasing its '
                        'placements (user %(user)s, project %(project)s, '
                        'request %(request)s, %(sender)s)',
                        dict(_caller(ctxt), host=host))
        dropped = self._apply('sync_instance_info', host, uuids)
        for placement in dropped or ():
            # Gone from the compute without a deletion message.
            trace.released(host, placement['instance_uuid'])


class IntakeEndpoint:
    """Reports of 1.5 computes, from the intake queue (API 1.5).

    One queue that the report workers of every scheduler service
    consume (``[scheduler] report_workers``): the broker hands each
    report to one worker, which writes a new one
    to the inventory before it uses it, so that the others read it
    there before their next request (``HostManager.update_from_report``
    with ``shared``).  Otherwise served as the 1.4 fanout is
    (``ReportsEndpoint.take_report``: checks, trust, lag).
    """

    target = oslo_messaging.Target(version='1.5')

    def __init__(self, reports: ReportsEndpoint):
        self._reports = reports

    @oslo_messaging.expose
    def update_service_capabilities(self, ctxt, host_state=None,
                                    **newer_arguments):
        """As ``ReportsEndpoint.update_service_capabilities``."""
        self._reports.take_report(ctxt, host_state, trust.REPORTS_TOPIC,
                                  shared=True)


class _AliveBatch:
    """What a batch of liveness messages shares (``alive_batch``)."""

    def __init__(self):
        self.renewed = 0
        self._speakers: dict = {}

    def speaker(self, who: str | None):
        """``trust.speaker_of(who)`` on the reports topic, judged once."""
        speaks_for = self._speakers.get(who)
        if speaks_for is None:
            speaks_for = self._speakers[who] = trust.speaker_of(
                who, trust.REPORTS_TOPIC)
        return speaks_for


class AliveEndpoint:
    """Liveness messages of quiet 1.6 computes (API 1.6).

    On a queue of their own that the report workers of every 1.6
    service consume (``rpc.alive_target``): the broker hands each message to
    one worker, which renews the nodes whose last full report it holds
    (``HostManager.take_alive``) and writes only their times, at its
    next flush; the other workers read a time as they read those of
    quiet full reports, once the one they hold gets old
    (``refresh_reports``).
    """

    target = oslo_messaging.Target(version='1.6')

    def __init__(self, reports: ReportsEndpoint):
        self._reports = reports

    @oslo_messaging.expose
    def report_alive(self, ctxt, nodes=None, sent_at=None,
                     **newer_arguments):
        """Cast from a compute: ``nodes``, ``[[host, nodename, digest]]``,
        are alive and say what their last full reports said
        (``objects.host_state.content_digest``); ``sent_at``: when the
        compute sent it (seconds since the epoch), for the report lag.
        """
        self._reports.take_alive(ctxt, nodes, sent_at)

    def batch(self):
        """Serve the next messages in this thread as one batch
        (``ReportsEndpoint.alive_batch``); not exposed to the bus."""
        return self._reports.alive_batch()


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
        for aggregate in aggregates:
            _check_aggregate(aggregate)
        try:
            self._hosts.update_aggregates(list(aggregates))
        except Exception as e:
            rejections.reject('update_aggregates', e, what='cast')
            return
        LOG.info('Aggregate(s) %(names)s updated (user %(user)s, project '
                 '%(project)s, request %(request)s, %(sender)s)',
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
                    '%(project)s, request %(request)s, %(sender)s)',
                    dict(_caller(ctxt), name=aggregate.name))


#: Driver class -> whether its ``update_service_capabilities`` takes
#: ``shared`` (a driver written before the intake may override it
#: without: its reports are then written at the flush, as a fanout's).
_SHARED_TAKERS: dict = {}


def _takes_shared(driver) -> bool:
    cls = type(driver)
    takes = _SHARED_TAKERS.get(cls)
    if takes is None:
        params = inspect.signature(driver.update_service_capabilities
                                   ).parameters
        takes = _SHARED_TAKERS[cls] = 'shared' in params or any(
            p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    return takes


def _alive_entry(entry, max_digest: int) -> tuple:
    """``((host, nodename), digest)`` of one entry of a liveness
    message, or InvalidRequest."""
    if (not isinstance(entry, (list, tuple)) or len(entry) != 3
            or not isinstance(entry[2], str) or not entry[2]
            or len(entry[2]) > max_digest):
        raise exception.InvalidRequest(
            reason='a liveness entry must be [host, nodename, digest] '
                   '(a digest of 1 to %d characters)' % max_digest)
    host = trust.check_host_name(entry[0])
    return (host, trust.check_node_name(entry[1])), entry[2]


def _host_name(value) -> str:
    return trust.check_host_name(value, 'host_name')


def _uuid_list(value) -> list:
    if (not isinstance(value, (list, tuple))
            or not all(isinstance(u, str) for u in value)):
        raise exception.InvalidRequest(
            reason='instance_uuids must be a list of strings')
    return [models.storable(u, 'instance uuid', _UUID) for u in value]


#: Width of the inventory's uuid columns.
_UUID = models.UUID_LENGTH
#: A report's numbers that go to those columns, or bound what claims add.
_REPORT_NUMBERS = ('memory_mb', 'memory_mb_used', 'local_gb',
                   'local_gb_used', 'vcpus', 'vcpus_used', 'num_instances',
                   'disk_available_least')
_FLAVOR_NUMBERS = ('memory_mb', 'vcpus', 'root_gb', 'ephemeral_gb', 'swap')


def _check_numbers(obj, names: tuple, what: str) -> None:
    """``InvalidRequest`` for a number of ``obj`` the inventory cannot
    store (``models.MAX_INT``)."""
    for name in names:
        value = obj.obj_get(name)
        if value is not None and not -models.MAX_INT - 1 <= value \
                <= models.MAX_INT:
            raise exception.InvalidRequest(
                reason='%s %s = %d is beyond what the inventory counts '
                       '(32-bit integers)' % (what, name, value))


def _check_aggregate(aggregate) -> None:
    """``InvalidRequest`` for an aggregate the inventory cannot store
    (``scheduler.db.models``: its id, uuid, name, hosts and metadata)."""
    _check_numbers(aggregate, ('id',), 'aggregate')
    if aggregate.obj_get('uuid') is not None:
        models.storable(aggregate.uuid, 'aggregate uuid', _UUID)
    models.storable(aggregate.obj_get('name'), 'aggregate name')
    for host in aggregate.obj_get('hosts') or ():
        models.storable(host, 'aggregate host')
    for key, value in (aggregate.obj_get('metadata') or {}).items():
        models.storable(key, 'aggregate metadata key')
        models.storable(value, 'aggregate metadata value', shortest=0)
