"""The versioned objects: what goes on the wire, and what old peers get.

Read top to bottom:

1. fingerprints: a change to an object's fields without a version bump
   fails here, with the steps to follow;
2. backports: every object can be sent to a peer that knows an older
   version, dropping exactly the fields that version lacks;
3. serializer round trips and the typed errors for unreadable input;
4. RequestSpec and the legacy dicts of the seed's drivers;
5. HostState: derived values, claims and allocation ratios.
"""

import json

import fixtures as fixtures_lib
from oslo_serialization import jsonutils
from oslo_utils import timeutils
from oslo_versionedobjects import base as ovo_base
from oslo_versionedobjects import fixture as ovo_fixture
import pytest

from scheduler import exception
from scheduler import objects
from scheduler.objects import base
from scheduler.objects import fields
from scheduler.resources import compute
from tests.unit import fixtures

# --- 1. fingerprints ---------------------------------------------------------

#: '<VERSION>-<md5 of fields and remotable methods>' of every object.
#: Regenerate a line with
#:   ObjectVersionChecker(SchedulerObjectRegistry.obj_classes()).get_hashes()
#: only AFTER bumping the object's VERSION (see the failure message).
EXPECTED_FINGERPRINTS = {
    'Aggregate': '1.0-e4654a6c9175850bc24850e065e8c6c6',
    'Destination': '1.1-2fabf253e1b765140d7bf5220f24d28d',
    'Flavor': '1.0-9dcebdfe8f8a8ddf87eae9b9b066636e',
    'HostState': '1.2-dde304f7bb2b93f11af4cade4db324d5',
    'ImageMeta': '1.0-b7433f00028b9bfe26824346c0a3c189',
    'InstanceGroup': '1.0-104b75695db99d6706524a5845387f96',
    'InstanceNUMACell': '1.0-8cae6d80837793f7a81576355a1dd6b9',
    'InstanceNUMATopology': '1.0-c63fad38be73b6afd04715c9c1b29220',
    'InstancePCIRequest': '1.0-b10c900bb0b5fac880658e003f8c8322',
    'NUMACell': '1.0-e40fe412fdbec7b34f22304b4c51d2c0',
    'NUMATopology': '1.0-c63fad38be73b6afd04715c9c1b29220',
    'PciDevicePool': '1.0-63303942d95014d8a63ed884516e63fb',
    'RequestSpec': '1.1-aac7e2de2172a5efee9310846e3154e8',
    'SchedulerLimits': '1.0-0823f4f7e20de75a6eb695f621a0bc7a',
    'SchedulerRetry': '1.0-42b6d1f650df5058c2b105e630022b56',
    'Selection': '1.1-e6781680273ffc2fb1aa1c105a25d137',
    # Notification payloads (scheduler.objects.notification).
    'ClaimExpiredPayload': '1.0-76114c1a8620bd2919cd8354e561c9d2',
    'ExceptionPayload': '1.0-b671c35957aa473f8326d01d1c147500',
    'RequestSpecPayload': '1.0-d4c42df17396dad1987199bd30edeed8',
    'SelectDestinationsPayload': '1.0-1d5959d26b7796274ceb1b9e986c8e34',
}

#: Fields each version bump added: what a backport must drop.
ADDED_IN = {
    ('RequestSpec', '1.1'): ('is_bfv',),
    ('HostState', '1.1'): ('failed_builds',),
    ('HostState', '1.2'): ('stats', 'forced_down', 'disk_available_least',
                           'cell_uuid', 'instance_image_properties'),
    ('Selection', '1.1'): ('weight',),
    ('Destination', '1.1'): ('cell', 'allow_cross_cell_move'),
}


def _registry():
    return base.SchedulerObjectRegistry.obj_classes()


def _checker():
    return ovo_fixture.ObjectVersionChecker(_registry())


def test_object_fingerprints_match_their_versions():
    expected, actual = _checker().test_hashes(EXPECTED_FINGERPRINTS)
    new = sorted(name for name in actual if expected.get(name) is None)
    assert not new, (
        'New object(s) %s: add their fingerprints %s to '
        'EXPECTED_FINGERPRINTS and a populated instance to _samples() in '
        'this file.' % (new, {n: actual[n] for n in new}))
    assert expected == actual, (
        'The fields (or remotable methods) of %s changed without a version '
        'bump.  Peers running the old code would misread these objects. '
        'For each object listed: bump VERSION (1.1 -> 1.2 for a new '
        'field), add a line to its version history comment, add to its '
        'obj_make_compatible() a step that drops the new field for older '
        'targets (and a line to ADDED_IN in this file), then paste the new '
        'fingerprint into EXPECTED_FINGERPRINTS.\n'
        'expected: %s\nactual:   %s' % (sorted(actual), expected, actual))


#: Every registered object: the tests below run for each of them.
ALL_OBJECTS = sorted(base.SchedulerObjectRegistry.obj_classes())


def test_every_object_is_a_scheduler_object_in_the_manifest():
    manifest = base.obj_manifest()
    assert set(manifest) == set(ALL_OBJECTS)
    for name, classes in _registry().items():
        assert issubclass(classes[0], base.SchedulerObject), name
        assert manifest[name] == classes[0].VERSION
        # Importing scheduler.objects exposes every object by name.
        assert getattr(objects, name) is classes[0]


