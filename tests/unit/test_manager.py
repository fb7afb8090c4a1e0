"""SchedulerManager, called directly as the RPC server would call it.

The manager checks what arrives, turns legacy dicts into a RequestSpec,
asks the driver and shapes the answer for the caller: the seed's list of
dicts, Selections, or Selections backported to the caller's versions.
"""

import logging
import warnings

import oslo_messaging
import pytest
import sqlalchemy as sa

from scheduler import cast_ledger
from scheduler import context
from scheduler.db import availability
from scheduler import driver as driver_mod
from scheduler.drivers import chance
from scheduler.drivers import filter_scheduler
from scheduler import exception
from scheduler import manager as manager_mod
from scheduler import objects
from scheduler import rejections
from scheduler.objects import base as objects_base
from tests.unit import fixtures

CTX = context.get_admin_context()


def _manager(reports=None):
    reports = reports if reports is not None else [
        fixtures.report('small', memory_mb=2048),
        fixtures.report('big', memory_mb=8192)]
    driver = filter_scheduler.FilterScheduler(fixtures.manager_with(reports))
    return manager_mod.SchedulerManager(driver=driver)


@pytest.fixture(autouse=True)
def ram_decides(conf):
    conf.config(weight_classes=['RAMWeigher'],
                enabled_filters=fixtures.CORE_FILTERS,
                group='filter_scheduler')


def call(method, *args, **kwargs):
    """Call an endpoint method; expected errors come out with their type.

    Endpoints mark NoValidHost & co as expected, which wraps them for
    oslo.messaging; an RPC caller sees the original type, and so do we.
    """
    try:
        return method(CTX, *args, **kwargs)
    except oslo_messaging.ExpectedException as wrapped:
        raise wrapped.exc_info[1]


def _legacy(num_instances=1, memory_mb=1024, uuids=None, **props):
    request_spec = {
        'num_instances': num_instances,
        'instance_properties': dict({'project_id': 'demo'}, **props),
        'instance_type': {'memory_mb': memory_mb, 'vcpus': 1, 'root_gb': 1,
                          'ephemeral_gb': 0, 'swap': 0, 'extra_specs': {}},
        'image': {'properties': {}},
    }
    if uuids is not None:
        request_spec['instance_uuids'] = uuids
    return request_spec


# --- select_destinations -----------------------------------------------------

def test_legacy_dicts_in_the_seeds_list_of_dicts_out():
    dests = call(_manager().select_destinations,
                 request_spec=_legacy(num_instances=2,
                                      uuids=[fixtures.uuid(1),
                                             fixtures.uuid(2)]),
                 filter_properties={'scheduler_hints': {}})
    assert dests == [
        {'host': 'big', 'nodename': 'big',
         'limits': {'memory_mb': 8192, 'disk_gb': 100, 'vcpu': 8}},
        {'host': 'big', 'nodename': 'big',
         'limits': {'memory_mb': 8192, 'disk_gb': 100, 'vcpu': 8}}]


def test_legacy_filter_properties_are_honoured():
    dests = call(_manager().select_destinations, request_spec=_legacy(),
                 filter_properties={'ignore_hosts': ['big']})
    assert [d['host'] for d in dests] == ['small']


def test_legacy_dicts_of_a_multi_instance_spec_are_accepted():
    # A spec that was scheduled before carries one instance_uuid.
    spec = fixtures.request(num_instances=2, instance_uuid=fixtures.uuid(2))
    dests = call(_manager().select_destinations,
                 request_spec=spec.to_legacy_request_spec_dict(),
                 filter_properties=spec.to_legacy_filter_properties_dict())
    assert len(dests) == 2


def test_objects_in_selections_out():
    selections = call(_manager().select_destinations,
                      spec_obj=fixtures.request(),
                      instance_uuids=[fixtures.uuid(1)], return_objects=True,
                      peer_manifest=objects_base.obj_manifest())
    assert len(selections) == 1
    assert isinstance(selections[0][0], objects.Selection)
    assert selections[0][0].service_host == 'big'
    assert selections[0][0].instance_uuid == fixtures.uuid(1)


