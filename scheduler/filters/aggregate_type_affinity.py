"""AggregateTypeAffinityFilter: the host's aggregates, if they restrict
flavors with ``instance_type`` metadata, allow the request's flavor."""

from scheduler.filters import base
from scheduler.resources import aggregates

KEY = 'instance_type'


class AggregateTypeAffinityFilter(base.RequestScopedFilter):
    """Passes hosts whose aggregates set no ``instance_type`` metadata,
    and hosts where it names the flavor (a flavor name or a comma list
    such as ``m1.nano,m1.small``; "instance type" is the old name of
    flavor).  Several aggregates setting the key: any one naming the
    flavor is enough.
    """

    run_filter_once_per_request = True

    def prepare(self, spec_obj):
        return spec_obj.flavor.name

    def passes(self, host_state, flavor_name) -> base.Verdict:
        allowed = aggregates.values(host_state, KEY)
        return not allowed or flavor_name in allowed or base.Rejected(
            lambda: 'flavor %s is not in the aggregate instance_type list '
            '%s' % (flavor_name, ','.join(sorted(allowed))))
