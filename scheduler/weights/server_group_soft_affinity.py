"""ServerGroupSoftAffinityWeigher: for a soft-affinity server group,
prefer hosts already running its members."""

from scheduler.resources import server_groups
from scheduler.weights import base
from scheduler.weights import non_negative

POLICY = 'soft-affinity'


class ServerGroupSoftAffinityWeigher(non_negative.NonNegativeMultiplier,
                                     base.BaseHostWeigher):
    """Weighs hosts by how many members of the instance's
    ``soft-affinity`` server group they run: the more, the better.
    Instances of other groups or of none weigh 0 everywhere.  Only a
    positive ``soft_affinity_weight_multiplier`` makes sense; a negative
    aggregate override is logged and read as 0.0.
    """

    multiplier_option = 'soft_affinity_weight_multiplier'

    row_local = True

    def weigh_columns(self, columns, spec_obj):
        """0 everywhere outside a soft-affinity group; else None (per host)."""
        if server_groups.group_of(spec_obj, POLICY) is None:
            return 0.0
        return None

    def weigh_objects(self, weighed_hosts: list, spec_obj) -> list:
        counts = server_groups.member_counts(
            [w.obj for w in weighed_hosts], spec_obj, POLICY)
        return [0.0] * len(weighed_hosts) if counts is None else counts
