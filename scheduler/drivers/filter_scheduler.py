"""The filter scheduler: filter the hosts, weigh the rest, pick the best."""

import dataclasses
import random
import typing

from oslo_config import cfg
from oslo_log import log as logging

from scheduler import columns
from scheduler import concurrency
from scheduler import driver
from scheduler import exception
from scheduler import filters
from scheduler import loader
from scheduler import metrics
from scheduler import pipeline
from scheduler import plugin_outputs
from scheduler import request_limits
from scheduler.resources import compute
from scheduler.resources import server_groups
from scheduler import trust
from scheduler import weights

LOG = logging.getLogger(__name__)
CONF = cfg.CONF

ALL_FILTERS = 'scheduler.filters.all_filters'
ALL_WEIGHERS = 'scheduler.weights.all_weighers'


def load_filters(available: list, enabled: list) -> list:
    """Instances of the ``enabled`` filter names, in order.

    Raises ``SchedulerHostFilterNotFound`` naming the first enabled
    filter that is not available.
    """
    classes = loader.load_classes(loader.FILTER_NAMESPACE, available,
                                  ALL_FILTERS)
    by_name = {cls.__name__: cls for cls in classes}
    found = []
    for name in enabled:
        name = name.strip()
        if not name:
            continue
        if name not in by_name:
            raise exception.SchedulerHostFilterNotFound(filter_name=name)
        found.append(plugin_outputs.guard(by_name[name]()))
    return found


def load_weighers(names: list) -> list:
    try:
        classes = loader.load_classes(loader.WEIGHER_NAMESPACE, names,
                                      ALL_WEIGHERS)
    except exception.PluginLoadError as e:
        raise exception.SchedulerWeigherNotFound(name=e.kwargs['name'])
    return [plugin_outputs.guard(cls()) for cls in classes]


def shuffle_best_same_weighed(weighed, keep: int | None = None) -> list:
    """``weighed`` (best first) with the hosts tied for best shuffled.

    With ``keep``, only the first ``max(keep, ties)`` hosts are returned
    (``weighed`` may be a lazy ``columns.Ranked``).
    """
    best = weighed[0].weight
    tied = 0
    while tied < len(weighed) and weighed[tied].weight == best:
        tied += 1
    head = weighed[:tied]
    random.shuffle(head)
    end = len(weighed) if keep is None else max(keep, tied)
    return head + weighed[tied:end]


def _excluded_hosts(spec_obj) -> set:
    """Hosts (lower case) the request rules out: ignored or tried before."""
    excluded = {h.lower() for h in spec_obj.obj_get('ignore_hosts') or []}
    retry = spec_obj.obj_get('retry')
    for entry in (retry.obj_get('hosts') if retry is not None else None) \
            or []:
        host = entry[0] if isinstance(entry, (list, tuple)) else entry
        excluded.add(str(host).lower())
    return excluded


#: The server group policies whose rule a claim checks, with the filter
#: that must run for it to be checked.
_GROUP_FILTERS = {'affinity': 'ServerGroupAffinityFilter',
                  'anti-affinity': 'ServerGroupAntiAffinityFilter'}
#: The lock of groups sent without their uuid (a caller of the legacy
#: filter properties): their claims all take turns on it.
_NO_GROUP_UUID = '00000000-0000-0000-0000-000000000000'


def _group_rule(spec_obj, enabled: list) -> tuple:
    """``(uuid, members, max per host)`` of the request's server group
    for its claims to check (``usage.ClaimRequest.group_uuid``; max 0
    for affinity), when the filter that enforces its policy runs; else
    ``(None, (), 0)``."""
    group = spec_obj.obj_get('instance_group')
    policy = group.obj_get('policy') if group is not None else None
    if policy not in _GROUP_FILTERS or not any(
            flt.name() == _GROUP_FILTERS[policy] for flt in enabled):
        return None, (), 0
    return (group.obj_get('uuid') or _NO_GROUP_UUID,
            tuple(group.obj_get('members') or ()),
            server_groups.max_per_host(group)
            if policy == 'anti-affinity' else 0)


@dataclasses.dataclass
class _Choice:
    """The host an instance went to, with what the answer needs."""

    obj: typing.Any
    weight: float | None
    #: The planned claim (``HostManager.plan_claim``), None for a
    #: placement made earlier.
    claim: typing.Any = None
    #: None: compute them when answering (a placement made earlier).
    limits: dict | None = None


@dataclasses.dataclass(frozen=True)
class _PlacedNode:
    """A node this worker knows only by an earlier placement on it: what
    a Selection needs of it."""

    host: str
    nodename: str
    uuid: None = None
    availability_zones: frozenset = frozenset()

    def key(self) -> tuple:
        return self.host, self.nodename


