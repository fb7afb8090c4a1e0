"""ServerGroupAffinityFilter: the host is one of the hosts of the
instance's affinity server group, if the group has any."""

from scheduler.filters import base
from scheduler.resources import server_groups

POLICY = 'affinity'


class ServerGroupAffinityFilter(base.RequestScopedFilter):
    """Passes, when the instance's server group has the ``affinity``
    policy and already runs on some hosts (``instance_group.hosts``),
    only those hosts; every host otherwise (no group, another policy,
    or the group's first instance).

    Runs for every instance of a request: the scheduler adds each host
    it picks to the group's hosts, so the later instances follow the
    first.
    """

    def prepare(self, spec_obj):
        group = server_groups.group_of(spec_obj, POLICY)
        hosts = frozenset(group.obj_get('hosts') or ()) if group else None
        return hosts or base.SKIP

    def _row_local_for(self, spec_obj) -> bool:
        """Not for a request of the group (``scheduler.columns``): the
        first instance's host becomes every later instance's only one."""
        return server_groups.group_of(spec_obj, POLICY) is None

    def filter_columns(self, columns, hosts: frozenset):
        """``passes`` over columns, by the host-name codes."""
        return columns.host_counts(list(hosts)) > 0

    def passes(self, host_state, hosts: frozenset) -> base.Verdict:
        return host_state.host in hosts or base.Rejected(
            lambda: 'not one of the affinity server group\'s hosts %s'
            % ', '.join(sorted(hosts)))
