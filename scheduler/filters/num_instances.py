"""NumInstancesFilter: the host runs fewer instances than
``max_instances_per_host``."""

from oslo_config import cfg

from scheduler.filters import base

CONF = cfg.CONF


class NumInstancesFilter(base.RequestScopedFilter):
    """Passes hosts running fewer than ``[filter_scheduler]
    max_instances_per_host`` instances.

    Runs for every instance of a request: each instance placed on a
    host counts there.
    """

    def prepare(self, spec_obj) -> int:
        # Not about the request: the limit, read once per request.
        return CONF.filter_scheduler.max_instances_per_host

    def passes(self, host_state, max_instances: int) -> bool:
        return host_state.num_instances < max_instances

    row_local = True

    def filter_columns(self, columns, max_instances: int):
        """``passes`` over columns (``scheduler.columns``)."""
        return columns.num_instances < max_instances

    def rejection_reason(self, host_state, spec_obj) -> str:
        return ('%d instances >= max_instances_per_host %d'
                % (host_state.num_instances, self.prepare(spec_obj)))
