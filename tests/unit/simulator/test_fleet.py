"""The fleet description: N identical hosts, or a JSON fleet file."""

import ipaddress
import json
import pathlib

import jsonschema
import pytest

from scheduler.simulator import fleet

EXAMPLE = (pathlib.Path(__file__).parents[3] / 'etc' / 'scheduler'
           / 'fleet.example.json')


def _group(**values) -> dict:
    return dict({'prefix': 'doc', 'count': 2}, **values)


def _parse(*groups, aggregates=None) -> fleet.FleetSpec:
    data = {'groups': list(groups)}
    if aggregates is not None:
        data['aggregates'] = aggregates
    return fleet.parse(data, source='test')


class TestUniform:

    def test_names_sizes_and_loopback_addresses(self):
        spec = fleet.uniform(3)
        assert [h.name for h in spec.hosts] == [
            'compute-001', 'compute-002', 'compute-003']
        assert {h.memory_mb for h in spec.hosts} == {65536}
        addresses = [ipaddress.ip_address(h.host_ip) for h in spec.hosts]
        assert all(a.is_loopback for a in addresses)
        assert len(set(addresses)) == 3
        assert spec.aggregates() == []

    def test_uuid_is_stable_per_name(self):
        first = fleet.uniform(2, prefix='dev').hosts[1]
        again = fleet.uniform(5, prefix='dev', memory_mb=1024).hosts[1]
        other = fleet.uniform(2, prefix='doc').hosts[1]
        assert first.uuid == again.uuid == fleet.host_uuid('dev-002')
        assert first.uuid != other.uuid

    def test_zone_becomes_an_aggregate(self):
        spec = fleet.uniform(2, prefix='ops', availability_zone='az9')
        [agg] = spec.aggregates()
        assert agg.name == 'az9'
        assert agg.metadata == {'availability_zone': 'az9'}
        assert agg.hosts == ['ops-001', 'ops-002']
        assert agg.uuid == fleet.aggregate_uuid('az9')
        assert spec.availability_zone('ops-002') == 'az9'

    def test_count_must_be_positive(self):
        with pytest.raises(fleet.FleetError,
                           match='count .*less than the minimum of 1'):
            fleet.uniform(0)


