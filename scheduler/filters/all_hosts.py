"""AllHostsFilter: every host passes."""

from scheduler.filters import base


class AllHostsFilter(base.BaseHostFilter):
    """Passes every host: a pipeline with no constraints."""

    run_filter_once_per_request = True

    def host_passes(self, host_state, spec_obj) -> bool:
        return True
