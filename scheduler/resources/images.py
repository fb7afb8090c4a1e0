"""Image properties as nova reads them: canonical names and versions.

nova stores ``hw_architecture``, ``img_hv_type`` and ``hw_vm_mode`` in
canonical form (lower case, old aliases replaced) and refuses values it
does not know; ImagePropertiesFilter compares the canonical forms with
the ``supported_instances`` the computes report.  This module also
reads ``img_hv_requested_version``, a comma list of version predicates
such as ``>= 7.0, < 9.0``.
"""

import operator
import re

from oslo_utils import versionutils

from scheduler import exception

#: nova's Architecture values.
ARCHITECTURES = frozenset((
    'alpha', 'armv6', 'armv7l', 'armv7b', 'aarch64', 'cris', 'i686', 'ia64',
    'lm32', 'm68k', 'microblaze', 'microblazeel', 'mips', 'mipsel',
    'mips64', 'mips64el', 'openrisc', 'parisc', 'parisc64', 'ppc', 'ppcle',
    'ppc64', 'ppc64le', 'ppcemb', 's390', 's390x', 'sh4', 'sh4eb', 'sparc',
    'sparc64', 'unicore32', 'x86_64', 'xtensa', 'xtensaeb'))

_ARCH_ALIASES = {'i386': 'i686', 'i486': 'i686', 'i586': 'i686',
                 'x86_32': 'i686', 'x86_32p': 'i686', 'amd64': 'x86_64'}

#: nova's HVType values.
HYPERVISOR_TYPES = frozenset((
    'baremetal', 'bhyve', 'docker', 'fake', 'hyperv', 'ironic', 'kqemu',
    'kvm', 'lxc', 'lxd', 'openvz', 'parallels', 'virtuozzo', 'phyp', 'qemu',
    'test', 'uml', 'vbox', 'vmware', 'xen', 'zvm', 'powervm'))

_HV_ALIASES = {'xapi': 'xen'}

#: nova's VMMode values.
VM_MODES = frozenset(('hvm', 'xen', 'uml', 'exe'))

_VM_MODE_ALIASES = {'pv': 'xen', 'hv': 'hvm', 'baremetal': 'hvm'}

#: (property, its names before Liberty): nova reads either.
LEGACY_NAMES = {
    'hw_architecture': 'architecture',
    'img_hv_type': 'hypervisor_type',
    'hw_vm_mode': 'vm_mode',
    'img_hv_requested_version': 'hypervisor_version_requires',
}


def _canonical(kind: str, value, aliases: dict, known: frozenset,
               strict: bool):
    if value is None or value == '':
        return None
    name = aliases.get(str(value).strip().lower(),
                       str(value).strip().lower())
    if strict and name not in known:
        raise exception.InvalidRequest(
            reason='image %s %r is not one nova knows (%s)'
            % (kind, value, ', '.join(sorted(known))))
    return name


def architecture(value, strict: bool = True) -> str | None:
    """``amd64`` -> ``x86_64``, ``i386`` -> ``i686``, lower case."""
    return _canonical('architecture', value, _ARCH_ALIASES, ARCHITECTURES,
                      strict)


def hypervisor_type(value, strict: bool = True) -> str | None:
    """``QEMU`` -> ``qemu``, ``xapi`` -> ``xen``."""
    return _canonical('hypervisor type', value, _HV_ALIASES,
                      HYPERVISOR_TYPES, strict)


def vm_mode(value, strict: bool = True) -> str | None:
    """``pv`` -> ``xen``, ``hv`` and ``baremetal`` -> ``hvm``."""
    return _canonical('VM mode', value, _VM_MODE_ALIASES, VM_MODES, strict)


def supported_triple(triple) -> tuple:
    """A host's ``[arch, hv_type, vm_mode]`` in canonical form (unknown
    names are kept, lower case: the compute knows its own hardware)."""
    arch, hv_type, mode = (list(triple) + [None] * 3)[:3]
    return (architecture(arch, strict=False),
            hypervisor_type(hv_type, strict=False),
            vm_mode(mode, strict=False))


def prop(properties: dict, name: str):
    """An image property by its name or its pre-Liberty name."""
    value = properties.get(name)
    if value is None and name in LEGACY_NAMES:
        value = properties.get(LEGACY_NAMES[name])
    return value


_PREDICATE = re.compile(r'^\s*(<=|>=|==|!=|<|>|=)?\s*(\d+(?:\.\d+)*)\s*$')

_OPS = {'<': operator.lt, '<=': operator.le, '>': operator.gt,
        '>=': operator.ge, '==': operator.eq, '=': operator.eq,
        '!=': operator.ne}


def _as_tuple(version: str) -> tuple:
    parts = [int(p) for p in version.split('.')]
    return tuple(parts + [0] * (3 - len(parts)))


def version_predicates(requirement: str) -> list:
    """``'>= 7.0, < 9.0'`` -> ``[(op, version), ...]``; all must hold.

    Versions with dots compare part by part with the host's version
    (``hypervisor_version`` encodes x.y.z as x*10^6 + y*10^3 + z); a
    bare integer (the admin guide's ``>=6000``) compares with the
    integer as reported.  No operator means ``==``.  Anything else is
    an ``InvalidRequest``.
    """
    predicates = []
    for part in str(requirement).split(','):
        match = _PREDICATE.match(part)
        if not match:
            raise exception.InvalidRequest(
                reason='image property img_hv_requested_version %r: %r is '
                       'not <op> <version> with op one of < <= > >= == !='
                       % (requirement, part.strip()))
        op, version = match.group(1) or '==', match.group(2)
        predicates.append((_OPS[op], op, version))
    return predicates


def version_satisfies(host_version: int | None, predicates: list) -> bool:
    """Whether the host's integer version meets every predicate."""
    if host_version is None:
        return False
    host_tuple = None
    for compare, _op, version in predicates:
        if '.' not in version:
            if not compare(host_version, int(version)):
                return False
            continue
        if host_tuple is None:
            host_tuple = _as_tuple(
                versionutils.convert_version_to_str(host_version))
        if not compare(host_tuple, _as_tuple(version)):
            return False
    return True
