"""DifferentHostFilter: the host runs none of the instances named by the
``different_host`` scheduler hint."""

from scheduler.filters import base

HINT = 'different_host'


def hint_uuids(spec_obj, name: str) -> frozenset:
    """The instance uuids of scheduler hint ``name`` (one or several)."""
    value = spec_obj.get_scheduler_hint(name)
    if not value:
        return frozenset()
    if isinstance(value, str):
        value = [value]
    return frozenset(v for v in value if v)


class DifferentHostFilter(base.RequestScopedFilter):
    """Passes hosts running none of the instances whose uuids the request
    gives in the ``different_host`` hint; every host without the hint.
    The opposite of SameHostFilter.
    """

    run_filter_once_per_request = True

    def prepare(self, spec_obj):
        return hint_uuids(spec_obj, HINT) or base.SKIP

    def filter_columns(self, columns, uuids: frozenset):
        """Hosts listing none of ``uuids``, found through the column
        store's instance index (``Columns.instances_among``): a few
        rows visited, not every candidate's instance list."""
        return columns.instances_among(uuids) == 0

    def passes(self, host_state, uuids: frozenset) -> base.Verdict:
        return uuids.isdisjoint(host_state.instance_uuids) or base.Rejected(
            lambda: 'runs instance(s) %s named by the different_host hint'
            % ', '.join(sorted(uuids.intersection(
                host_state.instance_uuids))))
