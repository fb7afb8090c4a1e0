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
         "disk_allocation_ratio": 1.0, "disk_available_least": 300,
         "hypervisor_type": "kvm", "hypervisor_version": "8.2.0",
         "architecture": "x86_64", "host_ip": "127.0.1.1",
         "cpu_info": {"vendor": "Intel", "topology": {"cores": 4}},
         "metrics": {"cpu.percent": 12.5},
         "stats": {"num_os_type_linux": 6},
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
starts.  ``stats`` are the free-form counters a compute reports (nova's
``stats``, which ComputeCapabilitiesFilter and JsonFilter's
``$stats.<key>`` read), as strings.  ``disk_available_least`` (GB, as
nova's compute reports it: what the disk images can really still grow
into) is reported only by groups that set it; it shrinks by each
instance's disk, whatever the allocation ratio.  Keys that begin with ``_`` are
comments and are ignored; any other unknown key is an error.
``SCHEMA`` (JSON Schema, checked with ``jsonschema``) states every rule
a value can be checked by alone; ``parse()`` adds those that relate
values to each other.
"""

import dataclasses
import ipaddress
import json
import re
import uuid

import jsonschema
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
    stats: dict = dataclasses.field(default_factory=dict)
    #: GB of real free disk with no instance; None: not reported.
    disk_available_least: int | None = None

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


# -- the schema: every rule that one value can be checked by on its own --

def _text_schema() -> dict:
    return {'type': 'string', 'pattern': r'\S',
            'description': 'a non-empty string'}


#: What a fleet file may hold.  Keys starting with ``_`` are comments
#: anywhere an object has fixed keys.  Rules that relate two values (a
#: group's aggregates are declared, a zone aggregate is in that zone, no
#: address is used twice) cannot be said in JSON Schema, which has no
#: way for one value to name another's keys: ``parse()`` checks them.
SCHEMA = {
    '$schema': 'https://json-schema.org/draft/2020-12/schema',
    'type': 'object',
    'required': ['groups'],
    'properties': {
        'groups': {'type': 'array', 'minItems': 1,
                   'items': {'$ref': '#/$defs/group'}},
        'aggregates': {
            'type': 'object',
            'propertyNames': _text_schema(),
            'additionalProperties': {'$ref': '#/$defs/metadata'}},
    },
    'patternProperties': {'^_': {}},
    'additionalProperties': False,
    '$defs': {
        'count': {'type': 'integer', 'minimum': 1},
        'size': {'type': 'integer', 'minimum': 0},
        'ratio': {'type': 'number', 'minimum': 0},
        'text': _text_schema(),
        'scalar': {'type': ['string', 'number', 'boolean']},
        'metadata': {'type': 'object',
                     'additionalProperties': {'$ref': '#/$defs/scalar'}},
        'cpu_info': {
            'type': 'object',
            'additionalProperties': {
                'description': 'a string, a number, a boolean, a list of '
                               'strings and numbers or an object of them',
                'anyOf': [
                    {'$ref': '#/$defs/scalar'},
                    {'type': 'array',
                     'items': {'type': ['string', 'number']}},
                    {'$ref': '#/$defs/cpu_info'}]}},
        'group': {
            'type': 'object',
            'required': ['prefix', 'count'],
            'properties': {
                'prefix': {'type': 'string', 'pattern': _NAME_RE.pattern,
                           'description': 'letters, digits, dots and '
                                          'dashes'},
                'count': {'$ref': '#/$defs/count'},
                'memory_mb': {'$ref': '#/$defs/size'},
                'local_gb': {'$ref': '#/$defs/size'},
                'vcpus': {'$ref': '#/$defs/size'},
                'cpu_allocation_ratio': {'$ref': '#/$defs/ratio'},
                'ram_allocation_ratio': {'$ref': '#/$defs/ratio'},
                'disk_allocation_ratio': {'$ref': '#/$defs/ratio'},
                'disk_available_least': {'$ref': '#/$defs/size'},
                'hypervisor_type': {'$ref': '#/$defs/text'},
                'hypervisor_version': {'type': ['integer', 'string'],
                                       'minimum': 0,
                                       'format': 'hypervisor-version'},
                'architecture': {'$ref': '#/$defs/text'},
                'host_ip': {'type': 'string', 'format': 'loopback-address'},
                'cpu_info': {'$ref': '#/$defs/cpu_info'},
                'metrics': {'type': 'object',
                            'additionalProperties': {'type': 'number'}},
                'stats': {'$ref': '#/$defs/metadata'},
                'supported_instances': {
                    'type': 'array', 'minItems': 1,
                    'description': 'a non-empty list of [architecture, '
                                   'hypervisor_type, vm_mode] triples',
                    'items': {'type': 'array', 'minItems': 3,
                              'maxItems': 3,
                              'items': {'type': 'string', 'minLength': 1}}},
                'availability_zone': {'$ref': '#/$defs/text'},
                'aggregates': {'type': 'array',
                               'items': {'$ref': '#/$defs/text'}},
            },
            'patternProperties': {'^_': {}},
            'additionalProperties': False,
        },
    },
}

#: Defaults of the group keys the schema leaves optional.
_GROUP_DEFAULTS = {
    'memory_mb': 65536,
    'local_gb': 1000,
    'vcpus': 16,
    'hypervisor_type': 'kvm',
    'hypervisor_version': 8002000,
    'architecture': 'x86_64',
}

_FORMATS = jsonschema.FormatChecker(formats=())


@_FORMATS.checks('loopback-address', raises=ValueError)
def _loopback(value) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """The address ``value``; ValueError unless it is a loopback one."""
    try:
        address = ipaddress.ip_address(value)
    except ValueError:
        raise ValueError('is not an IP address')
    if not address.is_loopback:
        raise ValueError('must be a loopback address (127.0.0.0/8 or ::1)')
    return address


@_FORMATS.checks('hypervisor-version', raises=ValueError)
def _hypervisor_version(value) -> int:
    """``value`` as nova's integer version; "8.2.0" is 8002000."""
    if isinstance(value, str):
        try:
            return versionutils.convert_version_to_int(value)
        except Exception:
            raise ValueError('must be a version such as "8.2.0"')
    return value


