"""ServerGroupSoftAntiAffinityWeigher: for a soft-anti-affinity server
group, prefer hosts running fewer of its members."""

from scheduler.resources import server_groups
from scheduler.weights import base
from scheduler.weights import non_negative

POLICY = 'soft-anti-affinity'


class ServerGroupSoftAntiAffinityWeigher(non_negative.NonNegativeMultiplier,
                                         base.BaseHostWeigher):
    """Weighs hosts by minus how many members of the instance's
    ``soft-anti-affinity`` server group they run: the fewer, the
    better.  Instances of other groups or of none weigh 0 everywhere.
    Only a positive ``soft_anti_affinity_weight_multiplier`` makes
    sense; a negative aggregate override is logged and read as 0.0.
    """

    multiplier_option = 'soft_anti_affinity_weight_multiplier'

    row_local = True

    def weigh_columns(self, columns, spec_obj):
        """0 everywhere outside a soft-anti-affinity group; else None
        (per host)."""
        if server_groups.group_of(spec_obj, POLICY) is None:
            return 0.0
        return None

    def weigh_objects(self, weighed_hosts: list, spec_obj) -> list:
        counts = server_groups.member_counts(
            [w.obj for w in weighed_hosts], spec_obj, POLICY)
        if counts is None:
            return [0.0] * len(weighed_hosts)
        return [-c for c in counts]
