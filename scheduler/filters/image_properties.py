"""ImagePropertiesFilter: the host supports the image's architecture,
hypervisor type and version, and VM mode."""

import re

from oslo_utils import versionutils

from scheduler.filters import base
from scheduler.filters import extra_specs_ops

_VM_MODE_ALIASES = {'pv': 'xen', 'hv': 'hvm', 'baremetal': 'hvm'}


_REQUIREMENT = re.compile(r'^\s*(==|!=|>=|<=|=)?\s*(\d+(?:\.\d+)*)\s*$')


def _version_requirement(requirement: str) -> str:
    """'>= 6.0' (or '>=6.0') -> '>= 6000000', comparable with
    hypervisor_version, which encodes x.y.z as x*10^6 + y*10^3 + z."""
    match = _REQUIREMENT.match(requirement)
    if not match:
        raise ValueError('unreadable version requirement %r' % requirement)
    op, version = match.group(1) or '==', match.group(2)
    parts = version.split('.')
    # '6.0' means 6.0.0; a single number (nova's '6000') is taken as is.
    if len(parts) > 1:
        parts += ['0'] * (3 - len(parts))
    return '%s %d' % (op, versionutils.convert_version_to_int(
        '.'.join(parts)))


class ImagePropertiesFilter(base.RequestScopedFilter):
    """Passes hosts that support the image's hw_architecture, img_hv_type,
    hw_vm_mode and img_hv_requested_version."""

    run_filter_once_per_request = True

    def prepare(self, spec_obj):
        props = spec_obj.image_properties
        arch = props.get('hw_architecture') or props.get('architecture')
        hv_type = props.get('img_hv_type') or props.get('hypervisor_type')
        vm_mode = props.get('hw_vm_mode') or props.get('vm_mode')
        vm_mode = _VM_MODE_ALIASES.get(vm_mode, vm_mode)
        version = props.get('img_hv_requested_version')
        if not (arch or hv_type or vm_mode or version):
            return base.SKIP
        try:
            version = _version_requirement(version) if version else None
        except ValueError:
            # An unreadable version can match no hypervisor.
            version = '== -1'
        wanted = (arch, hv_type, vm_mode) if (arch or hv_type or vm_mode) \
            else None
        return wanted, version

    @staticmethod
    def _problem(host_state, prepared) -> str | None:
        wanted, version = prepared
        if wanted is not None:
            supported = host_state.supported_instances
            if not supported:
                return 'reports no supported instance types'
            for triple in supported:
                have = (list(triple) + [None] * 3)[:3]
                if all(w is None or w == h for w, h in zip(wanted, have)):
                    break
            else:
                return ('supports %s, not architecture=%s hypervisor=%s '
                        'vm_mode=%s' % (supported, *wanted))
        if version is not None and not extra_specs_ops.match(
                host_state.hypervisor_version, version):
            return ('hypervisor version %s does not satisfy %s'
                    % (host_state.hypervisor_version, version))
        return None

    def passes(self, host_state, prepared) -> bool:
        return self._problem(host_state, prepared) is None

    def rejection_reason(self, host_state, spec_obj) -> str:
        prepared = self.prepare(spec_obj)
        if prepared is base.SKIP:
            return 'did not pass'
        return self._problem(host_state, prepared) or 'did not pass'