def test_first_object_api_manifest_is_older_than_ours():
    # rpcapi backports to this manifest for 1.1 servers: it names objects
    # this code has, at versions no newer than ours.
    registry = _registry()
    for name, version in base.MANIFEST_AT_RPC_1_1.items():
        ours = registry[name][0].VERSION
        assert tuple(map(int, version.split('.'))) <= \
            tuple(map(int, ours.split('.'))), name
    for name in ('RequestSpec', 'HostState', 'Selection', 'Aggregate'):
        assert name in base.MANIFEST_AT_RPC_1_1


# --- 2. backports ------------------------------------------------------------

def _limits():
    return objects.SchedulerLimits(memory_mb=6144, disk_gb=200, vcpu=32,
                                   numa_topology=None)


def _samples() -> dict:
    """A fully populated instance of every object, by name."""
    numa_cell = objects.NUMACell(id=0, cpuset={0, 1}, memory=2048,
                                 cpu_usage=1, memory_usage=512)
    inst_cell = objects.InstanceNUMACell(id=0, cpuset={0}, memory=512)
    pool = objects.PciDevicePool(vendor_id='8086', product_id='1520',
                                 numa_node=0, tags={'physnet': 'net1'},
                                 count=4)
    pci_req = objects.InstancePCIRequest(
        count=1, spec=[{'vendor_id': '8086', 'product_id': None}],
        alias_name='nic')
    group = objects.InstanceGroup(uuid=fixtures.uuid(900), name='g',
                                  policy='anti-affinity',
                                  rules={'max_server_per_host': '1'},
                                  members=[fixtures.uuid(1)],
                                  hosts=['h1'])
    spec = fixtures.request(
        memory_mb=1024, vcpus=2, root_gb=10, swap=512,
        extra_specs={'capabilities:hypervisor_type': 's== QEMU'},
        image_properties={'hw_architecture': 'x86_64'},
        instance_uuid=fixtures.uuid(1), project_id='p', user_id='u',
        numa_topology=objects.InstanceNUMATopology(cells=[inst_cell]),
        pci_requests=[pci_req], availability_zone='az1',
        scheduler_hints={'group': ['g']}, ignore_hosts=['h9'],
        force_hosts=None, force_nodes=None,
        requested_destination=objects.Destination(
            host='h1', node=None, aggregates=None, cell='cell1',
            allow_cross_cell_move=True),
        retry=objects.SchedulerRetry(num_attempts=1, hosts=[['h2', 'n2']]),
        instance_group=group, limits=_limits(), is_bfv=True)
    state = fixtures.report(
        'h1', uuid=fixtures.uuid(500), memory_mb_used=512,
        hypervisor_type='QEMU', hypervisor_version=6002000,
        host_ip='10.1.0.5', cpu_info={'arch': 'x86_64'},
        supported_instances=[['x86_64', 'qemu', 'hvm']],
        instance_uuids=[fixtures.uuid(2)], metrics={'cpu.percent': 0.5},
        pci_pools=[pool],
        numa_topology=objects.NUMATopology(cells=[numa_cell]),
        failed_builds=2, stats={'num_os_type_windows': '3'},
        forced_down=True, disk_available_least=40, cell_uuid='cell1',
        instance_image_properties={'os_distro=ubuntu': 2},
        # The wire format keeps whole seconds.
        updated_at=timeutils.utcnow(with_timezone=True).replace(microsecond=0))
    spec_payload = objects.RequestSpecPayload.from_spec(spec)
    return {
        'RequestSpecPayload': spec_payload,
        'SelectDestinationsPayload': objects.SelectDestinationsPayload(
            request_spec=spec_payload, destinations=[['h1', 'h1']],
            driver='FilterScheduler'),
        'ClaimExpiredPayload': objects.ClaimExpiredPayload(
            instance_uuid=fixtures.uuid(3), host='h1', nodename='h1',
            claimed_at=1.5, project_id='p', user_id='u'),
        'ExceptionPayload': objects.ExceptionPayload(
            request_spec=spec_payload, exception='NoValidHost',
            exception_message='No valid host was found.',
            driver='FilterScheduler'),
        'Aggregate': objects.Aggregate(id=1, uuid=fixtures.uuid(700),
                                       name='Trove', hosts=['h1'],
                                       metadata={'k': 'v'}),
        'Destination': spec.requested_destination,
        'Flavor': spec.flavor,
        'HostState': state,
        'ImageMeta': spec.image,
        'InstanceGroup': group,
        'InstanceNUMACell': inst_cell,
        'InstanceNUMATopology': spec.numa_topology,
        'InstancePCIRequest': pci_req,
        'NUMACell': numa_cell,
        'NUMATopology': state.numa_topology,
        'PciDevicePool': pool,
        'RequestSpec': spec,
        'SchedulerLimits': spec.limits,
        'SchedulerRetry': spec.retry,
        'Selection': objects.Selection(
            service_host='h1', nodename='h1',
            compute_node_uuid=fixtures.uuid(500),
            instance_uuid=fixtures.uuid(1), limits=_limits(),
            availability_zone='az1', weight=1.5),
    }


def test_samples_cover_every_object():
    # A new object needs a sample above, so that its backports are tested.
    assert set(_samples()) == set(ALL_OBJECTS)


def _older_versions(cls) -> list:
    major, minor = cls.VERSION.split('.')
    return ['%s.%d' % (major, n) for n in range(int(minor))]


def test_oslo_compatibility_routines_run_for_every_version():
    # oslo's own check on empty objects, with and without manifests.
    _checker().test_compatibility_routines(use_manifest=True)
    _checker().test_compatibility_routines(use_manifest=False)
    _checker().test_relationships_in_order()


