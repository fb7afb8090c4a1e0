"""AggregateInstanceExtraSpecsFilter: the metadata of the host's
aggregates satisfies the flavor's extra specs."""

import numpy as np

from scheduler.filters import base
from scheduler.filters import extra_specs_ops
from scheduler.resources import aggregates

SCOPE = 'aggregate_instance_extra_specs'


class AggregateInstanceExtraSpecsFilter(base.RequestScopedFilter):
    """Passes hosts whose aggregates' metadata satisfies every flavor
    extra spec scoped ``aggregate_instance_extra_specs:`` and, for
    backward compatibility, every unscoped one (a key without a colon).

    An aggregate value may be a comma list; the spec is met when any
    item satisfies it.  Requirements use the extra specs operator
    language (``<or> a <or> b``, ``>= 4``, ``s== x``...; no operator
    means equal), as ComputeCapabilitiesFilter does.  A host whose
    aggregates do not set the key does not pass.

    Unscoped keys are checked by ComputeCapabilitiesFilter too: with
    both filters enabled a flavor using them must satisfy both, which
    is seldom what anyone wants, hence the scope.
    """

    run_filter_once_per_request = True

    def prepare(self, spec_obj):
        """``[(spec key, metadata key, requirement)]`` to check."""
        checks = []
        for key, req in (spec_obj.flavor.extra_specs or {}).items():
            scope, sep, rest = key.partition(':')
            if sep:
                if scope != SCOPE:
                    continue
                meta_key = rest
            else:
                meta_key = key
            if meta_key:
                checks.append((key, meta_key, req))
        return checks or base.SKIP

    @staticmethod
    def _failed(host_state, checks):
        for key, meta_key, req in checks:
            have = aggregates.values(host_state, meta_key)
            if not any(extra_specs_ops.match(v, req) for v in have):
                return key, meta_key, req, have
        return None

    def filter_columns(self, columns, checks) -> np.ndarray:
        """``passes`` once per distinct set of aggregates among the
        candidates, not once per host.

        The verdict reads nothing of a host but its aggregates'
        metadata, and views with the same aggregates share one list of
        them (``HostView.set_aggregates``): a fleet of thousands of
        hosts has a handful of such sets, told apart by the
        ``aggregate_set`` column without visiting each view.  A view
        with its own list is judged on its own, as host by host.
        """
        judged = {code: self._failed(view, checks) is None
                  for code, view in
                  columns.one_view_per_code('aggregate_set').items()}
        table = np.zeros(max(judged, default=0) + 1, bool)
        table[list(judged)] = list(judged.values())
        return table[columns.aggregate_set]

    def passes(self, host_state, checks) -> base.Verdict:
        failed = self._failed(host_state, checks)
        if failed is None:
            return True
        key, meta_key, req, have = failed
        if not have:
            return base.Rejected('flavor extra spec %s=%r: no aggregate of '
                                 'the host sets %s', key, req, meta_key)
        return base.Rejected(
            lambda: 'flavor extra spec %s=%r not met by aggregate metadata '
            '%s=%s' % (key, req, meta_key, ','.join(sorted(have))))
