"""AvailabilityZoneFilter: the host is in the requested availability zone."""

from oslo_config import cfg

from scheduler.filters import base

CONF = cfg.CONF


def host_zones(host_state) -> set:
    """The host's zones: from its aggregates, else the default zone."""
    return host_state.availability_zones or {
        CONF.default_availability_zone}


class AvailabilityZoneFilter(base.BaseHostFilter):
    """Passes hosts in the request's availability zone (any if none asked)."""

    run_filter_once_per_request = True

    def host_passes(self, host_state, spec_obj) -> bool:
        zone = spec_obj.availability_zone
        if not zone:
            return True
        return zone in host_zones(host_state)

    def rejection_reason(self, host_state, spec_obj) -> str:
        return ('in zone(s) %s, not in requested zone %s'
                % (', '.join(sorted(host_zones(host_state))),
                   spec_obj.availability_zone))