class TestFleetFile:

    def test_example_file(self):
        spec = fleet.load(str(EXAMPLE))
        names = [h.name for h in spec.hosts]
        assert len(names) == len(set(names)) == 18
        assert {n.split('-')[0] for n in names} == {'doc', 'ops', 'dev',
                                                    'arm'}
        ops = spec.host('ops-001')
        assert ops.cpu_allocation_ratio == 2.0
        assert ops.hypervisor_version == 8002000
        assert ops.host_ip == '127.0.10.1'
        assert spec.host('ops-004').host_ip == '127.0.10.4'
        assert ops.cpu_info['topology.cores'] == '4'
        assert ops.cpu_info['features'] == 'avx2,avx512f,vmx'
        assert ops.cpu_info['arch'] == 'x86_64'
        assert ops.metrics == {'cpu.percent': 20.0}
        assert ops.stats == {'num_os_type_linux': '4', 'io_workload': '0'}
        assert spec.host('doc-001').stats == {}
        assert spec.host('arm-001').supported_instances == [
            ['aarch64', 'kvm', 'hvm']]
        aggregates = {a.name: a for a in spec.aggregates()}
        assert set(aggregates) == {'az1', 'az2', 'ssd', 'overcommit'}
        assert aggregates['ssd'].hosts == ['ops-001', 'ops-002', 'ops-003',
                                           'ops-004']
        assert 'doc-001' in aggregates['az1'].hosts
        assert spec.availability_zone('arm-002') == 'az2'
        all_ips = [ipaddress.ip_address(h.host_ip) for h in spec.hosts]
        assert all(ip.is_loopback for ip in all_ips)
        assert len(set(all_ips)) == len(all_ips)

    def test_defaults(self):
        [host, _] = _parse(_group(hypervisor_type='QEMU')).hosts
        assert (host.memory_mb, host.local_gb, host.vcpus) == (65536, 1000,
                                                               16)
        assert host.cpu_allocation_ratio is None
        assert host.supported_instances == [['x86_64', 'qemu', 'hvm']]
        assert host.cpu_info == {'arch': 'x86_64'}
        assert host.aggregates == ()

    def test_numbering_goes_on_across_groups_of_a_prefix(self):
        spec = _parse(_group(availability_zone='az1'),
                      _group(count=1, availability_zone='az2'),
                      _group(prefix='dev', count=1))
        assert [h.name for h in spec.hosts] == ['doc-001', 'doc-002',
                                                'doc-003', 'dev-001']
        assert spec.availability_zone('doc-003') == 'az2'
        assert spec.availability_zone('dev-001') is None

    def test_automatic_addresses_avoid_explicit_ones(self):
        spec = _parse(_group(count=2), _group(prefix='ops', count=1,
                                              host_ip='127.1.0.1'))
        assert spec.host('ops-001').host_ip == '127.1.0.1'
        assert [spec.host(n).host_ip for n in ('doc-001', 'doc-002')] == [
            '127.1.0.2', '127.1.0.3']

    def test_declared_zone_aggregate_and_comments(self):
        spec = _parse(_group(_comment='ignored', availability_zone='az1',
                             aggregates=['az1']),
                      aggregates={'az1': {'availability_zone': 'az1',
                                          'ratio': 2}})
        [agg] = spec.aggregates()
        assert agg.metadata == {'availability_zone': 'az1', 'ratio': '2'}
        assert spec.hosts[0].aggregates == ('az1',)

    def test_disk_available_least_is_optional_per_group(self):
        spec = _parse(_group(count=1, local_gb=500, disk_available_least=120),
                      _group(prefix='ops', count=1))
        assert spec.host('doc-001').disk_available_least == 120
        assert spec.host('ops-001').disk_available_least is None

    def test_empty_aggregate_is_kept(self):
        spec = _parse(_group(), aggregates={'spare': {}})
        [agg] = spec.aggregates()
        assert (agg.name, agg.hosts) == ('spare', [])


#: The first group's path in error messages, as a regular expression.
_G0 = 'groups\\[0\\]'