def test_objects_in_legacy_dicts_out():
    dests = call(_manager().select_destinations, spec_obj=fixtures.request())
    assert [d['host'] for d in dests] == ['big']


def test_alternates_on_request(conf):
    conf.config(max_attempts=2, group='scheduler')
    selections = call(_manager().select_destinations,
                      spec_obj=fixtures.request(), return_objects=True,
                      return_alternates=True,
                      peer_manifest=objects_base.obj_manifest())
    assert [s.service_host for s in selections[0]] == ['big', 'small']


def test_a_1_1_caller_gets_selections_it_can_read():
    """No manifest means API 1.1: Selections come back as 1.0."""
    answer = call(_manager().select_destinations,
                  spec_obj=fixtures.request(), return_objects=True)
    primitive = answer[0][0]
    assert primitive['versioned_object.version'] == '1.0'
    assert 'weight' not in primitive['versioned_object.data']


def test_peer_manifest_backports_the_selections():
    old_peer = {'Selection': '1.0', 'SchedulerLimits': '1.0'}
    answer = call(_manager().select_destinations,
                  spec_obj=fixtures.request(), return_objects=True,
                  peer_manifest=old_peer)
    primitive = answer[0][0]
    assert primitive['versioned_object.name'] == 'Selection'
    assert primitive['versioned_object.version'] == '1.0'
    assert 'weight' not in primitive['versioned_object.data']
    assert primitive['versioned_object.data']['service_host'] == 'big'
    # The old peer reads it as a Selection.
    sel = objects_base.SchedulerObjectSerializer().deserialize_entity(
        None, primitive)
    assert sel.service_host == 'big'


def test_a_peer_with_our_versions_gets_everything():
    answer = call(_manager().select_destinations,
                  spec_obj=fixtures.request(), return_objects=True,
                  peer_manifest=objects_base.obj_manifest())
    sel = objects_base.SchedulerObjectSerializer().deserialize_entity(
        None, answer[0][0])
    assert sel.VERSION == objects.Selection.VERSION
    assert sel.weight == 1.0


def test_no_valid_host_reaches_the_caller_typed():
    with pytest.raises(exception.NoValidHost):
        call(_manager().select_destinations,
             spec_obj=fixtures.request(memory_mb=1 << 20))


def test_the_wrapper_is_what_oslo_messaging_expects():
    with pytest.raises(oslo_messaging.ExpectedException):
        _manager().select_destinations(
            CTX, spec_obj=fixtures.request(memory_mb=1 << 20))