_VALIDATOR = jsonschema.Draft202012Validator(SCHEMA,
                                             format_checker=_FORMATS)


def _where(source: str, data, path) -> str:
    """``source: groups[1].vcpus (group 'ops')``: where a value is."""
    text = ''
    for part in path:
        text += '[%d]' % part if isinstance(part, int) else (
            '.%s' % part if text else str(part))
    if (len(path) >= 2 and path[0] == 'groups'
            and isinstance(path[1], int)):
        group = data['groups'][path[1]]
        if isinstance(group, dict) and isinstance(group.get('prefix'), str):
            text += ' (group %r)' % group['prefix']
    return '%s: %s' % (source, text or 'top level')


def _rule(error: jsonschema.ValidationError) -> str:
    """The broken rule in words, for the errors whose stock text is not."""
    if error.validator == 'format' and error.cause is not None:
        return '%r %s' % (error.instance, error.cause)
    if error.validator == 'additionalProperties' and \
            isinstance(error.instance, dict):
        known = error.schema.get('properties', {})
        unknown = [k for k in error.instance
                   if k not in known and not k.startswith('_')]
        if known and unknown:
            return ('unknown key(s) %s (known: %s; keys starting with _ '
                    'are comments)' % (', '.join(map(repr, unknown)),
                                       ', '.join(sorted(known))))
    if error.validator in ('pattern', 'minItems', 'anyOf') and \
            'description' in error.schema:
        return '%r must be %s' % (error.instance,
                                  error.schema['description'])
    return error.message