@dataclasses.dataclass(frozen=True)
class Pipeline:
    """The filters and weighers one request runs, swapped as one object
    on a reload: a request takes the current one once and keeps it."""

    filters: list
    weighers: list


class FilterScheduler(driver.Scheduler):
    """Filters and weighs for each instance, then claims them together."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.filter_handler = filters.HostFilterHandler()
        self.weight_handler = weights.HostWeightHandler()
        self.pipeline = Pipeline([], [])
        self._columns: columns.ColumnStore | None = None
        #: Taken while a request filters and weighs (``_choose``).
        self._deciding = concurrency.Turns(
            CONF.filter_scheduler.max_concurrent_decisions)
        self.reset()

    def reset(self) -> None:
        """(Re)load filters and weighers from the configuration.

        Called at start-up and on SIGHUP; a bad new configuration raises
        and leaves the running pipeline unchanged.
        """
        fs = CONF.filter_scheduler
        enabled = load_filters(fs.available_filters, fs.enabled_filters)
        weighers = load_weighers(fs.weight_classes)
        # One assignment swaps both: requests in flight keep the
        # pipeline they took, and none sees new filters with old weighers.
        self.pipeline = Pipeline(enabled, weighers)
        LOG.info('Filter scheduler: filters %s; weighers %s',
                 [f.name() for f in enabled], [w.name() for w in weighers])

    @property
    def enabled_filters(self) -> list:
        return self.pipeline.filters

    @enabled_filters.setter
    def enabled_filters(self, value: list) -> None:
        self.pipeline = Pipeline(value, self.pipeline.weighers)

    @property
    def weighers(self) -> list:
        return self.pipeline.weighers

    @weighers.setter
    def weighers(self, value: list) -> None:
        self.pipeline = Pipeline(self.pipeline.filters, value)

    # -- the pipeline ---------------------------------------------------

    def candidate_hosts(self, spec_obj) -> list:
        """All hosts, narrowed by ignore/force hosts and nodes and
        ``requested_destination`` (``scheduler.pipeline.candidates``),
        before any filter runs."""
        return pipeline.candidates(spec_obj,
                                   self.host_manager.get_all_host_states())

    def column_candidates(self, spec_obj, report: filters.FilterReport
                          ) -> columns.Candidates | None:
        """``candidate_hosts`` as columns, or None when this request
        takes the per-host path (``[filter_scheduler] columnar``)."""
        if not CONF.filter_scheduler.columnar or report.detailed:
            return None
        if self._columns is None:
            store = columns.ColumnStore()
            self.host_manager.watch_views(store)
            self._columns = store
        return columns.candidates(self._columns, spec_obj)

    def filter_and_weigh(self, spec_obj, hosts, index: int = 0,
                         report: filters.FilterReport | None = None,
                         enabled_filters: list | None = None,
                         weighers: list | None = None):
        """Filter ``hosts`` for instance ``index``, then weigh: best first.

        ``hosts`` is a list of host views, or ``columns.Candidates``
        (then the answer is a lazy ``columns.Ranked``).  Without
        ``enabled_filters`` and ``weighers``, those of the running
        pipeline, read once (a reload never mixes two).
        """
        running = self.pipeline
        if enabled_filters is None:
            enabled_filters = running.filters
        if weighers is None:
            weighers = running.weighers
        if isinstance(hosts, columns.Candidates):
            return columns.filter_and_weigh(hosts, spec_obj, index, report,
                                            enabled_filters, weighers)
        forced = pipeline.forced_hosts(spec_obj, hosts)
        if forced is not None and pipeline.skips_filters(spec_obj):
            passed = forced
        else:
            passed = self.filter_handler.get_filtered_objects(
                enabled_filters, hosts if forced is None else forced,
                spec_obj, index, report)
        return self.weight_handler.get_weighed_objects(weighers, passed,
                                                       spec_obj)

    def select_destinations(self, context, spec_obj, instance_uuids: list,
                            return_alternates: bool = False,
                            report: filters.FilterReport | None = None
                            ) -> list:
        """Filter and weigh for each instance, then claim them all.

        Every claim is in the inventory before this returns.  Instances
        already pending from an earlier try of the same request (a
        caller that timed out and asked again) get their placements
        back instead of a second set.
        """
        num = spec_obj.num_instances
        uuids = list(instance_uuids or [])
        if uuids and len(uuids) != num:
            raise exception.InvalidRequest(
                reason='%d instance uuids for num_instances=%d'
                % (len(uuids), num))
        report = report if report is not None else filters.FilterReport()
        # One snapshot of the pipeline for the whole request, so that a
        # reload (SIGHUP) never mixes old and new filters in one request.
        pipeline = self.pipeline
        enabled, weighers = pipeline.filters, pipeline.weighers
        # A stop would hand this build back at the decision turn: not
        # after a freshness read through what may be a slow database.
        self.hand_back_if_stopping()
        self.host_manager.refresh_usage()
        with request_limits.scope():
            try:
                return self._select(context, spec_obj, uuids,
                                    return_alternates, report, enabled,
                                    weighers)
            finally:
                metrics.record_filter_steps(report.steps)

    def _select(self, context, spec_obj, uuids, return_alternates, report,
                enabled, weighers) -> list:
        """Place the request as new; look for earlier placements of its
        instances only if that fails.

        Nearly every request is new, and the inventory refuses a claim
        of an instance that is pending elsewhere: asking it first for
        every request would cost a round trip for nothing.  A retry of a
        request whose placements are kept (even on hosts now full), a
        reschedule and a move are found when the new placement fails.
        """
        try:
            return self._place_with_retries(
                context, spec_obj, uuids, {}, set(), return_alternates,
                report, enabled, weighers)
        except (exception.InstanceAlreadyPlaced, exception.NoValidHost):
            if not uuids:
                raise
            kept, replace = self._earlier_placements(spec_obj, uuids)
            if not (kept or replace):
                raise
        report.steps.clear()
        return self._place_with_retries(
            context, spec_obj, uuids, kept, replace, return_alternates,
            report, enabled, weighers)

    def _earlier_placements(self, spec_obj, uuids: list) -> tuple:
        """Placements to give back as they are, and uuids to re-place.

        A pending placement is the answer to an earlier try of this
        request, unless the request now excludes its host (a reschedule)
        or asks for other resources (another request with the same
        uuid: refused).  A confirmed placement is an instance that runs:
        a new request for it is a move.
        """
        existing = self.host_manager.placements(uuids)
        kept, replace = {}, set()
        wanted = compute.resources_of(spec_obj)
        excluded = _excluded_hosts(spec_obj)
        for uuid, placed in existing.items():
            if not placed['pending']:
                replace.add(uuid)
            elif placed['host'].lower() in excluded:
                replace.add(uuid)
            elif (placed['memory_mb'], placed['vcpus'],
                  placed['disk_gb']) == wanted:
                kept[uuid] = placed
            else:
                raise exception.InstanceAlreadyPlaced(
                    instance_uuid=uuid, host=placed['host'],
                    nodename=placed['nodename'])
        if kept:
            LOG.info('Instance(s) %s already placed by an earlier try of '
                     'this request; returning those placements',
                     ', '.join(sorted(kept)))
        return kept, replace

    def _place_with_retries(self, context, spec_obj, uuids, kept, replace,
                            return_alternates, report, enabled,
                            weighers) -> list:
        """``_place``, again from the start when another worker took the
        room of a chosen node first, up to ``[scheduler] claim_attempts``
        times."""
        attempts = CONF.scheduler.claim_attempts
        for attempt in range(attempts):
            if attempt:
                report.steps.clear()
            try:
                return self._place(context, spec_obj, uuids, kept, replace,
                                   return_alternates, report, enabled,
                                   weighers)
            except exception.ClaimConflict:
                continue
        LOG.info('Every claim of request %(uuids)s lost its race '
                 '(%(tries)d tries)', {'uuids': ', '.join(uuids) or '-',
                                       'tries': attempts})
        raise self._no_valid_host(context, report, 0,
                                  spec_obj.num_instances)

    def _place(self, context, spec_obj, uuids, kept, replace,
               return_alternates, report, enabled, weighers) -> list:
        """Choose a node for each instance, then claim them in one go.

        Each instance is chosen against the nodes as the earlier
        instances' planned claims leave them; the claims are made
        together at the end (``HostManager.claim_many``), all or none,
        once the choosing is over: the next request chooses while the
        database commits (``[filter_scheduler] max_concurrent_decisions``
        bounds the requests that choose at once).
        """
        group = spec_obj.obj_get('instance_group')
        group_hosts = list(group.hosts) if group is not None else None
        try:
            with self._deciding.turn() as turn:
                # Builds queue for the turn: a stop lets each go at once.
                self.hand_back_if_stopping()
                planned, results = self._choose(
                    context, spec_obj, uuids, kept, replace,
                    return_alternates, report, enabled, weighers, group,
                    turn)
            if planned:
                self.hand_back_if_stopping()
                self.host_manager.claim_many(planned)
        except Exception as e:
            if group is not None:
                # An affinity claim refused because the group runs
                # elsewhere: the next try follows it there.
                group.hosts = group_hosts + (
                    e.kwargs.get('group_hosts') or []
                    if isinstance(e, exception.ClaimConflict) else [])
            raise
        return results

    def _choose(self, context, spec_obj, uuids, kept, replace,
                return_alternates, report, enabled, weighers, group,
                turn: concurrency.Turn) -> tuple:
        """``_place``'s choices: the claims to make and the answer.

        Between two instances a long request lets the requests waiting
        for their turn go first (``turn.pass_if_due``) and lets green
        threads run (``cooperative_yield``).
        """
        num = spec_obj.num_instances
        hosts = self.column_candidates(spec_obj, report)
        #: Released once the choices are made: the claims' new views
        #: are then written into the store's columns in place.
        snapshot = None if hosts is None else hosts.snapshot
        if hosts is None:
            hosts = self.candidate_hosts(spec_obj)
        alternates_wanted = (CONF.scheduler.max_attempts - 1
                             if return_alternates else 0)
        if pipeline.skips_filters(spec_obj):
            # Forcing skips the filters, and so the limits they set: an
            # operator who names a host takes responsibility for it.
            enabled = []
        elif filters.request_is_rebuild(spec_obj):
            # A rebuild runs only the filters nova runs on a rebuild
            # (the forced host's too): only those may set its limits.
            enabled = [flt for flt in enabled
                       if getattr(flt, 'run_on_rebuild', False)]
        planned, results = [], []
        group_rule = _group_rule(spec_obj, enabled)
        rebuild = filters.request_is_rebuild(spec_obj)
        #: Node key -> its view with this request's planned claims.
        tentative: dict = {}
        #: The filters that answer ``host_limits``: asked for every
        #: destination and alternate.
        limiting = request_limits.limiting(enabled)
        try:
            for index in range(num):
                if index:
                    turn.pass_if_due()
                concurrency.cooperative_yield()
                uuid = uuids[index] if uuids else None
                if uuid:
                    spec_obj.instance_uuid = uuid
                weighed = self.filter_and_weigh(
                    spec_obj, hosts, index, report, enabled, weighers)
                if uuid in kept:
                    chosen = self._kept_choice(kept[uuid], weighed)
                else:
                    if not weighed:
                        raise self._no_valid_host(context, report, index,
                                                  num)
                    chosen = self._plan_one(spec_obj, uuid, weighed, limiting,
                                            uuid in replace, tentative)
                    (chosen.claim.request.group_uuid,
                     chosen.claim.request.group_members,
                     chosen.claim.request.group_max) = group_rule
                    if not rebuild:
                        # nova's rebuild check asks for nothing: the
                        # instance keeps what it holds where it is.
                        planned.append(chosen.claim)
                if index + 1 < num:
                    hosts = self._after_choice(weighed, chosen, tentative)
                if group is not None:
                    group.hosts = list(group.hosts) + [chosen.obj.host]
                results.append(self._selections(
                    spec_obj, uuid, chosen, weighed, alternates_wanted,
                    limiting))
        finally:
            if snapshot is not None:
                snapshot.release()
        return planned, results

    def _plan_one(self, spec_obj, uuid, weighed, limiting, replace: bool,
                  tentative: dict):
        """Plan the claim of one instance on a random pick among the
        best ``host_subset_size`` (``HostManager.plan_claim``)."""
        size = CONF.filter_scheduler.host_subset_size
        if CONF.filter_scheduler.shuffle_best_same_weighed_hosts:
            weighed = shuffle_best_same_weighed(weighed, size)
        candidate = random.choice(weighed[:min(size, len(weighed))])
        host = tentative.get(candidate.obj.key())
        if host is None:
            host = self.host_manager.current(candidate.obj)
        limits = request_limits.collect(host, spec_obj, limiting)
        plan = self.host_manager.plan_claim(host, spec_obj, uuid, limits,
                                            replace)
        tentative[host.key()] = plan.view
        return _Choice(plan.view, candidate.weight, plan, limits)

    def _kept_choice(self, placed: dict, weighed: list):
        """The weighed host of an earlier placement (even if full now)."""
        key = (placed['host'], placed['nodename'])
        for candidate in weighed:
            if candidate.obj.key() == key:
                return _Choice(self.host_manager.current(candidate.obj),
                               candidate.weight)
        try:
            return _Choice(self.host_manager.get_host_state(*key), None)
        except exception.HostNotFound:
            # A retry reached a worker that has not had the node's
            # report yet: the placement stands, without limits (no
            # view here to compute them from; the claim holds it).
            LOG.debug('Instance %s stays on %s/%s, a node this worker '
                      'has not heard from yet', placed['instance_uuid'],
                      *key)
            return _Choice(_PlacedNode(*key), None, limits={})

    def _after_choice(self, weighed, chosen, tentative: dict):
        """The next instance's candidates: those that passed, the chosen
        node as this request's planned claims leave it."""
        key = chosen.obj.key()

        def fresh(view):
            planned = tentative.get(key)
            return planned if planned is not None else \
                self.host_manager.current(view)

        if isinstance(weighed, columns.Ranked):
            return weighed.after_claim(key, fresh)
        return [fresh(w.obj) if w.obj.key() == key else w.obj
                for w in weighed]

    def _selections(self, spec_obj, uuid, chosen, weighed: list,
                    alternates_wanted: int, limiting: list) -> list:
        host = chosen.obj
        limits = chosen.limits
        if limits is None:
            limits = request_limits.collect(host, spec_obj, limiting)
        selections = [driver.selection_for(host, uuid, chosen.weight,
                                           limits)]
        seen = {host.host}
        for alt in weighed:
            if len(selections) > alternates_wanted:
                break
            if alt.obj.host in seen:
                continue
            seen.add(alt.obj.host)
            selections.append(driver.selection_for(
                alt.obj, uuid, alt.weight,
                request_limits.collect(alt.obj, spec_obj, limiting)))
        return selections

    def schedule_run_instance(self, context, spec_obj,
                              instance_uuids: list) -> None:
        self.schedule_each(context, spec_obj, instance_uuids)

    def explain(self, context, spec_obj, max_ranked: int = 20) -> dict:
        """Run the pipeline for one instance without claiming anything.

        Says how many hosts each filter removed, which filter rejected
        each host and why, and how the survivors ranked, weigher by
        weigher.
        """
        report = filters.FilterReport(detailed=True)
        pipeline = self.pipeline
        enabled, weighers = pipeline.filters, pipeline.weighers
        # A stop would hand this build back at the decision turn: not
        # after a freshness read through what may be a slow database.
        self.hand_back_if_stopping()
        self.host_manager.refresh_usage()
        with request_limits.scope():
            return self._explain(spec_obj, max_ranked, report, enabled,
                                 weighers)

    def _explain(self, spec_obj, max_ranked, report, enabled,
                 weighers) -> dict:
        hosts = self.candidate_hosts(spec_obj)
        forced = pipeline.forced_hosts(spec_obj, hosts)
        if forced is not None and pipeline.skips_filters(spec_obj):
            passed = forced
        else:
            passed = self.filter_handler.get_filtered_objects(
                enabled, hosts if forced is None else forced, spec_obj, 0,
                report)
        weighed = self.weight_handler.get_weighed_objects(
            weighers, passed, spec_obj, explain=True, detailed=max_ranked)
        rejected = {}
        for step in report.steps:
            for host, reason in step.rejected.items():
                rejected[host] = {'filter': step.name, 'reason': reason}
        return {
            'driver': type(self).__name__,
            'hosts_known': len(self.host_manager.get_all_host_states()),
            'candidates': len(hosts),
            'forced': (forced is not None
                       and pipeline.skips_filters(spec_obj)),
            'filters': [{'name': s.name, 'hosts_in': s.hosts_in,
                         'hosts_out': s.hosts_out, 'removed': s.removed}
                        for s in report.steps],
            'rejected': rejected,
            'passed': len(weighed),
            'ranking': [dict(row, contributions=dict(w.contributions))
                        for row, w in zip(pipeline.ranking(
                            weighed[:max_ranked]), weighed)],
        }

    @staticmethod
    def _no_valid_host(context, report, index: int,
                       num: int) -> exception.NoValidHost:
        """NoValidHost; admins also get the filter walk, as text and data
        (an admin context from an operator's credential: it names hosts
        and what they hold)."""
        reason = 'There are not enough hosts available.'
        if num > 1:
            reason += ' (instance %d of %d)' % (index + 1, num)
        if not (trust.is_admin(context) and report.steps):
            return exception.NoValidHost(reason=reason)
        reason += ' Filter results: %s' % report.summary()
        return exception.NoValidHost(
            reason=reason,
            filters=[{'name': s.name, 'hosts_in': s.hosts_in,
                      'hosts_out': s.hosts_out} for s in report.steps])
