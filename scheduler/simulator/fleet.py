"""The description of a simulated fleet: which hosts, how big, grouped how.

A fleet is either ``count`` identical hosts (``uniform()``) or a JSON
fleet file (``load()``; ``etc/scheduler/fleet.example.json`` is an
example)::

    {
      "aggregates": {"az1": {"availability_zone": "az1"},
                     "ssd": {"disk_type": "ssd"}},
      "groups": [
        {"prefix": "doc", "count": 6,
         "memory_mb": 32768, "local_gb": 400, "vcpus": 8,
         "cpu_allocation_ratio": 4.0, "ram_allocation_ratio": 1.0,
         "disk_allocation_ratio": 1.0,
         "hypervisor_type": "kvm", "hypervisor_version": "8.2.0",
         "architecture": "x86_64", "host_ip": "127.0.1.1",
         "cpu_info": {"vendor": "Intel", "topology": {"cores": 4}},
         "metrics": {"cpu.percent": 12.5},
         "availability_zone": "az1", "aggregates": ["ssd"]}
      ]
    }

Only ``groups`` and each group's ``prefix`` and ``count`` are required.
Hosts are named ``<prefix>-NNN`` (``doc-001``...); numbering goes on
across groups with the same prefix, so one prefix may span zones.
An availability zone is an aggregate with ``availability_zone``
metadata, as in nova: a group's ``availability_zone: az1`` puts its
hosts in the aggregate ``az1`` with that metadata.  Every other
aggregate a group names must be declared under ``aggregates`` with its
metadata (``{}`` for none), so that a misspelt name is an error, not a
new aggregate.  ``host_ip`` is the first address of the group, one more
per host, loopback only; groups without it get ``127.1.0.1`` onwards.
Allocation ratios left out are those of ``[compute]`` when the agent
starts.  Keys that begin with ``_`` are comments and are ignored;
any other unknown key is an error.
"""

import dataclasses
import ipaddress
import json
import re
import uuid

from oslo_utils import versionutils

from scheduler import objects

#: Namespace of the simulator's stable host and aggregate uuids.
UUID_NAMESPACE = uuid.UUID('98f30d92-cc79-4423-8bab-10e425c5e944')

#: Where hosts without a ``host_ip`` get their addresses.
AUTO_IP_START = ipaddress.ip_address('127.1.0.1')

AVAILABILITY_ZONE_KEY = 'availability_zone'

_NAME_RE = re.compile(r'^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$')


class FleetError(ValueError):
    """The fleet description cannot be used; the message says where and why."""


@dataclasses.dataclass(frozen=True)
class HostSpec:
    """One simulated host as the fleet describes it.

    Allocation ratios are ``None`` when the fleet leaves them to the
    ``[compute]`` defaults.
    """

    name: str
    memory_mb: int
    local_gb: int
    vcpus: int
    cpu_allocation_ratio: float | None
    ram_allocation_ratio: float | None
    disk_allocation_ratio: float | None
    hypervisor_type: str
    hypervisor_version: int
    architecture: str
    host_ip: str | None
    cpu_info: dict
    metrics: dict
    supported_instances: list
    aggregates: tuple

    @property
    def uuid(self) -> str:
        """Stable across restarts, so the scheduler sees the same node."""
        return host_uuid(self.name)


@dataclasses.dataclass
class FleetSpec:
    """Hosts, and the metadata of every aggregate they belong to."""

    hosts: list
    aggregate_metadata: dict

    def host(self, name: str) -> HostSpec:
        for spec in self.hosts:
            if spec.name == name:
                return spec
        raise KeyError(name)

    def aggregates(self) -> list:
        """The fleet's aggregates as the scheduler's ``Aggregate`` objects."""
        members: dict = {name: [] for name in self.aggregate_metadata}
        for spec in self.hosts:
            for name in spec.aggregates:
                members[name].append(spec.name)
        return [objects.Aggregate(id=None, uuid=aggregate_uuid(name),
                                  name=name, hosts=sorted(members[name]),
                                  metadata=dict(metadata))
                for name, metadata in sorted(self.aggregate_metadata.items())]

    def availability_zone(self, name: str) -> str | None:
        """The zone of host ``name``, or None when it is in no zone."""
        for agg in self.host(name).aggregates:
            zone = self.aggregate_metadata[agg].get(AVAILABILITY_ZONE_KEY)
            if zone:
                return zone
        return None


