"""ComputeFilter: the host's compute service is up and enabled."""

from oslo_config import cfg
from oslo_log import log as logging

from scheduler.filters import base
from scheduler.resources import liveness

LOG = logging.getLogger(__name__)
CONF = cfg.CONF


class ComputeFilter(base.BaseHostFilter):
    """Passes hosts that reported recently, are not disabled and were not
    forced down by an operator (nova's ``forced_down``; the age of the
    report is measured by ``scheduler.resources.liveness``' clock)."""

    run_filter_once_per_request = True

    def filter_all(self, host_states, spec_obj) -> list:
        # The same test as host_passes, with the cut-off computed once:
        # this filter sees every host of every request.
        cutoff = liveness.cutoff()
        passed = []
        debug = LOG.isEnabledFor(logging.DEBUG)
        for host in host_states:
            if (not host.disabled and not host.forced_down
                    and host.received_at >= cutoff):
                passed.append(host)
            elif debug:
                LOG.debug('%s: %s', host,
                          base.reason_of(self.host_passes(host, spec_obj),
                                         self))
        return passed

    def filter_columns(self, columns, spec_obj):
        """``filter_all`` over columns (``scheduler.columns``)."""
        return (~columns.disabled & ~columns.forced_down
                & (columns.received_at >= liveness.cutoff()))

    def host_passes(self, host_state, spec_obj) -> base.Verdict:
        if host_state.disabled:
            return base.Rejected('compute service disabled (%s)',
                                 host_state.disabled_reason
                                 or 'no reason given')
        if host_state.forced_down:
            return base.Rejected('compute service forced down by an operator')
        if not host_state.is_up():
            return base.Rejected(
                'no report for %.0f s (service_down_time %d s)',
                host_state.seconds_since_report(),
                CONF.scheduler.service_down_time)
        return True
