"""ComputeCapabilitiesFilter: the host's capabilities satisfy the
flavor's extra specs."""

from scheduler.filters import base
from scheduler.filters import extra_specs_ops
from scheduler.objects import host_state as host_state_obj

SCOPE = 'capabilities'

#: The flavor's guest physical address width; nova checks it against
#: the ``maxphysaddr`` bits of the host's cpu_info.
MAXPHYSADDR_BITS = 'hw:maxphysaddr_bits'

#: Host values an extra spec may name: the reported fields and the
#: derived values of HostResources.  Anything else is looked up in
#: ``stats``; nothing else of the host object is reachable.
ATTRIBUTES = frozenset(host_state_obj.HostState.fields) | {
    'free_ram_mb', 'free_disk_mb', 'free_vcpus', 'vcpus_total',
    'total_usable_ram_mb', 'total_usable_disk_gb'}


def _walk(value, path: list):
    """Walk ``path`` through nested dicts; flattened dotted keys (as
    cpu_info is reported, ``topology.cores``) are tried too."""
    for i, part in enumerate(path):
        if not isinstance(value, dict):
            return None
        if part in value:
            value = value[part]
            continue
        return value.get('.'.join(path[i:]))
    return value


def lookup(host_state, path: list):
    """The host value ``path`` names, as nova resolves it: a host
    attribute first, else the host's ``stats``; deeper parts are dict
    keys."""
    head = path[0]
    value = getattr(host_state, head, None) if head in ATTRIBUTES else None
    if value is None:
        value = (getattr(host_state, 'stats', None) or {}).get(head)
    if value is None:
        return None
    return _walk(value, path[1:]) if len(path) > 1 else value


def is_known(host_state, key: str) -> bool:
    """Whether an unscoped key names a host attribute or a stats key."""
    return key in ATTRIBUTES or key in (getattr(host_state, 'stats', None)
                                        or {})


class ComputeCapabilitiesFilter(base.RequestScopedFilter):
    """Passes hosts whose capabilities satisfy the flavor's extra specs,
    as nova does: a key scoped ``capabilities:`` names a host attribute
    or a key of the host's ``stats`` (``capabilities:cpu_info:arch``,
    ``capabilities:num_os_type_windows``) and must match; an unscoped
    key is checked the same way only when the host has such an
    attribute or stats key, and ignored otherwise (``trust=trusted``
    belongs to another filter); other scopes are ignored.
    ``hw:maxphysaddr_bits=N`` requires ``cpu_info`` ``maxphysaddr.bits``
    of at least N.
    """

    run_filter_once_per_request = True

    def prepare(self, spec_obj):
        """``[(key, path, requirement, scoped)]`` this filter checks."""
        checks = []
        for key, req in (spec_obj.flavor.extra_specs or {}).items():
            if key == MAXPHYSADDR_BITS:
                checks.append((key, ['cpu_info', 'maxphysaddr', 'bits'],
                               '>= %s' % str(req).strip(), True))
                continue
            parts = key.split(':')
            scoped = len(parts) > 1
            if scoped:
                if parts[0] != SCOPE:
                    continue
                parts = parts[1:]
            if parts and parts[0]:
                checks.append((key, parts, req, scoped))
        return checks or base.SKIP

    @staticmethod
    def _failed(host_state, checks):
        for key, path, req, scoped in checks:
            if not scoped and not is_known(host_state, key):
                continue
            value = lookup(host_state, path)
            if value is None or not extra_specs_ops.match(str(value), req):
                return key, req, value
        return None

    def passes(self, host_state, checks) -> base.Verdict:
        failed = self._failed(host_state, checks)
        if failed is None:
            return True
        return base.Rejected('extra spec %s=%r not met (host has %r)',
                             *failed)