def host_uuid(name: str) -> str:
    return str(uuid.uuid5(UUID_NAMESPACE, 'host:%s' % name))


def aggregate_uuid(name: str) -> str:
    return str(uuid.uuid5(UUID_NAMESPACE, 'aggregate:%s' % name))


# -- field converters: each returns the clean value or raises ValueError --

def _integer(value, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError('must be an integer, not %r' % (value,))
    if value < minimum:
        raise ValueError('must be at least %d, not %d' % (minimum, value))
    return value


def _count(value) -> int:
    return _integer(value, 1)


def _size(value) -> int:
    return _integer(value, 0)


def _ratio(value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError('must be a number, not %r' % (value,))
    if value < 0:
        raise ValueError('must not be negative')
    return float(value)


def _name(value) -> str:
    if not isinstance(value, str) or not _NAME_RE.match(value):
        raise ValueError('must be letters, digits, dots and dashes, not %r'
                         % (value,))
    return value


def _text(value) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError('must be a non-empty string, not %r' % (value,))
    return value.strip()


def _hypervisor_version(value) -> int:
    if isinstance(value, str):
        try:
            return versionutils.convert_version_to_int(value)
        except Exception:
            raise ValueError('must be a version such as "8.2.0", not %r'
                             % (value,))
    return _integer(value, 0)


def _loopback(value) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    try:
        address = ipaddress.ip_address(value)
    except ValueError:
        raise ValueError('is not an IP address: %r' % (value,))
    if not address.is_loopback:
        raise ValueError('must be a loopback address (127.0.0.0/8 or ::1), '
                         'not %s' % address)
    return address


def _scalar_text(value) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (str, int, float)):
        return str(value)
    if isinstance(value, list) and all(
            isinstance(v, (str, int, float)) for v in value):
        return ','.join(str(v) for v in value)
    raise ValueError('values must be strings, numbers or lists of them, '
                     'not %r' % (value,))


def _flat_strings(value, prefix: str = '') -> dict:
    """Nested dicts flattened with dots, as HostState.cpu_info keeps them."""
    if not isinstance(value, dict):
        raise ValueError('must be an object, not %r' % (value,))
    out = {}
    for key, item in value.items():
        path = '%s%s' % (prefix, key)
        if isinstance(item, dict):
            out.update(_flat_strings(item, path + '.'))
        else:
            out[path] = _scalar_text(item)
    return out


def _metrics(value) -> dict:
    if not isinstance(value, dict):
        raise ValueError('must be an object, not %r' % (value,))
    out = {}
    for key, item in value.items():
        if isinstance(item, bool) or not isinstance(item, (int, float)):
            raise ValueError('metric %r must be a number, not %r'
                             % (key, item))
        out[str(key)] = float(item)
    return out


def _supported_instances(value) -> list:
    if (not isinstance(value, list) or not value or not all(
            isinstance(t, list) and len(t) == 3
            and all(isinstance(x, str) and x for x in t) for t in value)):
        raise ValueError('must be a non-empty list of [architecture, '
                         'hypervisor_type, vm_mode] triples')
    return [list(t) for t in value]


def _names(value) -> list:
    if not isinstance(value, list):
        raise ValueError('must be a list of aggregate names')
    return [_text(v) for v in value]


def _metadata(value) -> dict:
    if not isinstance(value, dict):
        raise ValueError('must be an object of metadata, not %r' % (value,))
    out = {}
    for key, item in value.items():
        if isinstance(item, (dict, list)) or item is None:
            raise ValueError('metadata %r must be a string or a number'
                             % key)
        out[str(key)] = _scalar_text(item)
    return out


#: Every key of a group: converter and default (None: required or unset).
_GROUP_KEYS = {
    'prefix': (_name, None),
    'count': (_count, None),
    'memory_mb': (_size, 65536),
    'local_gb': (_size, 1000),
    'vcpus': (_size, 16),
    'cpu_allocation_ratio': (_ratio, None),
    'ram_allocation_ratio': (_ratio, None),
    'disk_allocation_ratio': (_ratio, None),
    'hypervisor_type': (_text, 'kvm'),
    'hypervisor_version': (_hypervisor_version, 8002000),
    'architecture': (_text, 'x86_64'),
    'host_ip': (_loopback, None),
    'cpu_info': (_flat_strings, None),
    'metrics': (_metrics, None),
    'supported_instances': (_supported_instances, None),
    'availability_zone': (_text, None),
    'aggregates': (_names, None),
}
_REQUIRED = ('prefix', 'count')


def _group_values(group, where: str) -> dict:
    if not isinstance(group, dict):
        raise FleetError('%s: must be an object, not %r' % (where, group))
    values = {}
    for key, raw in group.items():
        if key.startswith('_'):
            continue
        if key not in _GROUP_KEYS:
            raise FleetError('%s: unknown key %r (known: %s)'
                             % (where, key, ', '.join(sorted(_GROUP_KEYS))))
        try:
            values[key] = _GROUP_KEYS[key][0](raw)
        except ValueError as e:
            raise FleetError('%s: %s %s' % (where, key, e))
    for key in _REQUIRED:
        if key not in values:
            raise FleetError('%s: %r is required' % (where, key))
    for key, (_conv, default) in _GROUP_KEYS.items():
        values.setdefault(key, default)
    return values


def _join_zone(metadata: dict, zone: str, where: str) -> None:
    """Make the aggregate named ``zone`` carry that availability zone."""
    current = metadata.setdefault(zone, {})
    existing = current.get(AVAILABILITY_ZONE_KEY)
    if existing not in (None, zone):
        raise FleetError('%s: aggregate %r is declared in zone %r, not %r'
                         % (where, zone, existing, zone))
    current[AVAILABILITY_ZONE_KEY] = zone


class _AddressPool:
    """Hands out loopback addresses, never the same one twice."""

    def __init__(self, start):
        self._next = start
        self._used: set = set()

    def reserve(self, first, count: int, where: str) -> list:
        addresses = []
        for offset in range(count):
            try:
                address = _loopback(first + offset)
            except ValueError as e:
                raise FleetError('%s: host_ip %s + %d %s'
                                 % (where, first, offset, e))
            if address in self._used:
                raise FleetError('%s: host_ip %s is used by another host'
                                 % (where, address))
            self._used.add(address)
            addresses.append(address)
        return addresses

    def take(self, count: int, where: str) -> list:
        addresses = []
        while len(addresses) < count:
            if self._next not in self._used:
                addresses.extend(self.reserve(self._next, 1, where))
            self._next += 1
        return addresses


def parse(data, source: str = 'fleet') -> FleetSpec:
    """A FleetSpec from the decoded JSON of a fleet file.

    Raises ``FleetError`` naming ``source``, the group and the key at
    fault, so that an operator can fix the file without reading code.
    """
    if not isinstance(data, dict):
        raise FleetError('%s: must be a JSON object with "groups"' % source)
    unknown = [k for k in data if not k.startswith('_')
               and k not in ('groups', 'aggregates')]
    if unknown:
        raise FleetError('%s: unknown key(s) %s (known: aggregates, groups)'
                         % (source, ', '.join(map(repr, unknown))))
    groups = data.get('groups')
    if not isinstance(groups, list) or not groups:
        raise FleetError('%s: "groups" must be a non-empty list' % source)
    declared = data.get('aggregates', {})
    if not isinstance(declared, dict):
        raise FleetError('%s: "aggregates" must be an object of name: '
                         'metadata' % source)
    metadata: dict = {}
    for name, meta in declared.items():
        try:
            metadata[_text(name)] = _metadata(meta)
        except ValueError as e:
            raise FleetError('%s: aggregate %r: %s' % (source, name, e))

    parsed = []
    for index, group in enumerate(groups):
        where = '%s: group %d' % (source, index + 1)
        if isinstance(group, dict) and isinstance(group.get('prefix'), str):
            where += ' (%s)' % group['prefix']
        values = _group_values(group, where)
        for name in values['aggregates'] or []:
            if name not in declared:
                raise FleetError('%s: aggregate %r is not declared under '
                                 '"aggregates"' % (where, name))
        if values['availability_zone']:
            _join_zone(metadata, values['availability_zone'], where)
        parsed.append((where, values))

    # Explicit addresses first, so that automatic ones go around them.
    pool = _AddressPool(AUTO_IP_START)
    addresses = {}
    for index, (where, values) in enumerate(parsed):
        if values['host_ip'] is not None:
            addresses[index] = pool.reserve(values['host_ip'],
                                            values['count'], where)
    numbers: dict = {}
    hosts = []
    for index, (where, values) in enumerate(parsed):
        ips = addresses.get(index) or pool.take(values['count'], where)
        aggregates = list(values['aggregates'] or [])
        if values['availability_zone'] and \
                values['availability_zone'] not in aggregates:
            aggregates.append(values['availability_zone'])
        for ip in ips:
            prefix = values['prefix']
            numbers[prefix] = numbers.get(prefix, 0) + 1
            hosts.append(_host_spec('%s-%03d' % (prefix, numbers[prefix]),
                                    values, str(ip), tuple(aggregates)))
    return FleetSpec(hosts=hosts, aggregate_metadata=metadata)


def _host_spec(name: str, values: dict, host_ip: str,
               aggregates: tuple) -> HostSpec:
    arch = values['architecture']
    hv_type = values['hypervisor_type']
    cpu_info = dict(values['cpu_info'] or {})
    cpu_info.setdefault('arch', arch)
    return HostSpec(
        name=name, memory_mb=values['memory_mb'],
        local_gb=values['local_gb'], vcpus=values['vcpus'],
        cpu_allocation_ratio=values['cpu_allocation_ratio'],
        ram_allocation_ratio=values['ram_allocation_ratio'],
        disk_allocation_ratio=values['disk_allocation_ratio'],
        hypervisor_type=hv_type,
        hypervisor_version=values['hypervisor_version'],
        architecture=arch, host_ip=host_ip, cpu_info=cpu_info,
        metrics=dict(values['metrics'] or {}),
        supported_instances=values['supported_instances']
        or [[arch, hv_type.lower(), 'hvm']],
        aggregates=aggregates)


def load(path: str) -> FleetSpec:
    """Read and check a JSON fleet file; ``FleetError`` says what is wrong."""
    try:
        with open(path, encoding='utf-8') as f:
            data = json.load(f)
    except OSError as e:
        raise FleetError('%s: cannot read: %s' % (path, e.strerror or e))
    except json.JSONDecodeError as e:
        raise FleetError('%s: not valid JSON: line %d column %d: %s'
                         % (path, e.lineno, e.colno, e.msg))
    return parse(data, source=path)


def uniform(count: int, prefix: str = 'compute', **group) -> FleetSpec:
    """``count`` identical hosts ``<prefix>-001``...; ``group`` keys as in
    a fleet file (``memory_mb``, ``availability_zone``, ...)."""
    return parse({'groups': [dict(group, prefix=prefix, count=count)]},
                 source='--hosts')
