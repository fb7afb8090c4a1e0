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
    #: The group policy this weigher serves.
    policy = POLICY

    @staticmethod
    def _signed(counts):
        """The raw weights of the members counted on each host (an
        array, or a list from the per-host form)."""
        return counts

    def _row_local_for(self, spec_obj) -> bool:
        """Not for a request of the group: each instance it places
        joins the group's hosts, which changes the weight of every node
        of the chosen host, not only the claimed node's
        (``scheduler.columns``)."""
        return server_groups.group_of(spec_obj, self.policy) is None

    def weigh_columns(self, columns, spec_obj):
        """``weigh_objects`` over columns: 0 everywhere outside a group
        of the policy, else the members on each host, signed."""
        counts = server_groups.member_count_columns(columns, spec_obj,
                                                    self.policy)
        return 0.0 if counts is None else self._signed(counts)

    def weigh_objects(self, weighed_hosts: list, spec_obj) -> list:
        counts = server_groups.member_counts(
            [w.obj for w in weighed_hosts], spec_obj, self.policy)
        if counts is None:
            return [0.0] * len(weighed_hosts)
        return self._signed(counts)
