"""ImagePropertiesFilter: the host supports the image's architecture,
hypervisor type and version, and VM mode."""

import numpy as np
from oslo_config import cfg

from scheduler import exception
from scheduler.filters import base
from scheduler.filters import compute_capabilities
from scheduler.resources import images

CONF = cfg.CONF


class _Supported:
    """A host reduced to its ``supported_instances``."""

    def __init__(self, supported: tuple):
        self.supported_instances = [list(t) for t in supported]


class ImagePropertiesFilter(base.RequestScopedFilter):
    """Passes hosts that support the image's ``hw_architecture``,
    ``img_hv_type`` and ``hw_vm_mode`` (one ``supported_instances``
    triple matching all that are set), ``img_hv_requested_version`` (a
    comma list of predicates such as ``>= 7.0, < 9.0``) and
    ``hw_maxphysaddr_bits`` (at most the host's cpu_info
    ``maxphysaddr.bits``).

    Values are canonicalised as nova does (``amd64`` is ``x86_64``,
    ``QEMU`` is ``qemu``, ``hv`` is ``hvm``); a value nova does not know
    or an unreadable version requirement is an InvalidRequest.  An
    image naming no architecture gets ``[filter_scheduler]
    image_properties_default_architecture`` when that is set.
    """

    run_filter_once_per_request = True
    #: nova runs it for rebuilds: a new image may need another host.
    run_on_rebuild = True

    def prepare(self, spec_obj):
        props = spec_obj.image_properties
        arch = images.architecture(
            images.prop(props, 'hw_architecture')
            or CONF.filter_scheduler.image_properties_default_architecture)
        hv_type = images.hypervisor_type(images.prop(props, 'img_hv_type'))
        mode = images.vm_mode(images.prop(props, 'hw_vm_mode'))
        version = images.prop(props, 'img_hv_requested_version')
        bits = props.get('hw_maxphysaddr_bits')
        if not (arch or hv_type or mode or version or bits):
            return base.SKIP
        predicates = images.version_predicates(version) if version else None
        if bits is not None:
            try:
                bits = int(str(bits).strip())
            except ValueError:
                raise exception.InvalidRequest(
                    reason='image property hw_maxphysaddr_bits %r is not '
                           'an integer' % bits)
        wanted = (arch, hv_type, mode) if (arch or hv_type or mode) \
            else None
        return wanted, predicates, version, bits

    @staticmethod
    def _problem(host_state, prepared) -> str | None:
        wanted, predicates, version, bits = prepared
        if wanted is not None:
            supported = host_state.supported_instances
            if not supported:
                return 'reports no supported instance types'
            for triple in supported:
                have = images.supported_triple(triple)
                if all(w is None or w == h for w, h in zip(wanted, have)):
                    break
            else:
                return ('supports %s, not architecture=%s hypervisor=%s '
                        'vm_mode=%s' % (supported, *wanted))
        if predicates is not None and not images.version_satisfies(
                host_state.hypervisor_version, predicates):
            return ('hypervisor version %s does not satisfy %s'
                    % (host_state.hypervisor_version, version))
        if bits is not None:
            have = compute_capabilities.lookup(
                host_state, ['cpu_info', 'maxphysaddr', 'bits'])
            try:
                enough = have is not None and int(have) >= bits
            except ValueError:
                enough = False
            if not enough:
                return ('maxphysaddr bits %s < the image\'s '
                        'hw_maxphysaddr_bits %d' % (have, bits))
        return None

    def filter_columns(self, columns, prepared):
        """Once per distinct ``supported_instances`` for the
        architecture, hypervisor type and VM mode, once per distinct
        hypervisor version for a version requirement (an image of a
        common OS asks for one: tested host by host it was the costliest
        filter of such a request); per host (None) when the image names
        address bits, or a candidate reports no version (the column
        holds 0 for it, as for a version 0)."""
        wanted, predicates, version, bits = prepared
        if bits is not None:
            return None
        versions = columns.hypervisor_version
        if predicates is not None and not versions.all():
            return None
        if wanted is None:
            mask = np.ones(len(versions), bool)
        else:
            architecture_only = (wanted, None, None, None)
            mask = columns.code_mask('supported', lambda supported: (
                self._problem(_Supported(supported), architecture_only)
                is None))
        if predicates is not None:
            distinct, where = np.unique(versions, return_inverse=True)
            meets = np.fromiter(
                (images.version_satisfies(int(v), predicates)
                 for v in distinct.tolist()), bool, len(distinct))
            mask &= meets[where.reshape(-1)]
        return mask

    def passes(self, host_state, prepared) -> base.Verdict:
        problem = self._problem(host_state, prepared)
        return problem is None or base.Rejected(problem)
