"""ServerGroupAntiAffinityFilter: the host runs fewer members of the
instance's anti-affinity server group than the group allows."""

from scheduler.filters import base
from scheduler.resources import server_groups

POLICY = 'anti-affinity'


class ServerGroupAntiAffinityFilter(base.RequestScopedFilter):
    """Passes hosts running fewer members of the instance's server group
    than its ``max_server_per_host`` rule (1 by default) when the group
    has the ``anti-affinity`` policy; every host otherwise.

    A host that already runs the instance itself (a resize or migration
    checking its source) passes.  Runs for every instance of a request,
    since each placed instance joins the group's hosts.
    """

    def prepare(self, spec_obj):
        group = server_groups.group_of(spec_obj, POLICY)
        if group is None:
            return base.SKIP
        return (frozenset(group.obj_get('members') or ()),
                list(group.obj_get('hosts') or ()),
                server_groups.max_per_host(group),
                spec_obj.obj_get('instance_uuid'))

    def passes(self, host_state, prepared) -> base.Verdict:
        members, hosts, limit, instance_uuid = prepared
        if instance_uuid and instance_uuid in host_state.instance_uuids:
            return True
        count = server_groups.members_on_host(host_state, members, hosts)
        return count < limit or base.Rejected(
            'runs %d member(s) of the anti-affinity server group, '
            'max_server_per_host %d', count, limit)
