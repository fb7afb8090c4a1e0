"""SimpleCIDRAffinityFilter: the host's IP address is in the subnet the
``build_near_host_ip`` and ``cidr`` scheduler hints give."""

import ipaddress

from scheduler import exception
from scheduler.filters import base

DEFAULT_CIDR = '/24'


def _single(spec_obj, name: str, default=None):
    value = spec_obj.get_scheduler_hint(name, default)
    if isinstance(value, list):
        raise exception.InvalidRequest(
            reason='scheduler hint %s takes one value, not %d'
            % (name, len(value)))
    return value


def requested_network(
        spec_obj) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    """The subnet of the hints, or None without ``build_near_host_ip``.

    ``cidr`` may be written ``/24`` (the CLI example) or ``24`` (the
    API example); it defaults to ``/24``.  IPv6 works the same way.
    """
    address = _single(spec_obj, 'build_near_host_ip')
    if not address:
        return None
    cidr = str(_single(spec_obj, 'cidr', DEFAULT_CIDR) or DEFAULT_CIDR)
    prefix = cidr.strip().lstrip('/')
    try:
        return ipaddress.ip_network('%s/%s' % (address.strip(), prefix),
                                    strict=False)
    except ValueError as e:
        raise exception.InvalidRequest(
            reason='scheduler hints build_near_host_ip=%s cidr=%s are not '
                   'an IP address and prefix length: %s' % (address, cidr, e))


class SimpleCIDRAffinityFilter(base.RequestScopedFilter):
    """Passes hosts whose ``host_ip`` is in the subnet of the
    ``build_near_host_ip`` hint with the ``cidr`` hint's prefix length
    (``/24`` by default); every host when the hint is absent.  A host
    that reports no IP address does not pass.
    """

    run_filter_once_per_request = True

    def prepare(self, spec_obj):
        network = requested_network(spec_obj)
        return base.SKIP if network is None else network

    def passes(self, host_state, network) -> base.Verdict:
        host_ip = host_state.host_ip
        if host_ip is None:
            return base.Rejected(
                'reports no host_ip; the request wants one in %s', network)
        try:
            inside = ipaddress.ip_address(str(host_ip)) in network
        except ValueError:
            inside = False
        return inside or base.Rejected('host_ip %s is not in %s', host_ip,
                                       network)
