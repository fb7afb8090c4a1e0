"""AcmeFilter: the flavor's ``acme:foo`` extra spec picks the hosts.

A flavor asks for a kind of ACME hardware with the extra spec
``acme:foo`` (``bar`` or ``baz``).  A host offers the kinds listed in
the ``acme:foo`` metadata of its aggregates (a comma list, such as
``bar,baz``).  Flavors without the extra spec may go anywhere.

Operators tag hosts through aggregates::

    scheduler-manage aggregate create acme-bar --property acme:foo=bar
    scheduler-manage aggregate add-host acme-bar compute1
"""

from oslo_log import log as logging

from scheduler import filters

LOG = logging.getLogger(__name__)

EXTRA_SPEC = 'acme:foo'
#: The values a flavor may ask for (nova would validate them in its API).
ALLOWED = frozenset({'bar', 'baz'})


def offered(host_state) -> set:
    """What the host's aggregates offer under ``acme:foo``."""
    found = set()
    for raw in host_state.aggregate_values(EXTRA_SPEC):
        found.update(v.strip() for v in raw.split(',') if v.strip())
    return found


class AcmeFilter(filters.RequestScopedFilter):
    """Passes hosts whose aggregates offer the flavor's acme:foo."""

    # The flavor is the same for every instance of a request.
    run_filter_once_per_request = True

    def prepare(self, spec_obj):
        wanted = spec_obj.flavor.extra_specs.get(EXTRA_SPEC)
        if wanted is None:
            # The request asks nothing of us: no host is even looked at.
            return filters.SKIP
        LOG.debug('Extra spec %s is %r', EXTRA_SPEC, wanted)
        return wanted

    def passes(self, host_state, wanted: str):
        # An unknown value passes no host: the flavor is wrong.
        if wanted not in ALLOWED:
            return filters.Rejected(
                'flavor extra spec %s=%r is not one of %s', EXTRA_SPEC,
                wanted, ', '.join(sorted(ALLOWED)))
        have = offered(host_state)
        # The reason is built only if explain asks for it.
        return wanted in have or filters.Rejected(
            lambda: 'flavor wants %s=%s; the host\'s aggregates offer %s'
            % (EXTRA_SPEC, wanted, ', '.join(sorted(have)) or 'none'))
