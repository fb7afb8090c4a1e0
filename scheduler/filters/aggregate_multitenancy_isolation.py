"""AggregateMultiTenancyIsolation: the host's tenant-isolated aggregates,
if any, admit the request's project."""

from scheduler.filters import base
from scheduler.resources import aggregates

KEY_PREFIX = 'filter_tenant_id'


def tenants_of(host_state) -> set:
    """Projects named by the host's ``filter_tenant_id*`` metadata.

    Both ``filter_tenant_id`` and keys such as ``filter_tenant_id_2``
    count (one metadata value is limited in length, so long lists are
    split over several keys); each value may be a comma list.
    """
    raw = []
    for agg in host_state.aggregates:
        for key, value in agg.metadata.items():
            if key.startswith(KEY_PREFIX):
                raw.append(value)
    return aggregates.split_values(raw) if raw else set()


class AggregateMultiTenancyIsolation(base.RequestScopedFilter):
    """Passes hosts in no tenant-isolated aggregate, and hosts whose
    ``filter_tenant_id`` / ``filter_tenant_id_*`` aggregate metadata
    lists the request's project.

    This reserves the isolated hosts for the listed projects; it does
    not keep those projects off other hosts (they may land anywhere).
    """

    run_filter_once_per_request = True

    def prepare(self, spec_obj):
        return spec_obj.obj_get('project_id')

    def passes(self, host_state, project_id) -> base.Verdict:
        tenants = tenants_of(host_state)
        return not tenants or project_id in tenants or base.Rejected(
            lambda: 'project %s is not among the aggregate\'s '
            'filter_tenant_id projects %s'
            % (project_id, ', '.join(sorted(tenants))))
