"""The chance scheduler: a random host among those that are up."""

import random

from oslo_config import cfg
from oslo_log import log as logging

from scheduler import driver
from scheduler import exception
from scheduler import pipeline

LOG = logging.getLogger(__name__)


class ChanceScheduler(driver.Scheduler):
    """Places each instance on a random up host; checks no resources.

    Honours ``ignore_hosts`` and ``force_hosts``.  Useful for tests and
    for fleets of identical, never-full hosts.
    """

    def _candidates(self, spec_obj) -> list:
        # Hosts other workers took the reports of (intake, API 1.5).
        self.host_manager.refresh_changed_reports()
        hosts = self.host_manager.get_up_host_states()
        # Host names match in any case, as in nova.
        ignored = pipeline.name_matcher(spec_obj.obj_get('ignore_hosts'))
        forced = pipeline.name_matcher(spec_obj.obj_get('force_hosts'))
        if ignored is not None:
            hosts = [h for h in hosts if not ignored(h.host)]
        if forced is not None:
            hosts = [h for h in hosts if forced(h.host)]
        return hosts

    def select_destinations(self, context, spec_obj, instance_uuids: list,
                            return_alternates: bool = False) -> list:
        hosts = self._candidates(spec_obj)
        if not hosts:
            LOG.info('No up host to choose from (%d known)',
                     len(self.host_manager.get_all_host_states()))
            raise exception.NoValidHost(
                reason='Is the appropriate service running?')
        uuids = list(instance_uuids or [])
        extra = cfg.CONF.scheduler.max_attempts - 1 if return_alternates \
            else 0
        results = []
        for index in range(spec_obj.num_instances):
            uuid = uuids[index] if index < len(uuids) else None
            picks = random.sample(hosts, min(len(hosts), 1 + extra))
            self.host_manager.claim(picks[0], spec_obj, uuid)
            results.append([driver.selection_for(h, uuid) for h in picks])
        return results

    def schedule_run_instance(self, context, spec_obj,
                              instance_uuids: list) -> None:
        self.schedule_each(context, spec_obj, instance_uuids)