@pytest.mark.parametrize('name', ALL_OBJECTS)
def test_every_older_version_can_be_sent_and_read_back(name):
    obj = _samples()[name]
    for version in _older_versions(type(obj)):
        manifest = ovo_base.obj_tree_get_versions(name)
        manifest[name] = version
        primitive = base.obj_to_primitive_for(obj, manifest)
        assert primitive['versioned_object.version'] == version
        data = primitive['versioned_object.data']
        dropped = {field for (objname, added), names in ADDED_IN.items()
                   if objname == name and added > version
                   for field in names}
        assert dropped, 'ADDED_IN lacks what %s %s drops' % (name, version)
        assert not dropped & set(data)
        # What is left is what the old peer reads: everything else.
        assert set(obj.obj_to_primitive()['versioned_object.data']) - \
            set(data) == dropped
        back = base.SchedulerObjectSerializer().deserialize_entity(
            None, jsonutils.loads(jsonutils.dumps(primitive)))
        assert isinstance(back, type(obj))
        for field in dropped:
            assert not back.obj_attr_is_set(field)


def test_request_spec_1_0_has_no_is_bfv():
    spec = _samples()['RequestSpec']
    prim = base.obj_to_primitive_for(spec, {'RequestSpec': '1.0'})
    assert prim['versioned_object.version'] == '1.0'
    assert 'is_bfv' not in prim['versioned_object.data']
    # An old peer reading it sees the default: the root disk is local.
    old = objects.RequestSpec.obj_from_primitive(prim)
    assert old.is_bfv is False


def test_host_state_1_0_has_no_failed_builds():
    state = _samples()['HostState']
    prim = base.obj_to_primitive_for(state, {'HostState': '1.0'})
    assert 'failed_builds' not in prim['versioned_object.data']
    assert objects.HostState.obj_from_primitive(prim).failed_builds == 0


def test_selection_1_0_has_no_weight():
    sel = _samples()['Selection']
    prim = base.obj_to_primitive_for(sel, {'Selection': '1.0'})
    assert 'weight' not in prim['versioned_object.data']
    assert prim['versioned_object.data']['service_host'] == 'h1'


def test_no_manifest_sends_the_newest_versions():
    spec = _samples()['RequestSpec']
    prim = base.obj_to_primitive_for(spec, None)
    assert prim['versioned_object.version'] == objects.RequestSpec.VERSION
    assert prim['versioned_object.data']['is_bfv'] is True


def test_nested_objects_get_the_versions_the_manifest_names():
    spec = _samples()['RequestSpec']
    prim = base.obj_to_primitive_for(spec, base.MANIFEST_AT_RPC_1_1)
    data = prim['versioned_object.data']
    assert prim['versioned_object.version'] == '1.0'
    for field in ('flavor', 'image', 'limits', 'retry', 'instance_group',
                  'requested_destination', 'numa_topology'):
        nested = data[field]
        assert nested['versioned_object.version'] == \
            base.MANIFEST_AT_RPC_1_1[nested['versioned_object.name']]


class _Batch(base.SchedulerObject):
    """A test-only container of newer objects (never registered for real)."""

    VERSION = '1.0'
    fields = {
        'report': fields.ObjectField('HostState'),
        'choices': fields.ListOfObjectsField('Selection'),
    }


@pytest.fixture
def batch_registered():
    registry = ovo_fixture.VersionedObjectRegistryFixture()
    registry.setUp()
    registry.register(_Batch)
    yield
    registry.cleanUp()


def test_nested_objects_are_backported_by_the_manifest(batch_registered):
    samples = _samples()
    batch = _Batch(report=samples['HostState'],
                   choices=[samples['Selection'], samples['Selection']])
    manifest = {'_Batch': '1.0', 'HostState': '1.0', 'Selection': '1.0',
                'SchedulerLimits': '1.0', 'NUMATopology': '1.0'}
    prim = base.obj_to_primitive_for(batch, manifest)
    data = prim['versioned_object.data']
    report = data['report']
    assert report['versioned_object.version'] == '1.0'
    assert 'failed_builds' not in report['versioned_object.data']
    for choice in data['choices']:
        assert choice['versioned_object.version'] == '1.0'
        assert 'weight' not in choice['versioned_object.data']
    # A peer that knows the newest versions keeps everything.
    full = base.obj_to_primitive_for(batch, None)['versioned_object.data']
    assert 'failed_builds' in full['report']['versioned_object.data']


# --- 3. serializer round trips and typed errors ------------------------------

def _oslo_primitive(obj) -> dict:
    """What oslo.versionedobjects' own obj_to_primitive makes of ``obj``."""
    prim = ovo_base.VersionedObject.obj_to_primitive(obj)
    _changes_as_sets(prim)
    return prim


def _changes_as_sets(prim):
    # A set's order, in oslo's primitive and in ours.
    if isinstance(prim, dict):
        if 'versioned_object.changes' in prim:
            prim['versioned_object.changes'] = set(
                prim['versioned_object.changes'])
        for value in prim.values():
            _changes_as_sets(value)
    elif isinstance(prim, list):
        for value in prim:
            _changes_as_sets(value)
    return prim


def objects_by_name() -> dict:
    return {name: classes[0] for name, classes in _registry().items()}