INVALID = {
    'nothing at all': dict(),
    'a dict as spec_obj': dict(spec_obj={'flavor': {}}),
    'a HostState as spec_obj': dict(spec_obj=fixtures.report('h1')),
    'a spec without flavor': dict(spec_obj=objects.RequestSpec()),
    'zero instances': dict(spec_obj=fixtures.request(num_instances=0)),
    'ten thousand instances': dict(
        spec_obj=fixtures.request(num_instances=10000)),
    'negative instances': dict(spec_obj=fixtures.request(num_instances=-1)),
    'legacy zero instances': dict(request_spec=_legacy(num_instances=0)),
    'legacy ten thousand': dict(request_spec=_legacy(num_instances=10000)),
    'instance_uuids not a list': dict(spec_obj=fixtures.request(),
                                      instance_uuids=fixtures.uuid(1)),
    'instance_uuids not strings': dict(spec_obj=fixtures.request(),
                                       instance_uuids=[1]),
    'more uuids than instances': dict(
        spec_obj=fixtures.request(),
        instance_uuids=[fixtures.uuid(1), fixtures.uuid(2)]),
    'legacy uuids not a list': dict(
        request_spec=dict(_legacy(), instance_uuids='abc')),
    'legacy request_spec not a dict': dict(request_spec=['num_instances']),
    'legacy filter_properties not a dict': dict(request_spec=_legacy(),
                                                filter_properties='x'),
    'legacy instance_type not a dict': dict(
        request_spec=dict(_legacy(), instance_type='m1.small')),
    'legacy negative memory': dict(
        request_spec=dict(_legacy(), instance_type={'memory_mb': -5})),
    'legacy num_instances not a number': dict(
        request_spec=dict(_legacy(), num_instances='two')),
    'legacy instance_properties not a dict': dict(
        request_spec=dict(_legacy(), instance_properties=5)),
    'legacy image not a dict': dict(request_spec=dict(_legacy(),
                                                      image='cirros')),
    'legacy hints not a dict': dict(request_spec=_legacy(),
                                    filter_properties={'scheduler_hints':
                                                       'x'}),
    'legacy retry not a dict': dict(request_spec=_legacy(),
                                    filter_properties={'retry': 'x'}),
    'legacy limits not a dict': dict(request_spec=_legacy(),
                                     filter_properties={'limits': 'x'}),
    'legacy unknown group policy': dict(
        request_spec=_legacy(),
        filter_properties={'group_policies': ['friends']}),
    # Strings the inventory's columns cannot hold: PostgreSQL and
    # MariaDB refused the claim's INSERT with an untyped DBError.
    'an instance uuid longer than 36 characters': dict(
        spec_obj=fixtures.request(), instance_uuids=['u' * 37]),
    'an empty instance uuid': dict(spec_obj=fixtures.request(),
                                   instance_uuids=['']),
    'an instance uuid with a NUL': dict(spec_obj=fixtures.request(),
                                        instance_uuids=['ab\x00cd']),
    'a spec instance_uuid longer than 36 characters': dict(
        spec_obj=fixtures.request(instance_uuid='v' * 200)),
    'a project id longer than 255 characters': dict(
        spec_obj=fixtures.request(project_id='p' * 256),
        instance_uuids=[fixtures.uuid(1)]),
    'a user id with a control character': dict(
        spec_obj=fixtures.request(user_id='u\x01'),
        instance_uuids=[fixtures.uuid(1)]),
    'an instance uuid with a lone surrogate': dict(
        spec_obj=fixtures.request(), instance_uuids=['\udc00abc']),
    'a project id with a lone surrogate': dict(
        spec_obj=fixtures.request(project_id='p\ud800'),
        instance_uuids=[fixtures.uuid(1)]),
    'more MB of RAM than the inventory counts': dict(
        spec_obj=fixtures.request(memory_mb=2 ** 31)),
    'more vCPUs than the inventory counts': dict(
        spec_obj=fixtures.request(vcpus=2 ** 40)),
}


@pytest.mark.parametrize('case', sorted(INVALID))
def test_invalid_requests_are_rejected_typed(case):
    manager = _manager()
    with pytest.raises(exception.InvalidRequest):
        call(manager.select_destinations, **INVALID[case])
    # Nothing was claimed on the way.
    assert all(s.memory_mb_used == 0
               for s in manager.driver.host_manager.get_all_host_states())