def validate(data, source: str = 'fleet') -> None:
    """Raise ``FleetError`` if ``data`` breaks a rule of ``SCHEMA``.

    The message is one line: ``source``, the path of the value at fault
    in the document and the rule it breaks.
    """
    error = jsonschema.exceptions.best_match(_VALIDATOR.iter_errors(data))
    if error is not None:
        raise FleetError('%s: %s' % (_where(source, data,
                                            list(error.absolute_path)),
                                     _rule(error)))


def _flat_strings(value: dict, prefix: str = '') -> dict:
    """Nested dicts flattened with dots, as HostState.cpu_info keeps them."""
    out = {}
    for key, item in value.items():
        path = '%s%s' % (prefix, key)
        if isinstance(item, dict):
            out.update(_flat_strings(item, path + '.'))
        else:
            out[path] = _scalar_text(item)
    return out


def _scalar_text(value) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return ','.join(str(v) for v in value)
    return str(value)


#: How each group value the schema accepted becomes the one a host gets.
_CONVERT = {
    'count': int, 'memory_mb': int, 'local_gb': int, 'vcpus': int,
    'disk_available_least': int, 'cpu_allocation_ratio': float,
    'ram_allocation_ratio': float, 'disk_allocation_ratio': float,
    'hypervisor_type': str.strip, 'architecture': str.strip,
    'availability_zone': str.strip,
    'hypervisor_version': _hypervisor_version, 'host_ip': _loopback,
    'cpu_info': _flat_strings,
    'metrics': lambda value: {str(k): float(v) for k, v in value.items()},
    'stats': lambda value: {str(k): _scalar_text(v)
                            for k, v in value.items()},
    'aggregates': lambda names: [name.strip() for name in names],
}


def _group_values(group: dict) -> dict:
    """A valid group's values, converted, with the defaults filled in."""
    values = {key: None for key in SCHEMA['$defs']['group']['properties']}
    values.update(_GROUP_DEFAULTS)
    values.update((k, v) for k, v in group.items() if not k.startswith('_'))
    for key, convert in _CONVERT.items():
        if values[key] is not None:
            values[key] = convert(values[key])
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
                raise FleetError('%s: %s + %d = %s %s'
                                 % (where, first, offset,
                                    ipaddress.ip_address(int(first) + offset),
                                    e))
            if address in self._used:
                raise FleetError('%s: %s is used by another host'
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

    Raises ``FleetError`` naming ``source``, the path in the document
    and the rule at fault, so that an operator can fix the file without
    reading code.
    """
    validate(data, source)
    metadata = {name.strip(): {str(k): _scalar_text(v)
                               for k, v in meta.items()}
                for name, meta in data.get('aggregates', {}).items()}
    declared = set(metadata)
    parsed = []
    for index, group in enumerate(data['groups']):
        values = _group_values(group)
        for position, name in enumerate(values['aggregates'] or []):
            if name not in declared:
                raise FleetError(
                    '%s: aggregate %r is not declared under "aggregates"'
                    % (_where(source, data, ['groups', index, 'aggregates',
                                             position]), name))
        if values['availability_zone']:
            _join_zone(metadata, values['availability_zone'],
                       _where(source, data,
                              ['groups', index, 'availability_zone']))
        parsed.append(values)

    # Explicit addresses first, so that automatic ones go around them.
    pool = _AddressPool(AUTO_IP_START)
    addresses = {}
    for index, values in enumerate(parsed):
        if values['host_ip'] is not None:
            addresses[index] = pool.reserve(
                values['host_ip'], values['count'],
                _where(source, data, ['groups', index, 'host_ip']))
    numbers: dict = {}
    hosts = []
    for index, values in enumerate(parsed):
        ips = addresses.get(index) or pool.take(
            values['count'], _where(source, data, ['groups', index, 'count']))
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
        aggregates=aggregates, stats=dict(values['stats'] or {}),
        disk_available_least=values['disk_available_least'])


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