@pytest.mark.parametrize('name', ALL_OBJECTS)
def test_own_version_primitive_is_oslos(name):
    # obj_to_primitive is a quicker copy of oslo's: same primitive,
    # same changes, whatever was changed.
    obj = _samples()[name]
    for step in ('new', 'reset', 'nested change'):
        if step == 'reset':
            obj.obj_reset_changes(recursive=True)
        elif step == 'nested change':
            nested = [f for f in obj.fields if isinstance(
                getattr(obj, f) if obj.obj_attr_is_set(f) else None,
                base.SchedulerObject)]
            for field in nested:
                child = getattr(obj, field)
                child.obj_reset_changes(recursive=True)
                name = next(f for f in child.fields
                            if child.obj_attr_is_set(f))
                setattr(child, name, getattr(child, name))
            assert obj.obj_what_changed() == set(nested)
        assert _changes_as_sets(obj.obj_to_primitive()) == \
            _oslo_primitive(obj), step
        assert _changes_as_sets(obj.obj_to_primitive(
            target_version=obj.VERSION)) == _oslo_primitive(obj), step


def test_a_newer_target_version_is_still_refused():
    sel = _samples()['Selection']
    with pytest.raises(ovo_base.exception.InvalidTargetVersion):
        sel.obj_to_primitive(target_version='9.0')


def test_the_manifest_is_made_again_when_the_registry_changes(
        batch_registered, monkeypatch):
    # Our registry's hook names the probes on scheduler.objects: undone.
    monkeypatch.setattr(objects, 'ManifestProbe', None, raising=False)
    before = base.obj_manifest()
    assert before == {name: classes[0].VERSION
                      for name, classes in _registry().items()
                      if issubclass(classes[0], base.SchedulerObject)}
    # Each caller gets its own dict.
    before['Selection'] = '0.1'
    assert base.obj_manifest()['Selection'] == objects.Selection.VERSION

    @base.SchedulerObjectRegistry.register
    class ManifestProbe(base.SchedulerObject):
        VERSION = '1.3'
        fields = {}

    assert base.obj_manifest()['ManifestProbe'] == '1.3'

    @base.SchedulerObjectRegistry.register
    class ManifestProbe(base.SchedulerObject):  # noqa: F811
        VERSION = '1.4'
        fields = {}

    assert base.obj_manifest()['ManifestProbe'] == '1.4'
    # Registered with oslo's registry (the fixture's way): seen too.
    ovo_fixture.VersionedObjectRegistryFixture.register(
        type('OtherProbe', (base.SchedulerObject,),
             {'VERSION': '2.0', 'fields': {}}))
    assert base.obj_manifest()['OtherProbe'] == '2.0'


def test_a_manifest_equal_to_ours_needs_no_backport():
    assert base.needs_backport(base.obj_manifest()) is False
    assert base.needs_backport({}) is False
    assert base.needs_backport(dict(base.obj_manifest(),
                                    Selection='1.0')) is True
    assert base.needs_backport(base.MANIFEST_AT_RPC_1_1) is True


@pytest.mark.parametrize('bad', ['one', '', None, 1.5, ['1.0']])
def test_an_unreadable_manifest_version_still_raises(bad):
    # The dispatcher answers these with InvalidRequest, as before the
    # versions were cached.
    with pytest.raises((ValueError, TypeError, AttributeError)):
        base.needs_backport(dict(base.obj_manifest(), Selection=bad))


def _wire(entity):
    """Serialise as the RPC layer does, through JSON and back."""
    serializer = base.SchedulerObjectSerializer()
    sent = json.loads(jsonutils.dumps(serializer.serialize_entity(None,
                                                                  entity)))
    return serializer.deserialize_entity(None, sent)


@pytest.mark.parametrize('name', ALL_OBJECTS)
def test_every_object_survives_the_wire(name):
    obj = _samples()[name]
    back = _wire(obj)
    assert type(back) is type(obj)
    assert back.to_dict() == obj.to_dict()


def test_lists_and_dicts_of_objects_survive_the_wire():
    samples = _samples()
    sel = samples['Selection']
    back = _wire({'selections': [[sel, sel]], 'spec': samples['RequestSpec']})
    assert [[s.to_dict() for s in alts] for alts in back['selections']] == \
        [[sel.to_dict(), sel.to_dict()]]
    assert back['spec'].flavor.memory_mb == 1024
    assert back['spec'].numa_topology.cells[0].cpuset == {0}


def _stored(obj) -> dict:
    """Every set field's stored value and its exact type, nested objects
    (and lists of them) walked, plus the fields marked changed."""
    def walk(value):
        if isinstance(value, ovo_base.VersionedObject):
            return _stored(value)
        if isinstance(value, list):
            return (type(value), [walk(v) for v in value])
        return (type(value), value)
    return {'changed': obj.obj_what_changed(),
            'version': obj.VERSION,
            'fields': {name: walk(getattr(obj, name))
                       for name in obj.fields
                       if obj.obj_attr_is_set(name)}}


def _read(entity):
    return base.SchedulerObjectSerializer().deserialize_entity(None, entity)


#: Values coercion refuses: built, a ValueError; read, MalformedObject.
REFUSED_VALUES = [
    ('Selection', 'service_host', None),         # not nullable, no default
    ('Selection', 'service_host', ['h1']),
    ('Selection', 'weight', 'heavy'),
    ('Selection', 'limits', 'none'),
    ('Flavor', 'memory_mb', -1),
    ('Flavor', 'memory_mb', 'lots'),
    ('SchedulerLimits', 'vcpu', 'many'),
]


def _set_fields(name):
    """A sample's fields, as values (nested objects as they are)."""
    obj = _samples()[name]
    return {f: getattr(obj, f) for f in obj.fields if obj.obj_attr_is_set(f)}


