"""ServerGroupSoftAntiAffinityWeigher: for a soft-anti-affinity server
group, prefer hosts running fewer of its members."""

from scheduler.weights import server_group_soft_affinity

POLICY = 'soft-anti-affinity'


class ServerGroupSoftAntiAffinityWeigher(
        server_group_soft_affinity.ServerGroupSoftAffinityWeigher):
    """Weighs hosts by minus how many members of the instance's
    ``soft-anti-affinity`` server group they run: the fewer, the
    better.  Instances of other groups or of none weigh 0 everywhere.
    Only a positive ``soft_anti_affinity_weight_multiplier`` makes
    sense; a negative aggregate override is logged and read as 0.0.
    """

    multiplier_option = 'soft_anti_affinity_weight_multiplier'
    policy = POLICY

    @staticmethod
    def _signed(counts):
        if isinstance(counts, list):
            return [-c for c in counts]
        return 0.0 - counts
