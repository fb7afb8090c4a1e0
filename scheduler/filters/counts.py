"""Filters that keep a host's count of something below a limit: the
one rule behind IoOpsFilter, NumInstancesFilter and their per-aggregate
variants."""

from oslo_config import cfg

from scheduler.filters import base
from scheduler.resources import aggregates

CONF = cfg.CONF


class CountBelowLimit(base.RequestScopedFilter):
    """Passes hosts whose ``count`` attribute is below the
    ``[filter_scheduler]`` option ``option``.

    Runs for every instance of a request: each instance placed on a host
    counts there.
    """

    #: The host attribute counted, the option (and aggregate metadata
    #: key) holding the limit, and what the count is, for reasons.
    count = ''
    option = ''
    what = ''

    def prepare(self, spec_obj) -> int:
        # Not about the request: the limit, read once per request.
        return getattr(CONF.filter_scheduler, self.option)

    def passes(self, host_state, limit: int) -> base.Verdict:
        have = getattr(host_state, self.count)
        return have < limit or base.Rejected(
            '%d %s >= %s %d', have, self.what, self.option, limit)

    def filter_columns(self, columns, limit: int):
        """``passes`` over columns (``scheduler.columns``)."""
        return getattr(columns, self.count) < limit


class AggregateCountBelowLimit(CountBelowLimit):
    """``CountBelowLimit`` where the host's aggregates may set the limit
    (metadata ``option``; the smallest when several do)."""

    def passes(self, host_state, default: int) -> base.Verdict:
        limit = aggregates.host_value(host_state, self.option, default, int)
        have = getattr(host_state, self.count)
        return have < limit or base.Rejected(
            '%d %s >= %s %s %d', have, self.what,
            'aggregate' if host_state.aggregate_values(self.option)
            else '[filter_scheduler]', self.option, limit)