@pytest.mark.parametrize('name,field,value', REFUSED_VALUES)
def test_refused_values_are_refused_built_and_read(name, field, value):
    cls = getattr(objects, name)
    values = dict(_set_fields(name), **{field: value})
    with pytest.raises(ValueError):
        cls(**values)
    sent = json.loads(jsonutils.dumps(_samples()[name].obj_to_primitive()))
    sent['versioned_object.data'][field] = value
    with pytest.raises(exception.MalformedObject, match=name):
        _read(sent)


def test_a_string_that_is_no_uuid_still_warns():
    values = dict(_set_fields('Selection'), compute_node_uuid='node-1')
    with pytest.warns(FutureWarning, match='invalid UUID'):
        objects.Selection(**values)
    with pytest.warns(FutureWarning, match='invalid UUID'):
        sent = json.loads(jsonutils.dumps(objects.Selection(
            **values).obj_to_primitive()))
    with pytest.warns(FutureWarning, match='invalid UUID'):
        _read(sent)


def test_a_numpy_weight_is_stored_as_a_float():
    numpy = pytest.importorskip('numpy')
    values = dict(_set_fields('Selection'), weight=numpy.float64(0.25))
    sel = objects.Selection(**values)
    assert type(sel.weight) is float and sel.weight == 0.25


class _Zones:
    """A host view, as the drivers hand them to ``selection_for``."""

    def __init__(self, zones, limits=None):
        self.host, self.nodename = 'h1', 'n1'
        self.uuid = fixtures.uuid(500)
        self.availability_zones = zones
        self.limits = limits or {}


@pytest.mark.parametrize('zones', [set(), {'az2', 'az1'}, frozenset({'b'}),
                                   ['z', 'a']])
@pytest.mark.parametrize('limits', [None, {}, {'memory_mb': 6144.0,
                                               'vcpu': 32, 'disk_gb': None},
                                    {'numa_topology': {'0': 1.5}}])
def test_selection_from_host_state_is_the_constructed_one(zones, limits):
    host = _Zones(zones, {'vcpu': 8})
    sel = objects.Selection.from_host_state(host, fixtures.uuid(1), 1.5,
                                            limits)
    sorted_zones = sorted(zones)
    used = host.limits if limits is None else limits
    expected = objects.Selection(
        service_host='h1', nodename='n1', compute_node_uuid=host.uuid,
        instance_uuid=fixtures.uuid(1),
        limits=objects.SchedulerLimits(
            memory_mb=_int_or_none(used.get('memory_mb')),
            disk_gb=_int_or_none(used.get('disk_gb')),
            vcpu=_int_or_none(used.get('vcpu')),
            numa_topology=used.get('numa_topology') or None),
        availability_zone=sorted_zones[0] if sorted_zones else None,
        weight=1.5)
    assert _stored(sel) == _stored(expected)
    assert _changes_as_sets(sel.obj_to_primitive()) == \
        _changes_as_sets(expected.obj_to_primitive())


def _int_or_none(value):
    return None if value is None else int(value)


def _primitive(name='RequestSpec', version=None, data=None, **extra):
    prim = {'versioned_object.name': name,
            'versioned_object.namespace': 'scheduler',
            'versioned_object.version': version or '1.0',
            'versioned_object.data': {} if data is None else data}
    prim.update(extra)
    return prim


def _flavor_primitive(**data):
    return _primitive('Flavor', '1.0', data)


UNREADABLE = {
    'garbage without namespace, version or data': (
        {'versioned_object.name': 'RequestSpec', 'foo': 'bar'},
        exception.MalformedObject),
    'data that is not a dict': (
        _primitive('RequestSpec', '1.1', 'not a dict'),
        exception.MalformedObject),
    'an object this service never heard of': (
        _primitive('Teleporter', '1.0'), exception.MalformedObject),
    'another project\'s namespace': (
        dict(_primitive('Flavor'), **{'versioned_object.namespace': 'nova'}),
        exception.MalformedObject),
    'a newer minor version': (
        _primitive('RequestSpec', '1.9'),
        exception.IncompatibleObjectVersion),
    'a newer major version': (
        _primitive('RequestSpec', '2.0'),
        exception.IncompatibleObjectVersion),
    'an unreadable version': (
        _primitive('Flavor', 'one'), exception.MalformedObject),
    'a field of the wrong type': (
        _flavor_primitive(memory_mb='lots'), exception.MalformedObject),
    'a negative size': (
        _flavor_primitive(memory_mb=-1), exception.MalformedObject),
    'a bad value in a nested object': (
        _primitive('RequestSpec', '1.1',
                   {'flavor': _flavor_primitive(vcpus='x')}),
        exception.MalformedObject),
    'a nested field that is not an object': (
        _primitive('RequestSpec', '1.1', {'flavor': 5}),
        exception.MalformedObject),
    'a bad enum value': (
        _primitive('InstanceGroup', '1.0', {'policy': 'friends'}),
        exception.MalformedObject),
}


@pytest.mark.parametrize('case', sorted(UNREADABLE))
def test_unreadable_primitives_raise_typed_errors(case):
    primitive, error = UNREADABLE[case]
    with pytest.raises(error) as info:
        base.SchedulerObjectSerializer().deserialize_entity(None, primitive)
    assert isinstance(info.value, exception.SchedulerException)


def test_incompatible_version_error_names_object_and_versions():
    with pytest.raises(exception.IncompatibleObjectVersion) as info:
        base.SchedulerObjectSerializer().deserialize_entity(
            None, _primitive('RequestSpec', '2.0'))
    message = str(info.value)
    assert 'RequestSpec' in message and '2.0' in message
    # IncompatibleObjectVersion is a MalformedObject: callers may catch
    # the one type.
    assert isinstance(info.value, exception.MalformedObject)