@pytest.mark.parametrize('case', sorted(INVALID))
def test_an_invalid_request_is_one_warning_line(case, caplog, monkeypatch):
    # The dispatcher passes the manager's typed refusals on unlogged
    # (they are expected exceptions): the manager says them itself.
    monkeypatch.setattr(rejections, '_limiter', rejections._Limiter())
    with pytest.raises(exception.InvalidRequest):
        call(_manager().select_destinations, **INVALID[case])
    warnings = [r.getMessage() for r in caplog.records
                if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith(
        'Rejected a call of select_destinations: InvalidRequest')


def test_a_refused_explain_and_forced_host_are_one_line_each(
        caplog, monkeypatch):
    monkeypatch.setattr(rejections, '_limiter', rejections._Limiter())
    manager = _manager()
    user = context.RequestContext(user_id='u', project_id='p')
    with pytest.raises(exception.InvalidRequest):
        call(manager.explain, spec_obj=5)
    with pytest.raises(exception.NotAuthorized):
        try:
            manager.select_destinations(
                user, spec_obj=fixtures.request(force_hosts=['big']))
        except oslo_messaging.ExpectedException as wrapped:
            raise wrapped.exc_info[1]
    warnings = [r.getMessage() for r in caplog.records
                if r.levelno >= logging.WARNING]
    assert len(warnings) == 2, warnings
    assert 'of explain: InvalidRequest' in warnings[0]
    assert 'of select_destinations: NotAuthorized' in warnings[1]


def test_no_valid_host_is_no_warning(caplog):
    with pytest.raises(exception.NoValidHost):
        call(_manager().select_destinations,
             spec_obj=fixtures.request(memory_mb=1 << 20))
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_max_instances_per_request_is_accepted():
    manager = _manager([fixtures.report('h%d' % n, memory_mb=1 << 20,
                                        vcpus=1000, local_gb=1000)
                        for n in range(2)])
    limit = manager_mod.CONF.limits.max_instances_per_request
    spec = fixtures.request(memory_mb=1, num_instances=limit)
    assert len(call(manager.select_destinations, spec_obj=spec)) == limit
    spec = fixtures.request(memory_mb=1, num_instances=limit + 1)
    with pytest.raises(exception.InvalidRequest) as info:
        call(manager.select_destinations, spec_obj=spec)
    assert 'max_instances_per_request' in str(info.value)


# --- schedule_run_instance ---------------------------------------------------

_Compute = fixtures.RecordingCompute


def test_schedule_run_instance_legacy_and_objects():
    manager = _manager()
    manager.driver.compute_rpcapi = _Compute()
    call(manager.schedule_run_instance,
         request_spec=_legacy(uuids=[fixtures.uuid(1)]), filter_properties={})
    call(manager.schedule_run_instance, spec_obj=fixtures.request(),
         instance_uuids=[fixtures.uuid(2)])
    assert manager.driver.compute_rpcapi.casts == [
        ('big', fixtures.uuid(1)), ('big', fixtures.uuid(2))]


def test_schedule_run_instance_drops_bad_casts_with_a_warning(caplog):
    manager = _manager()
    manager.driver.compute_rpcapi = _Compute()
    call(manager.schedule_run_instance, spec_obj='junk')
    call(manager.schedule_run_instance, spec_obj=fixtures.request())
    assert manager.driver.compute_rpcapi.casts == []
    warnings = [r.getMessage() for r in caplog.records
                if r.levelno == logging.WARNING]
    assert len(warnings) == 2
    assert 'no instance uuids' in warnings[1]


class _Undeliverable(_Compute):
    """The broker routes no cast to ``gone`` (no queue for that host)."""

    def __init__(self, gone: set):
        super().__init__()
        self.gone = gone

    def run_instance(self, context, host, node, instance_uuid, spec_obj,
                     limits=None):
        if host in self.gone:
            raise oslo_messaging.MessageUndeliverable(
                Exception('NO_ROUTE'), 'scheduler', host, {})
        super().run_instance(context, host, node, instance_uuid, spec_obj,
                             limits)


def test_an_undelivered_build_releases_its_claim_and_tries_another_host(
        caplog, monkeypatch):
    monkeypatch.setattr(driver_mod.time, 'sleep', lambda seconds: None)
    manager = _manager([fixtures.report('roomy', memory_mb=1 << 20),
                        fixtures.report('small', memory_mb=4096)])
    manager.driver.compute_rpcapi = _Undeliverable({'roomy'})
    call(manager.schedule_run_instance, spec_obj=fixtures.request(),
         instance_uuids=[fixtures.uuid(1)])
    assert manager.driver.compute_rpcapi.casts == [('small',
                                                    fixtures.uuid(1))]
    hosts = manager.driver.host_manager
    placed = hosts.placements([fixtures.uuid(1)])[fixtures.uuid(1)]
    assert placed['host'] == 'small'
    assert any('not delivered to roomy' in r.getMessage()
               for r in caplog.records if r.levelno == logging.WARNING)


def test_a_stopping_service_tries_the_other_hosts_without_waiting(
        monkeypatch):
    """Waiting for computes to come back would hold the stop.  (A cast
    whose row could not be written, the database away: one with a row
    is left to another worker before its next claim.)"""
    slept = []
    monkeypatch.setattr(driver_mod.time, 'sleep', slept.append)
    monkeypatch.setattr(cast_ledger, 'record', lambda ctxt, args: None)
    manager = _manager([fixtures.report('roomy', memory_mb=1 << 20),
                        fixtures.report('small', memory_mb=4096)])
    manager.driver.compute_rpcapi = _Undeliverable({'roomy'})
    manager.driver.stopping = True
    call(manager.schedule_run_instance, spec_obj=fixtures.request(),
         instance_uuids=[fixtures.uuid(1)])
    assert manager.driver.compute_rpcapi.casts == [('small',
                                                    fixtures.uuid(1))]
    assert slept == []


def test_a_build_no_host_takes_is_logged_lost_and_holds_nothing(
        caplog, monkeypatch):
    monkeypatch.setattr(driver_mod.time, 'sleep', lambda seconds: None)
    manager = _manager([fixtures.report('a'), fixtures.report('b')])
    manager.driver.compute_rpcapi = _Undeliverable({'a', 'b'})
    call(manager.schedule_run_instance, spec_obj=fixtures.request(),
         instance_uuids=[fixtures.uuid(1)])
    assert manager.driver.compute_rpcapi.casts == []
    assert manager.driver.host_manager.placements([fixtures.uuid(1)]) == {}
    [lost] = [r.getMessage() for r in caplog.records
              if r.levelno == logging.ERROR]
    assert 'lost' in lost and ('a, b' in lost or 'b, a' in lost)


# --- reports -----------------------------------------------------------------

def _report_with_uuid(uuid):
    report = fixtures.report('h1')
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', FutureWarning)  # not a UUID
        report.uuid = uuid
    return report


@pytest.mark.parametrize('uuid', ['x' * 100, 'a\x00b'])
def test_a_report_whose_uuid_the_inventory_cannot_store_is_refused(
        uuid, caplog):
    # PostgreSQL refused the row, failing (and retrying for ever) the
    # write of every report taken with it.
    manager = _manager([])
    call(manager.update_service_capabilities,
         host_state=_report_with_uuid(uuid))
    assert manager.driver.host_manager.get_all_host_states() == []
    [warning] = [r.getMessage() for r in caplog.records
                 if r.levelno >= logging.WARNING]
    assert 'uuid' in warning
    call(manager.update_service_capabilities,
         host_state=fixtures.report('h1'))
    assert manager.driver.host_manager.host_names() == ['h1']


@pytest.mark.parametrize('field, value', [
    ('nodename', 'node\ud800'), ('host', 'h\udfff')])
def test_a_report_name_utf_8_cannot_encode_is_refused(field, value, caplog):
    # A lone surrogate (JSON's "\ud800") failed the write of the whole
    # batch of reports on PostgreSQL, as above.
    manager = _manager([])
    report = fixtures.report('h1')
    setattr(report, field, value)
    call(manager.update_service_capabilities, host_state=report)
    assert manager.driver.host_manager.get_all_host_states() == []
    assert len([r for r in caplog.records
                if r.levelno >= logging.WARNING]) == 1


@pytest.mark.parametrize('field, value', [
    ('memory_mb', 2 ** 40), ('memory_mb_used', 2 ** 35),
    ('vcpus_used', -2 ** 31 - 1), ('local_gb', 2 ** 31),
    ('disk_available_least', 2 ** 33), ('num_instances', 2 ** 31)])
def test_a_report_number_the_inventory_cannot_store_is_refused(
        field, value, caplog):
    # Its usage row (32-bit integers) failed the write of every report
    # taken with it, as above; a host of 2**40 MB let a claim overflow.
    manager = _manager([])
    report = fixtures.report('h1')
    setattr(report, field, value)
    call(manager.update_service_capabilities, host_state=report)
    assert manager.driver.host_manager.get_all_host_states() == []
    [warning] = [r.getMessage() for r in caplog.records
                 if r.levelno >= logging.WARNING]
    assert field in warning


@pytest.mark.parametrize('junk', [
    None, 'h1', {'host': 'h1', 'memory_mb': 1024}, fixtures.request(),
    objects.HostState(host='h1', nodename='h1'),      # no sizes
    objects.HostState(memory_mb=1, local_gb=1, vcpus=1),   # no name
], ids=['None', 'str', 'dict', 'RequestSpec', 'no-sizes', 'no-name'])
def test_junk_reports_are_ignored_with_one_warning(junk, caplog):
    manager = _manager([])
    call(manager.update_service_capabilities, host_state=junk)
    assert manager.driver.host_manager.get_all_host_states() == []
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    # The service goes on taking good reports.
    call(manager.update_service_capabilities,
         host_state=fixtures.report('h1'))
    assert manager.driver.host_manager.host_names() == ['h1']


@pytest.mark.parametrize('uuid', ['u' * 37, '', 'a\x00b', 5])
def test_instance_news_with_an_unstorable_uuid_is_refused(uuid):
    manager = _manager([fixtures.report('h1')])
    with pytest.raises(exception.InvalidRequest):
        call(manager.delete_instance_info, host_name='h1',
             instance_uuid=uuid)
    for method in (manager.update_instance_info, manager.sync_instance_info):
        with pytest.raises(exception.InvalidRequest):
            call(method, host_name='h1', instance_uuids=[uuid])


def test_extra_arguments_of_newer_computes_are_ignored():
    manager = _manager([])
    call(manager.update_service_capabilities,
         host_state=fixtures.report('h1'), service_name='compute')
    assert manager.driver.host_manager.host_names() == ['h1']


def test_intake_reports_are_written_before_use_fanout_ones_at_the_flush():
    manager = _manager([])
    hm = manager.driver.host_manager
    hm._writer.window = 0.0
    call(manager.intake.update_service_capabilities,
         host_state=fixtures.report('h1'), service_name='compute')
    assert [r['host'] for r in hm.db.host_reports_get_all()] == ['h1']
    call(manager.reports.update_service_capabilities,
         host_state=fixtures.report('h2'))
    assert hm.host_names() == ['h1', 'h2']
    assert [r['host'] for r in hm.db.host_reports_get_all()] == ['h1']


def test_a_driver_that_records_reports_its_own_way_gets_intake_ones_too():
    """Written before the intake, it does not take ``shared``."""
    got = []

    class Recording(filter_scheduler.FilterScheduler):
        def update_service_capabilities(self, host_state):
            got.append(host_state.host)
            super().update_service_capabilities(host_state)

    manager = manager_mod.SchedulerManager(
        driver=Recording(fixtures.manager_with([])))
    call(manager.intake.update_service_capabilities,
         host_state=fixtures.report('h1'))
    assert got == ['h1']
    assert manager.driver.host_manager.host_names() == ['h1']


def test_instance_info_reaches_the_host_manager():
    manager = _manager([fixtures.report('h1', memory_mb=4096)])
    call(manager.select_destinations, spec_obj=fixtures.request(
        memory_mb=1024), instance_uuids=[fixtures.uuid(1)])
    hm = manager.driver.host_manager
    call(manager.delete_instance_info, host_name='h1',
         instance_uuid=fixtures.uuid(1))
    assert hm.get_host_state('h1').free_ram_mb == 4096
    call(manager.sync_instance_info, host_name='h1', instance_uuids=[])
    call(manager.update_instance_info, host_name='h1',
         instance_uuids=[fixtures.uuid(3)])


def test_a_bad_aggregate_update_is_a_typed_error():
    manager = _manager()
    with pytest.raises(exception.InvalidRequest):
        call(manager.update_aggregates, aggregates=[object()])


@pytest.mark.parametrize('fields', [
    dict(name='n' * 256), dict(name='a\x00b'), dict(uuid='u' * 37),
    dict(hosts=['h' * 256]), dict(metadata={'k' * 256: 'v'}),
    dict(metadata={'k': 'v' * 256}), dict(id=2 ** 31)],
    ids=['long name', 'NUL in name', 'long uuid', 'long host',
         'long key', 'long value', 'big id'])
def test_an_aggregate_the_inventory_cannot_store_is_refused(fields):
    # PostgreSQL refused the INSERT: a DBError, logged by oslo.db with a
    # traceback besides the rejection.
    values = dict(id=7, name='agg', hosts=['big'], metadata={})
    values.update(fields)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', FutureWarning)  # not a UUID
        aggregate = objects.Aggregate(**values)
    manager = _manager()
    with pytest.raises(exception.InvalidRequest):
        call(manager.update_aggregates, aggregates=[aggregate])


# --- version info and driver loading -----------------------------------------

def test_get_version_info():
    info = call(_manager().get_version_info)
    assert info == {
        'rpc_version': manager_mod.SchedulerManager.target.version,
        'objects': objects_base.obj_manifest()}
    # 1.2 introduced get_version_info itself.
    assert tuple(map(int, info['rpc_version'].split('.'))) >= (1, 2)
    assert info['objects']['RequestSpec'] == objects.RequestSpec.VERSION


def test_load_driver_by_entry_point_name(conf):
    assert isinstance(manager_mod.load_driver('chance_scheduler'),
                      chance.ChanceScheduler)
    conf.config(driver='filter_scheduler', group='scheduler')
    assert isinstance(manager_mod.load_driver(),
                      filter_scheduler.FilterScheduler)


def test_load_driver_by_dotted_path(conf):
    conf.config(driver='scheduler.drivers.chance.ChanceScheduler',
                group='scheduler')
    manager = manager_mod.SchedulerManager()
    assert isinstance(manager.driver, chance.ChanceScheduler)


def test_unknown_driver_is_named():
    with pytest.raises(exception.SchedulerDriverNotFound) as info:
        manager_mod.load_driver('nova.scheduler.ip_scheduler.IPScheduler')
    assert "'nova.scheduler.ip_scheduler.IPScheduler'" in str(info.value)
    assert 'scheduler.drivers' in str(info.value)


def test_a_class_that_is_no_scheduler_is_rejected():
    with pytest.raises(exception.SchedulerDriverNotFound) as info:
        manager_mod.load_driver('scheduler.filters.ram.RamFilter')
    assert 'not a subclass of scheduler.driver.Scheduler' in str(info.value)


def test_a_driver_must_implement_the_two_marked_methods():
    class Half(driver_mod.Scheduler):
        def select_destinations(self, context, spec_obj, instance_uuids,
                                return_alternates=False):
            return []

    with pytest.raises(TypeError):
        Half()


def test_reset_reaches_the_driver(conf):
    manager = _manager()
    conf.config(enabled_filters=['ComputeFilter'], group='filter_scheduler')
    manager.reset()
    assert [f.name() for f in manager.driver.enabled_filters] == \
        ['ComputeFilter']


def test_an_unresolved_group_hint_is_refused_not_ignored():
    spec = fixtures.request(scheduler_hints={'group': ['my-group']})
    with pytest.raises(exception.InvalidRequest) as err:
        call(_manager().select_destinations, spec_obj=spec,
             return_objects=True)
    assert 'instance_group' in str(err.value)


def test_a_resolved_group_hint_is_scheduled():
    group = objects.InstanceGroup(uuid=None, name='g', policy='affinity',
                                  rules={}, members=[], hosts=[])
    spec = fixtures.request(scheduler_hints={'group': ['g']},
                            instance_group=group)
    assert call(_manager().select_destinations, spec_obj=spec)


# -- housekeeping (periodic tasks) ----------------------------------------

#: Each periodic task and what it must get done, as the calls it makes.
HOUSEKEEPING = {
    # Never loaded (start-up did not run): loads, aggregates first.
    '_load_saved_state': ['ensure_loaded', 'refresh_aggregates'],
    '_flush_inventory': ['flush'],
    '_replay_instance_news': ['replay_deferred'],
    '_check_down_hosts': ['check_down_hosts', 'forget_deleted_nodes'],
    '_expire_claims': ['expire_claims'],
    '_take_over_casts': ['cast_ledger.take_over'],
    '_refresh_aggregates': ['refresh_aggregates'],
    '_publish_metrics': ['set_hosts'],
    '_return_freed_memory': ['trim'],
    '_watch_hearing': ['hearing.check'],
}


def _recorded_housekeeping(monkeypatch, manager, calls: list, fail=None):
    """Record (and still make) the calls the periodic tasks make;
    ``fail`` names one that raises instead."""
    def record(owner, name, label=None):
        real = getattr(owner, name)

        def recorded(*args, **kwargs):
            calls.append(label or name)
            if (label or name) == fail:
                raise _outage()
            return real(*args, **kwargs)
        monkeypatch.setattr(owner, name, recorded)

    host_manager = manager.driver.host_manager
    for name in ('ensure_loaded', 'flush', 'check_down_hosts',
                 'forget_deleted_nodes', 'expire_claims',
                 'refresh_aggregates'):
        record(host_manager, name)
    record(manager.reports, 'replay_deferred')
    record(manager_mod.metrics, 'set_hosts')
    record(manager_mod.memory, 'trim')
    record(manager_mod.cast_ledger, 'take_over', 'cast_ledger.take_over')
    record(manager.hearing, 'check', 'hearing.check')


def _outage():
    return sa.exc.OperationalError(
        'SELECT 1', {}, Exception('server closed the connection'),
        connection_invalidated=True)


def _run_every_task_now(manager) -> None:
    manager._periodic_last_run = dict.fromkeys(manager._periodic_last_run)
    manager.run_periodic_tasks(CTX, raise_on_error=True)


def test_each_periodic_task_does_its_housekeeping(monkeypatch):
    manager = _manager()
    assert {name for name, _ in manager._periodic_tasks} == \
        set(HOUSEKEEPING)
    calls: list = []
    _recorded_housekeeping(monkeypatch, manager, calls)
    _run_every_task_now(manager)
    assert sorted(calls) == sorted(
        call for made in HOUSEKEEPING.values() for call in made)


def test_periodic_tasks_run_at_the_configured_interval(conf):
    conf.config(periodic_task_interval=7, group='scheduler')
    manager = _manager()
    assert manager._periodic_spacing == dict.fromkeys(HOUSEKEEPING, 7)
    # The inventory is written and the metrics published at the first
    # run; the rest waits for its interval.
    immediate = {name for name, task in manager._periodic_tasks
                 if task._periodic_immediate}
    assert immediate == {'_load_saved_state', '_flush_inventory',
                         '_publish_metrics'}


@pytest.mark.parametrize('task, call', [
    ('_load_saved_state', 'ensure_loaded'),
    ('_check_down_hosts', 'check_down_hosts'),
    ('_expire_claims', 'expire_claims'),
    ('_take_over_casts', 'cast_ledger.take_over'),
    ('_refresh_aggregates', 'refresh_aggregates')])
def test_a_database_outage_skips_a_task_quietly(monkeypatch, task, call):
    """The task is tried again at its next run; the outage is counted
    (and told once by ``availability``), not raised with a traceback
    at every run."""
    manager = _manager()
    calls: list = []
    _recorded_housekeeping(monkeypatch, manager, calls, fail=call)
    counted = []
    monkeypatch.setattr(availability, 'count', counted.append)
    getattr(manager, task)(CTX)
    assert call in calls and len(counted) == 1
