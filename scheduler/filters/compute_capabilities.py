"""ComputeCapabilitiesFilter: the host's capabilities satisfy the
flavor's extra specs."""

from oslo_log import log as logging

from scheduler.filters import base
from scheduler.filters import extra_specs_ops

LOG = logging.getLogger(__name__)

SCOPE = 'capabilities'


def _lookup(host_state, path: list):
    """Walk ``path`` from the host state: attributes, then dict keys."""
    value = host_state
    for i, part in enumerate(path):
        if isinstance(value, dict):
            if part in value:
                value = value[part]
                continue
            # cpu_info is flattened with dots: try the rest joined.
            dotted = '.'.join(path[i:])
            return value.get(dotted)
        if part.startswith('_') or not hasattr(value, part):
            return None
        value = getattr(value, part)
    return value


class ComputeCapabilitiesFilter(base.RequestScopedFilter):
    """Passes hosts whose capabilities satisfy the flavor's extra specs
    (unscoped keys and keys scoped ``capabilities:``)."""

    run_filter_once_per_request = True

    def prepare(self, spec_obj):
        """``[(key, path, requirement)]`` this filter must check."""
        checks = []
        for key, req in (spec_obj.flavor.extra_specs or {}).items():
            parts = key.split(':')
            if len(parts) > 1:
                if parts[0] != SCOPE:
                    continue
                parts = parts[1:]
            if parts and parts[0]:
                checks.append((key, parts, req))
        return checks or base.SKIP

    @staticmethod
    def _failed(host_state, checks):
        for key, path, req in checks:
            value = _lookup(host_state, path)
            if value is None or not extra_specs_ops.match(value, req):
                return key, req, value
        return None

    def passes(self, host_state, checks) -> bool:
        failed = self._failed(host_state, checks)
        if failed:
            LOG.debug('%(host)s fails extra spec %(key)s=%(req)r '
                      '(host has %(value)r)',
                      {'host': host_state, 'key': failed[0],
                       'req': failed[1], 'value': failed[2]})
        return failed is None

    def rejection_reason(self, host_state, spec_obj) -> str:
        checks = self.prepare(spec_obj)
        failed = (None if checks is base.SKIP
                  else self._failed(host_state, checks))
        if not failed:
            return 'did not pass'
        return 'extra spec %s=%r not met (host has %r)' % failed