def test_plain_values_pass_the_serializer_untouched():
    serializer = base.SchedulerObjectSerializer()
    for value in (None, 1, 'x', [1, 'a'], {'host': 'h1', 'limits': {}}):
        assert serializer.deserialize_entity(None, value) == value


# --- 4. RequestSpec and the legacy dicts -------------------------------------

def _legacy_request_spec():
    """A request_spec dict as nova-era callers of the seed sent it."""
    return {
        'num_instances': 2,
        'instance_uuids': [fixtures.uuid(1), fixtures.uuid(2)],
        'instance_properties': {
            'uuid': fixtures.uuid(1), 'project_id': 'demo',
            'user_id': 'alice', 'availability_zone': 'az1',
            'launch_index': 0, 'memory_mb': 512, 'vcpus': 1,
            'root_gb': 1, 'ephemeral_gb': 0},
        'instance_type': {
            'flavorid': 9050, 'name': 't4.1CPU.512MB', 'memory_mb': 512,
            'vcpus': 1, 'root_gb': 5, 'ephemeral_gb': 0, 'swap': '',
            'rxtx_factor': 1.0,
            'extra_specs': {'aggregate_instance_extra_specs:CPU': 'Trove'}},
        'image': {
            'id': 'a12fda2c-d2ff-4b7b-b8f0-a8400939df78',
            'name': 'cirros-tagged', 'disk_format': 'qcow2',
            'container_format': 'bare', 'min_ram': 0, 'min_disk': 1,
            'size': 13287936,
            'properties': {'trove': 'true', 'tesora_edition': 'enterprise',
                           'hw_architecture': 'x86_64', 'hw_cpu_cores': 2,
                           'description': None}},
        # Keys the scheduler does not use are ignored.
        'block_device_mapping': [{'boot_index': 0}],
        'security_group': ['default'],
    }


def _legacy_filter_properties():
    return {
        'scheduler_hints': {'group': 'g1', 'near': ['h1', 'h2']},
        'instance_type': {'memory_mb': 4096},   # request_spec's wins
        'retry': {'num_attempts': 2, 'hosts': [['compute1', 'node1']]},
        'group_updated': True,
        'group_policies': {'anti-affinity'},    # nova sends sets
        'group_hosts': {'compute2'},
        'group_members': {fixtures.uuid(7)},
        'force_hosts': 'compute3',              # a single string works too
        'force_nodes': ['node3'],
        'ignore_hosts': ['compute4'],
        'limits': {'memory_mb': 6144.0, 'vcpu': 32, 'disk_gb': None},
        'config_options': {},
    }


def test_from_primitives_reads_the_seed_shapes():
    spec = objects.RequestSpec.from_primitives(_legacy_request_spec(),
                                               _legacy_filter_properties())
    assert spec.num_instances == 2
    assert spec.instance_uuid == fixtures.uuid(1)
    assert (spec.project_id, spec.user_id) == ('demo', 'alice')
    assert spec.availability_zone == 'az1'
    assert spec.flavor.to_dict() == {
        'flavorid': '9050', 'name': 't4.1CPU.512MB', 'memory_mb': 512,
        'vcpus': 1, 'root_gb': 5, 'ephemeral_gb': 0, 'swap': 0,
        'extra_specs': {'aggregate_instance_extra_specs:CPU': 'Trove'}}
    assert spec.image.name == 'cirros-tagged'
    assert spec.image.min_disk == 1
    # Image properties are strings (or None), as the image service has them.
    assert spec.image.properties == {
        'trove': 'true', 'tesora_edition': 'enterprise',
        'hw_architecture': 'x86_64', 'hw_cpu_cores': '2',
        'description': None}
    assert spec.image_properties['tesora_edition'] == 'enterprise'
    assert spec.scheduler_hints == {'group': ['g1'], 'near': ['h1', 'h2']}
    assert spec.get_scheduler_hint('group') == 'g1'
    assert spec.get_scheduler_hint('near') == ['h1', 'h2']
    assert spec.get_scheduler_hint('missing', 'dflt') == 'dflt'
    assert spec.retry.num_attempts == 2
    assert spec.retry.hosts == [['compute1', 'node1']]
    assert spec.instance_group.policy == 'anti-affinity'
    assert spec.instance_group.hosts == ['compute2']
    assert spec.instance_group.members == [fixtures.uuid(7)]
    assert spec.force_hosts == ['compute3']
    assert spec.force_nodes == ['node3']
    assert spec.ignore_hosts == ['compute4']
    assert spec.limits.to_dict() == {'memory_mb': 6144, 'vcpu': 32}
    assert spec.requested_destination is None
    assert spec.is_bfv is False


def test_from_primitives_with_almost_nothing():
    spec = objects.RequestSpec.from_primitives(
        {'instance_properties': {'memory_mb': 256, 'vcpus': 1}}, None)
    assert spec.num_instances == 1
    assert spec.flavor.memory_mb == 256    # from instance_properties
    assert spec.flavor.extra_specs == {}
    for field in ('image', 'instance_uuid', 'scheduler_hints', 'retry',
                  'instance_group', 'limits', 'force_hosts'):
        assert getattr(spec, field) is None, field


def test_from_primitives_counts_instance_uuids():
    spec = objects.RequestSpec.from_primitives(
        {'instance_uuids': [fixtures.uuid(1), fixtures.uuid(2),
                            fixtures.uuid(3)],
         'instance_type': {'memory_mb': 1}}, {})
    assert spec.num_instances == 3
    assert spec.instance_uuid == fixtures.uuid(1)


