"""ServerGroupSoftAffinityWeigher: for a soft-affinity server group,
prefer hosts already running its members."""

from scheduler.filters import server_group_anti_affinity as groups
from scheduler.weights import base
from scheduler.weights import non_negative

POLICY = 'soft-affinity'


def member_counts(hosts: list, spec_obj, policy: str) -> list | None:
    """Members of the request's ``policy`` group on each host, or None
    when the request has no such group."""
    group = groups.group_of(spec_obj, policy)
    if group is None:
        return None
    members = frozenset(group.obj_get('members') or ())
    group_hosts = list(group.obj_get('hosts') or ())
    return [groups.members_on_host(host, members, group_hosts)
            for host in hosts]


class ServerGroupSoftAffinityWeigher(non_negative.NonNegativeMultiplier,
                                     base.BaseHostWeigher):
    """Weighs hosts by how many members of the instance's
    ``soft-affinity`` server group they run: the more, the better.
    Instances of other groups or of none weigh 0 everywhere.  Only a
    positive ``soft_affinity_weight_multiplier`` makes sense; a negative
    aggregate override is logged and read as 0.0.
    """

    multiplier_option = 'soft_affinity_weight_multiplier'

    def weigh_objects(self, weighed_hosts: list, spec_obj) -> list:
        counts = member_counts([w.obj for w in weighed_hosts], spec_obj,
                               POLICY)
        return [0.0] * len(weighed_hosts) if counts is None else counts
