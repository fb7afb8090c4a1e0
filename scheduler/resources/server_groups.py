"""Server groups: which group a request belongs to, and its members on a host.

Used by the server group filters and the soft (anti-)affinity weighers.
"""

import numpy as np

from scheduler import exception

RULE = 'max_server_per_host'


def group_of(spec_obj, policy: str):
    """The request's server group (an ``objects.InstanceGroup``) if its
    policy is ``policy``, else None."""
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


def member_counts(hosts: list, spec_obj, policy: str) -> list | None:
    """Members of the request's ``policy`` group on each host, or None
    when the request has no such group."""
    group = group_of(spec_obj, policy)
    if group is None:
        return None
    members = frozenset(group.obj_get('members') or ())
    group_hosts = list(group.obj_get('hosts') or ())
    return [members_on_host(host, members, group_hosts) for host in hosts]


def member_count_columns(columns, spec_obj, policy: str):
    """``member_counts`` over columns (``scheduler.columns.Columns``):
    an array aligned with the candidates, or None when the request has
    no such group.  The members' rows come from the column store's
    instance index and the group's hosts from the host-name codes, so
    that no candidate is visited in Python."""
    group = group_of(spec_obj, policy)
    if group is None:
        return None
    members = frozenset(group.obj_get('members') or ())
    group_hosts = list(group.obj_get('hosts') or ())
    on_host = columns.instances_among(members) if members \
        else np.zeros(len(columns))
    if not group_hosts:
        return on_host
    return np.maximum(on_host, columns.host_counts(group_hosts))