def test_from_primitives_flavor_from_filter_properties():
    spec = objects.RequestSpec.from_primitives(
        {'num_instances': 1}, {'instance_type': {'memory_mb': 2048,
                                                 'vcpus': 2}})
    assert (spec.flavor.memory_mb, spec.flavor.vcpus) == (2048, 2)


def test_from_primitives_keeps_an_explicit_zero_instances():
    # Zero instances is a mistake to report, not one instance to place.
    spec = objects.RequestSpec.from_primitives(
        {'num_instances': 0, 'instance_type': {'memory_mb': 1}}, {})
    assert spec.num_instances == 0


def _full_spec():
    """A one-instance spec with everything the legacy dicts can carry."""
    return fixtures.request(
        memory_mb=2048, vcpus=2, root_gb=20, ephemeral_gb=5, swap=1024,
        extra_specs={'capabilities:hypervisor_type': 's== QEMU'},
        image_properties={'tesora_edition': 'enterprise'},
        instance_uuid=fixtures.uuid(1), project_id='demo', user_id='alice',
        availability_zone='az1', scheduler_hints={'group': ['g1']},
        ignore_hosts=['h4'], force_hosts=['h3'], force_nodes=['n3'],
        requested_destination=None,
        retry=objects.SchedulerRetry(num_attempts=1, hosts=[['h1', 'n1']]),
        instance_group=objects.InstanceGroup(
            uuid=None, name=None, policy='affinity', rules={},
            members=[fixtures.uuid(9)], hosts=['h2']),
        limits=objects.SchedulerLimits(memory_mb=4096, disk_gb=None,
                                       vcpu=None, numa_topology=None),
        is_bfv=True)


def test_legacy_dicts_round_trip():
    spec = _full_spec()
    request_spec = spec.to_legacy_request_spec_dict()
    filter_properties = spec.to_legacy_filter_properties_dict()
    # The shape the seed's IPScheduler reads.
    assert request_spec['num_instances'] == 1
    assert request_spec['instance_uuids'] == [fixtures.uuid(1)]
    assert request_spec['instance_properties']['uuid'] == fixtures.uuid(1)
    assert request_spec['instance_type']['memory_mb'] == 2048
    assert filter_properties['group_policies'] == {'affinity'}
    assert filter_properties['retry'] == {'num_attempts': 1,
                                          'hosts': [['h1', 'n1']]}
    back = objects.RequestSpec.from_primitives(request_spec,
                                               filter_properties)
    assert back.to_dict() == spec.to_dict()


def test_legacy_dicts_round_trip_through_json():
    # Over the wire sets become lists; the round trip still holds.
    spec = _full_spec()
    request_spec = jsonutils.loads(jsonutils.dumps(
        spec.to_legacy_request_spec_dict()))
    filter_properties = jsonutils.loads(jsonutils.dumps(
        spec.to_legacy_filter_properties_dict()))
    back = objects.RequestSpec.from_primitives(request_spec,
                                               filter_properties)
    assert back.to_dict() == spec.to_dict()


def test_legacy_dicts_of_a_multi_instance_spec_stay_consistent():
    # After scheduling, instance_uuid holds one of the instances; the
    # legacy dict must not claim that one uuid stands for all of them.
    spec = fixtures.request(num_instances=2, instance_uuid=fixtures.uuid(2))
    request_spec = spec.to_legacy_request_spec_dict()
    uuids = request_spec.get('instance_uuids')
    assert uuids is None or len(uuids) == 2
    back = objects.RequestSpec.from_primitives(
        request_spec, spec.to_legacy_filter_properties_dict())
    assert back.num_instances == 2


def test_get_gives_old_filters_the_legacy_view():
    spec = _full_spec()
    # The Trove filter of the seeds reads this chain.
    props = spec.get('request_spec', {}).get('image', {}).get(
        'properties', {})
    assert props == {'tesora_edition': 'enterprise'}
    # Fields come back as they are; unknown keys take the default.
    assert spec.get('flavor') is spec.flavor
    assert spec.get('num_instances') == 1
    assert spec.get('retry') is spec.retry
    assert spec.get('scheduler_hints') == {'group': ['g1']}
    assert spec.get('no_such_key', 'dflt') == 'dflt'
    assert spec.get('group_hosts') == {'h2'}


def test_get_without_image_gives_empty_properties():
    spec = fixtures.request()
    assert spec.get('request_spec', {}).get('image', {}).get(
        'properties', {}) == {}


def test_unset_request_fields_mean_no_constraint():
    spec = objects.RequestSpec(flavor=fixtures.flavor())
    assert spec.num_instances == 1
    assert spec.pci_requests == []
    assert spec.is_bfv is False
    for field in ('image', 'force_hosts', 'ignore_hosts', 'scheduler_hints',
                  'requested_destination', 'limits', 'instance_group'):
        assert spec.obj_get(field) is None
        assert getattr(spec, field) is None, field
    assert spec.image_properties == {}


def test_selection_legacy_dict_is_the_seed_destination():
    sel = _samples()['Selection']
    assert sel.to_legacy_dict() == {
        'host': 'h1', 'nodename': 'h1',
        'limits': {'memory_mb': 6144, 'disk_gb': 200, 'vcpu': 32}}
    back = objects.Selection.from_legacy_dict(
        {'host': 'h2', 'nodename': None, 'limits': None})
    assert (back.service_host, back.nodename) == ('h2', 'h2')
    assert back.limits.to_dict() == {}


