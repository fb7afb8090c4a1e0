"""AggregateIoOpsFilter: the host has fewer concurrent I/O operations
than its aggregates' ``max_io_ops_per_host``."""

from oslo_config import cfg

from scheduler.filters import base
from scheduler.resources import aggregates

CONF = cfg.CONF

KEY = 'max_io_ops_per_host'


class AggregateIoOpsFilter(base.RequestScopedFilter):
    """Passes hosts with fewer concurrent I/O operations (``num_io_ops``)
    than the ``max_io_ops_per_host`` metadata of their aggregates (the
    smallest when several set it), or than ``[filter_scheduler]
    max_io_ops_per_host`` when none does.
    """

    def prepare(self, spec_obj) -> int:
        return CONF.filter_scheduler.max_io_ops_per_host

    def passes(self, host_state, default: int) -> bool:
        limit = aggregates.host_value(host_state, KEY, default, int)
        return host_state.num_io_ops < limit

    def rejection_reason(self, host_state, spec_obj) -> str:
        limit = aggregates.host_value(host_state, KEY,
                                      self.prepare(spec_obj), int)
        where = ('aggregate' if host_state.aggregate_values(KEY)
                 else '[filter_scheduler]')
        return ('%d concurrent I/O operations >= %s max_io_ops_per_host %d'
                % (host_state.num_io_ops, where, limit))
