"""The filter scheduler: filter the hosts, weigh the rest, pick the best."""

import random

from oslo_config import cfg
from oslo_log import log as logging

from scheduler import driver
from scheduler import exception
from scheduler import filters
from scheduler import loader
from scheduler import metrics
from scheduler import pipeline
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
        found.append(by_name[name]())
    return found


def load_weighers(names: list) -> list:
    try:
        classes = loader.load_classes(loader.WEIGHER_NAMESPACE, names,
                                      ALL_WEIGHERS)
    except exception.PluginLoadError as e:
        raise exception.SchedulerWeigherNotFound(name=e.kwargs['name'])
    return [cls() for cls in classes]


def shuffle_best_same_weighed(weighed: list) -> list:
    """``weighed`` (best first) with the hosts tied for best shuffled."""
    best = weighed[0].weight
    tied = 0
    while tied < len(weighed) and weighed[tied].weight == best:
        tied += 1
    head = weighed[:tied]
    random.shuffle(head)
    return head + weighed[tied:]


class FilterScheduler(driver.Scheduler):
    """Filters, weighs and claims, one instance after the other."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.filter_handler = filters.HostFilterHandler()
        self.weight_handler = weights.HostWeightHandler()
        self.enabled_filters: list = []
        self.weighers: list = []
        self.reset()

    def reset(self) -> None:
        """(Re)load filters and weighers from the configuration.

        Called at start-up and on SIGHUP; a bad new configuration raises
        and leaves the running pipeline unchanged.
        """
        fs = CONF.filter_scheduler
        enabled = load_filters(fs.available_filters, fs.enabled_filters)
        weighers = load_weighers(fs.weight_classes)
        # Swap both at once: requests in flight keep the lists they took.
        self.enabled_filters, self.weighers = enabled, weighers
        LOG.info('Filter scheduler: filters %s; weighers %s',
                 [f.name() for f in enabled], [w.name() for w in weighers])

    # -- the pipeline ---------------------------------------------------

    def candidate_hosts(self, spec_obj) -> list:
        """All hosts, narrowed by ignore/force hosts and nodes and
        ``requested_destination`` (``scheduler.pipeline.candidates``),
        before any filter runs."""
        return pipeline.candidates(spec_obj,
                                   self.host_manager.get_all_host_states())

    @staticmethod
    def forced_hosts(spec_obj, hosts: list) -> list | None:
        """The hosts an admin forced, or None when nothing is forced
        (``scheduler.pipeline.forced_hosts``)."""
        return pipeline.forced_hosts(spec_obj, hosts)

    def filter_and_weigh(self, spec_obj, hosts: list, index: int = 0,
                         report: filters.FilterReport | None = None,
                         enabled_filters: list | None = None,
                         weighers: list | None = None) -> list:
        """Filter ``hosts`` for instance ``index``, then weigh: best first."""
        forced = self.forced_hosts(spec_obj, hosts)
        if forced is not None:
            passed = forced
        else:
            passed = self.filter_handler.get_filtered_objects(
                self.enabled_filters if enabled_filters is None
                else enabled_filters, hosts, spec_obj, index, report)
        return self.weight_handler.get_weighed_objects(
            self.weighers if weighers is None else weighers, passed, spec_obj)

    def select_destinations(self, context, spec_obj, instance_uuids: list,
                            return_alternates: bool = False,
                            report: filters.FilterReport | None = None
                            ) -> list:
        num = spec_obj.num_instances
        uuids = list(instance_uuids or [])
        if uuids and len(uuids) != num:
            raise exception.InvalidRequest(
                reason='%d instance uuids for num_instances=%d'
                % (len(uuids), num))
        report = report if report is not None else filters.FilterReport()
        # One snapshot of the pipeline for the whole request, so that a
        # reload (SIGHUP) never mixes old and new filters in one request.
        enabled, weighers = self.enabled_filters, self.weighers
        hosts = self.candidate_hosts(spec_obj)
        group = spec_obj.obj_get('instance_group')
        alternates_wanted = (CONF.scheduler.max_attempts - 1
                             if return_alternates else 0)
        group_hosts = list(group.hosts) if group is not None else None
        claims, results = [], []
        try:
            for index in range(num):
                uuid = uuids[index] if uuids else None
                if uuid:
                    spec_obj.instance_uuid = uuid
                weighed = self.filter_and_weigh(spec_obj, hosts, index,
                                                report, enabled, weighers)
                if not weighed:
                    raise self._no_valid_host(context, report, index, num)
                hosts = [w.obj for w in weighed]
                if CONF.filter_scheduler.shuffle_best_same_weighed_hosts:
                    weighed = shuffle_best_same_weighed(weighed)
                subset = weighed[:min(CONF.filter_scheduler.host_subset_size,
                                      len(weighed))]
                chosen = random.choice(subset)
                claims.append(self.host_manager.claim(chosen.obj, spec_obj,
                                                      uuid))
                if group is not None:
                    group.hosts = list(group.hosts) + [chosen.obj.host]
                selections = [driver.selection_for(chosen.obj, uuid,
                                                   chosen.weight)]
                for alt in weighed:
                    if len(selections) > alternates_wanted:
                        break
                    if alt is not chosen and alt.obj.host not in {
                            s.service_host for s in selections}:
                        selections.append(driver.selection_for(
                            alt.obj, uuid, alt.weight))
                results.append(selections)
        except Exception:
            for claim in claims:
                self.host_manager.release(claim)
            if group is not None:
                group.hosts = group_hosts
            raise
        finally:
            metrics.record_filter_steps(report.steps)
        return results

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
        enabled, weighers = self.enabled_filters, self.weighers
        hosts = self.candidate_hosts(spec_obj)
        forced = self.forced_hosts(spec_obj, hosts)
        if forced is not None:
            passed = forced
        else:
            passed = self.filter_handler.get_filtered_objects(
                enabled, hosts, spec_obj, 0, report)
        weighed = self.weight_handler.get_weighed_objects(
            weighers, passed, spec_obj, explain=True)
        rejected = {}
        for step in report.steps:
            for host, reason in step.rejected.items():
                rejected[host] = {'filter': step.name, 'reason': reason}
        return {
            'driver': type(self).__name__,
            'hosts_known': len(self.host_manager.get_all_host_states()),
            'candidates': len(hosts),
            'forced': forced is not None,
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
        """NoValidHost; admins also get the filter walk, as text and data."""
        reason = 'There are not enough hosts available.'
        if num > 1:
            reason += ' (instance %d of %d)' % (index + 1, num)
        if not (getattr(context, 'is_admin', False) and report.steps):
            return exception.NoValidHost(reason=reason)
        reason += ' Filter results: %s' % report.summary()
        return exception.NoValidHost(
            reason=reason,
            filters=[{'name': s.name, 'hosts_in': s.hosts_in,
                      'hosts_out': s.hosts_out} for s in report.steps])