@pytest.mark.parametrize('data, message', [
    ([], "top level: \\[\\] is not of type 'object'"),
    ({}, "top level: 'groups' is a required property"),
    ({'groups': []}, 'groups: \\[\\] should be non-empty'),
    ({'groups': [_group()], 'hosts': 3},
     "top level: unknown key\\(s\\) 'hosts' \\(known: aggregates, groups;"),
    ({'groups': [_group()], 'aggregates': []},
     "aggregates: \\[\\] is not of type 'object'"),
    ({'groups': [_group()], 'aggregates': {'x': {'k': [1]}}},
     "aggregates.x.k: \\[1\\] is not of type"),
    ({'groups': [_group()], 'aggregates': {' ': {}}},
     "aggregates: ' ' must be a non-empty string"),
    ({'groups': ['doc']}, "groups\\[0\\]: 'doc' is not of type 'object'"),
    ({'groups': [{'count': 1}]},
     "groups\\[0\\]: 'prefix' is a required property"),
    ({'groups': [_group(), {'prefix': 'ops'}]},
     "groups\\[1\\] \\(group 'ops'\\): 'count' is a required property"),
    ({'groups': [_group(memroy_mb=1)]},
     "groups\\[0\\] \\(group 'doc'\\): unknown key\\(s\\) 'memroy_mb' "
     "\\(known: aggregates, architecture,"),
    ({'groups': [_group(count=True)]},
     _G0 + ".count .*True is not of type 'integer'"),
    ({'groups': [_group(count=1.5)]},
     _G0 + ".count .*1.5 is not of type 'integer'"),
    ({'groups': [_group(count=0)]},
     _G0 + '.count .*0 is less than the minimum of 1'),
    ({'groups': [_group(memory_mb=-1)]},
     _G0 + '.memory_mb .*-1 is less than the minimum of 0'),
    ({'groups': [_group(disk_available_least=-5)]},
     _G0 + '.disk_available_least .*-5 is less than the minimum of 0'),
    ({'groups': [_group(prefix='doc_1')]},
     _G0 + ".prefix .*'doc_1' must be letters, digits"),
    ({'groups': [_group(hypervisor_type=' ')]},
     _G0 + ".hypervisor_type .*' ' must be a non-empty string"),
    ({'groups': [_group(cpu_allocation_ratio='4')]},
     _G0 + ".cpu_allocation_ratio .*'4' is not of type 'number'"),
    ({'groups': [_group(host_ip='192.0.2.1')]},
     _G0 + ".host_ip .*'192.0.2.1' must be a loopback address"),
    ({'groups': [_group(host_ip='localhost')]},
     _G0 + ".host_ip .*'localhost' is not an IP address"),
    ({'groups': [_group(host_ip='127.255.255.255')]},
     _G0 + '.host_ip .*127.255.255.255 \\+ 1 = 128.0.0.0 must be a loopback'),
    ({'groups': [_group(host_ip='127.0.0.5'),
                 _group(prefix='ops', host_ip='127.0.0.6')]},
     "groups\\[1\\].host_ip \\(group 'ops'\\): 127.0.0.6 is used by "
     "another host"),
    ({'groups': [_group(hypervisor_version='eight')]},
     _G0 + ".hypervisor_version .*'eight' must be a version"),
    ({'groups': [_group(metrics={'load': 'high'})]},
     _G0 + ".metrics.load .*'high' is not of type 'number'"),
    ({'groups': [_group(cpu_info=['x86'])]},
     _G0 + ".cpu_info .*is not of type 'object'"),
    ({'groups': [_group(cpu_info={'a': {'b': None}})]},
     _G0 + '.cpu_info.a.b .*None must be a string, a number'),
    ({'groups': [_group(supported_instances=[])]},
     _G0 + '.supported_instances .*must be a non-empty list of '
     '\\[architecture'),
    ({'groups': [_group(supported_instances=[['x86_64', 'kvm']])]},
     _G0 + '.supported_instances\\[0\\] .*is too short'),
    ({'groups': [_group(aggregates=['ssd'])]},
     _G0 + ".aggregates\\[0\\] .*aggregate 'ssd' is not declared"),
    ({'groups': [_group(availability_zone='az1')],
      'aggregates': {'az1': {'availability_zone': 'az9'}}},
     _G0 + ".availability_zone .*aggregate 'az1' is declared in zone 'az9'"),
])
def test_bad_fleet_is_refused_with_a_reason(data, message):
    with pytest.raises(fleet.FleetError, match='^test: ' + message) as info:
        fleet.parse(data, source='test')
    assert '\n' not in str(info.value)


def test_schema_is_a_valid_json_schema():
    jsonschema.Draft202012Validator.check_schema(fleet.SCHEMA)


def test_whole_numbers_written_as_floats_are_integers():
    [host] = _parse(_group(count=1.0, vcpus=8.0)).hosts
    assert isinstance(host.vcpus, int) and host.vcpus == 8


def test_error_names_the_path_in_the_document(tmp_path):
    path = tmp_path / 'fleet.json'
    path.write_text(json.dumps({'groups': [_group(), _group(
        prefix='ops', vcpus='many')]}))
    with pytest.raises(fleet.FleetError) as info:
        fleet.load(str(path))
    assert str(info.value) == (
        "%s: groups[1].vcpus (group 'ops'): 'many' is not of type "
        "'integer'" % path)


def test_not_json(tmp_path):
    path = tmp_path / 'fleet.json'
    path.write_text('{"groups": [\n  {"prefix": "doc",}\n]}')
    with pytest.raises(fleet.FleetError, match='not valid JSON: line 2'):
        fleet.load(str(path))


def test_missing_file(tmp_path):
    with pytest.raises(fleet.FleetError, match='cannot read'):
        fleet.load(str(tmp_path / 'nope.json'))
