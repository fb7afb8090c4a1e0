"""ServerGroupAntiAffinityFilter: the host runs fewer members of the
instance's anti-affinity server group than the group allows."""

from scheduler import exception
from scheduler.filters import base
from scheduler.objects import instance_group as group_obj

POLICY = 'anti-affinity'
RULE = 'max_server_per_host'


def group_of(spec_obj, policy: str) -> group_obj.InstanceGroup | None:
    """The request's server group if its policy is ``policy``, else None."""
    group = spec_obj.obj_get('instance_group')
    if group is None or group.obj_get('policy') != policy:
        return None
    return group


def members_on_host(host_state, members: frozenset,
                    group_hosts: list) -> int:
    """How many members of a server group run on ``host_state``.

    Two witnesses, and the larger count wins: the members among the
    host's ``instance_uuids`` (exact when the compute reported them and
    the scheduler added the uuids it placed), and the occurrences of the
    host in the group's ``hosts`` (the caller's list plus one entry per
    instance the scheduler placed earlier in this request, which also
    covers instances placed without a uuid).  Adding the two would count
    a member twice; the larger never does.
    """
    on_host = len(members.intersection(host_state.instance_uuids)) \
        if members else 0
    listed = group_hosts.count(host_state.host) if group_hosts else 0
    return max(on_host, listed)


def max_per_host(group) -> int:
    """The group's ``max_server_per_host`` rule (default 1)."""
    raw = (group.obj_get('rules') or {}).get(RULE)
    if raw is None:
        return 1
    try:
        value = int(raw)
    except (TypeError, ValueError):
        value = 0
    if value < 1:
        raise exception.InvalidRequest(
            reason='server group rule %s=%r is not a positive integer'
            % (RULE, raw))
    return value


class ServerGroupAntiAffinityFilter(base.RequestScopedFilter):
    """Passes hosts running fewer members of the instance's server group
    than its ``max_server_per_host`` rule (1 by default) when the group
    has the ``anti-affinity`` policy; every host otherwise.

    A host that already runs the instance itself (a resize or migration
    checking its source) passes.  Runs for every instance of a request,
    since each placed instance joins the group's hosts.
    """

    def prepare(self, spec_obj):
        group = group_of(spec_obj, POLICY)
        if group is None:
            return base.SKIP
        return (frozenset(group.obj_get('members') or ()),
                list(group.obj_get('hosts') or ()), max_per_host(group),
                spec_obj.obj_get('instance_uuid'))

    def passes(self, host_state, prepared) -> bool:
        members, hosts, limit, instance_uuid = prepared
        if instance_uuid and instance_uuid in host_state.instance_uuids:
            return True
        return members_on_host(host_state, members, hosts) < limit

    def rejection_reason(self, host_state, spec_obj) -> str:
        prepared = self.prepare(spec_obj)
        if prepared is base.SKIP:
            return 'did not pass'
        members, hosts, limit, _uuid = prepared
        return ('runs %d member(s) of the anti-affinity server group, '
                'max_server_per_host %d'
                % (members_on_host(host_state, members, hosts), limit))
