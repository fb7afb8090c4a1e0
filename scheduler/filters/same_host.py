"""SameHostFilter: the host runs all the instances named by the
``same_host`` scheduler hint."""

from scheduler.filters import base
from scheduler.filters import different_host

HINT = 'same_host'


class SameHostFilter(base.RequestScopedFilter):
    """Passes hosts running every instance whose uuid the request gives
    in the ``same_host`` hint; every host without the hint.  The
    opposite of DifferentHostFilter.

    The guide asks for the host of *all* the named instances, and that
    is what this checks: when they run on different hosts, or one of
    them is unknown, no host passes and the request fails with
    NoValidHost rather than silently landing next to only some of them
    (nova's code accepts a host running any one of them).
    """

    run_filter_once_per_request = True

    def prepare(self, spec_obj):
        return different_host.hint_uuids(spec_obj, HINT) or base.SKIP

    def passes(self, host_state, uuids: frozenset) -> bool:
        return uuids.issubset(host_state.instance_uuids)

    def rejection_reason(self, host_state, spec_obj) -> str:
        uuids = self.prepare(spec_obj)
        if uuids is base.SKIP:
            return 'did not pass'
        missing = sorted(uuids.difference(host_state.instance_uuids))
        return ('does not run instance(s) %s named by the same_host hint'
                % ', '.join(missing))
