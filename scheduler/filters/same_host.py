"""SameHostFilter: the host runs one of the instances named by the
``same_host`` scheduler hint."""

from scheduler.filters import base
from scheduler.filters import different_host

HINT = 'same_host'


class SameHostFilter(base.RequestScopedFilter):
    """Passes hosts running at least one of the instances whose uuids
    the request gives in the ``same_host`` hint; every host without the
    hint.  The opposite of DifferentHostFilter.

    The admin guide words it as "the same host as all other instances";
    nova's code, which callers rely on, accepts a host running any one
    of them, and so does this filter: named instances that run on
    different hosts leave each of those hosts a candidate.
    """

    run_filter_once_per_request = True

    def prepare(self, spec_obj):
        return different_host.hint_uuids(spec_obj, HINT) or base.SKIP

    def filter_columns(self, columns, uuids: frozenset):
        """Hosts listing one of ``uuids`` at least, found through the
        column store's instance index (``Columns.instances_among``)."""
        return columns.instances_among(uuids) > 0

    def passes(self, host_state, uuids: frozenset) -> base.Verdict:
        return not uuids.isdisjoint(host_state.instance_uuids) or \
            base.Rejected(lambda: 'runs none of the instance(s) %s named '
                          'by the same_host hint' % ', '.join(sorted(uuids)))
