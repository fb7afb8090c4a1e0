"""AvailabilityZoneFilter: the host is in the requested availability zone."""

from oslo_config import cfg

from scheduler.filters import base

CONF = cfg.CONF


def host_zones(host_state) -> set:
    """The host's zones: from its aggregates, else the default zone."""
    return host_state.availability_zones or {
        CONF.default_availability_zone}


class AvailabilityZoneFilter(base.RequestScopedFilter):
    """Passes hosts in the request's availability zone (any if none asked)."""

    run_filter_once_per_request = True

    def prepare(self, spec_obj):
        zone = spec_obj.availability_zone
        if not zone:
            return base.SKIP
        # A host in no zone aggregate is in the default zone.
        return zone, zone == CONF.default_availability_zone

    def passes(self, host_state, prepared) -> base.Verdict:
        zone, is_default = prepared
        zones = host_state.availability_zones
        return (zone in zones if zones else is_default) or base.Rejected(
            lambda: 'in zone(s) %s, not in requested zone %s' % (
                ', '.join(sorted(host_zones(host_state))), zone))

    def filter_columns(self, columns, prepared):
        """``passes`` over columns, once per distinct set of zones."""
        zone, is_default = prepared
        return columns.code_mask(
            'zones', lambda zones: zone in zones if zones else is_default)
