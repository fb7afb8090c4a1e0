"""AggregateNumInstancesFilter: the host runs fewer instances than its
aggregates' ``max_instances_per_host``."""

from oslo_config import cfg

from scheduler.filters import base
from scheduler.resources import aggregates

CONF = cfg.CONF

KEY = 'max_instances_per_host'


class AggregateNumInstancesFilter(base.RequestScopedFilter):
    """Passes hosts running fewer instances than the
    ``max_instances_per_host`` metadata of their aggregates (the
    smallest when several set it), or than ``[filter_scheduler]
    max_instances_per_host`` when none does.
    """

    def prepare(self, spec_obj) -> int:
        return CONF.filter_scheduler.max_instances_per_host

    def passes(self, host_state, default: int) -> bool:
        limit = aggregates.host_value(host_state, KEY, default, int)
        return host_state.num_instances < limit

    def rejection_reason(self, host_state, spec_obj) -> str:
        limit = aggregates.host_value(host_state, KEY,
                                      self.prepare(spec_obj), int)
        where = ('aggregate' if host_state.aggregate_values(KEY)
                 else '[filter_scheduler]')
        return ('%d instances >= %s max_instances_per_host %d'
                % (host_state.num_instances, where, limit))
