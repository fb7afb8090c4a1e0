"""ImagePropertiesFilter: the host supports the image's architecture,
hypervisor type and version, and VM mode."""

from oslo_utils import versionutils

from scheduler.filters import base
from scheduler.filters import extra_specs_ops

_VM_MODE_ALIASES = {'pv': 'xen', 'hv': 'hvm', 'baremetal': 'hvm'}


def _requested_version_ok(host_version, requirement: str) -> bool:
    if host_version is None:
        return False
    words = requirement.split()
    try:
        if len(words) == 2:
            return extra_specs_ops.match(
                host_version, '%s %d' % (words[0], versionutils.convert_version_to_int(words[1])))
        return host_version == versionutils.convert_version_to_int(words[0])
    except ValueError:
        return False


class ImagePropertiesFilter(base.BaseHostFilter):
    """Passes hosts that support the image's hw_architecture, img_hv_type,
    hw_vm_mode and img_hv_requested_version."""

    run_filter_once_per_request = True

    def _problem(self, host_state, spec_obj) -> str | None:
        props = spec_obj.image_properties
        arch = props.get('hw_architecture') or props.get('architecture')
        hv_type = props.get('img_hv_type') or props.get('hypervisor_type')
        vm_mode = props.get('hw_vm_mode') or props.get('vm_mode')
        vm_mode = _VM_MODE_ALIASES.get(vm_mode, vm_mode)
        version = props.get('img_hv_requested_version')
        if not (arch or hv_type or vm_mode or version):
            return None
        supported = host_state.supported_instances
        if (arch or hv_type or vm_mode) and not supported:
            return 'reports no supported instance types'
        if arch or hv_type or vm_mode:
            wanted = (arch, hv_type, vm_mode)
            for triple in supported:
                arch_h, hv_h, mode_h = (list(triple) + [None] * 3)[:3]
                if all(w is None or w == h
                       for w, h in zip(wanted, (arch_h, hv_h, mode_h))):
                    break
            else:
                return ('supports %s, not architecture=%s hypervisor=%s '
                        'vm_mode=%s' % (supported, arch, hv_type, vm_mode))
        if version and not _requested_version_ok(
                host_state.hypervisor_version, version):
            return ('hypervisor version %s does not satisfy %r'
                    % (host_state.hypervisor_version, version))
        return None

    def host_passes(self, host_state, spec_obj) -> bool:
        return self._problem(host_state, spec_obj) is None

    def rejection_reason(self, host_state, spec_obj) -> str:
        return self._problem(host_state, spec_obj) or 'did not pass'