# --- 5. HostState ------------------------------------------------------------

def test_host_state_derived_values():
    state = fixtures.report('h1', memory_mb=4096, memory_mb_used=1024,
                            local_gb=100, local_gb_used=40, vcpus=8,
                            vcpus_used=3)
    assert state.free_ram_mb == 3072
    assert state.free_disk_mb == 60 * 1024
    assert state.free_vcpus == 5
    assert state.total_usable_ram_mb == 4096
    assert state.total_usable_disk_gb == 100
    assert state.key() == ('h1', 'h1')


def test_old_report_gets_defaults_for_newer_fields():
    # A 1.0 compute does not send failed_builds; reading it is no error.
    prim = base.obj_to_primitive_for(fixtures.report('h1'),
                                     {'HostState': '1.0'})
    state = objects.HostState.obj_from_primitive(prim)
    assert state.failed_builds == 0
    state.set_defaults()
    assert state.memory_mb_used == 0
    assert state.instance_uuids == []
    assert state.updated_at is not None


def test_consume_from_request_counts_root_ephemeral_and_swap():
    state = fixtures.report('h1').set_defaults()
    spec = fixtures.request(memory_mb=1024, vcpus=2, root_gb=10,
                            ephemeral_gb=5, swap=100,
                            instance_uuid=fixtures.uuid(1))
    state.consume_from_request(spec)
    assert state.memory_mb_used == 1024
    assert state.vcpus_used == 2
    # Swap is rounded up to a whole GiB.
    assert state.local_gb_used == 10 + 5 + 1
    assert state.num_instances == 1
    assert state.num_io_ops == 1
    assert state.instance_uuids == [fixtures.uuid(1)]


def test_boot_from_volume_uses_no_local_root_disk():
    spec = fixtures.request(root_gb=10, ephemeral_gb=2, is_bfv=True)
    assert compute.resources_of(spec) == (512, 1, 2)


def test_apply_claim_and_give_it_back():
    state = fixtures.report('h1').set_defaults()
    state.apply_claim(512, 1, 10, fixtures.uuid(1))
    state.apply_claim(512, 1, 10, fixtures.uuid(1))   # same uuid listed once
    assert state.instance_uuids == [fixtures.uuid(1)]
    state.apply_claim(512, 1, 10, fixtures.uuid(1), sign=-1)
    state.apply_claim(512, 1, 10, fixtures.uuid(1), sign=-1)
    assert (state.memory_mb_used, state.vcpus_used, state.local_gb_used) \
        == (0, 0, 0)
    assert state.instance_uuids == []
    assert state.num_instances == 0    # never below zero


def _agg(name, **metadata):
    return objects.Aggregate(id=None, uuid=None, name=name, hosts=['h1'],
                             metadata=metadata)


def test_allocation_ratio_is_the_reported_one_without_aggregates():
    state = fixtures.report('h1', cpu_allocation_ratio=4.0,
                            ram_allocation_ratio=1.5)
    assert state.allocation_ratio('cpu') == 4.0
    assert state.allocation_ratio('ram') == 1.5
    assert state.allocation_ratio('disk') == 1.0


def test_aggregate_allocation_ratio_overrides_and_the_smallest_wins():
    state = fixtures.report('h1', ram_allocation_ratio=1.5,
                            cpu_allocation_ratio=16.0)
    state.aggregates = [_agg('big', ram_allocation_ratio='3.0'),
                        _agg('careful', ram_allocation_ratio='1.2'),
                        _agg('zone', availability_zone='az1')]
    assert state.allocation_ratio('ram') == 1.2
    # Resources no aggregate mentions keep the reported ratio.
    assert state.allocation_ratio('cpu') == 16.0


def test_non_numeric_aggregate_ratio_is_ignored():
    state = fixtures.report('h1', disk_allocation_ratio=1.0)
    state.aggregates = [_agg('typo', disk_allocation_ratio='lots')]
    assert state.allocation_ratio('disk') == 1.0


def test_zones_come_from_aggregate_metadata():
    state = fixtures.report('h1')
    state.aggregates = [_agg('a', availability_zone='az1'), _agg('b')]
    assert state.availability_zones == {'az1'}


def test_derived_values_are_the_same_on_the_schedulers_host_states():
    # The HostManager turns reports into its own working copies; filters
    # read the same numbers from either.
    report = fixtures.report('h1', memory_mb_used=1024, local_gb_used=40,
                             vcpus_used=3, ram_allocation_ratio=1.5)
    aggs = [fixtures.aggregate('az', ['h1'], zone='az1',
                               metadata={'ram_allocation_ratio': '1.2'})]
    state = fixtures.hosts(report, aggregates=aggs)[0]
    assert (state.free_ram_mb, state.free_disk_mb, state.free_vcpus) == \
        (report.free_ram_mb, report.free_disk_mb, report.free_vcpus)
    assert state.allocation_ratio('ram') == 1.2
    assert state.availability_zones == {'az1'}


def test_fixtures_library_is_the_real_one():
    # tests/unit/fixtures (our builders) must not shadow the 'fixtures'
    # library oslo's test fixtures import.
    assert hasattr(fixtures_lib, 'Fixture')


def test_claims_count_swap_in_whole_gib():
    # Usage is kept in GiB: 1 MiB of swap claims 1 GiB (the filters
    # compare in MiB, as nova does).
    spec = fixtures.request(root_gb=1, ephemeral_gb=0, swap=1)
    assert compute.resources_of(spec) == (512, 1, 2)
    assert compute.requested_disk_mb(spec) == 1025
