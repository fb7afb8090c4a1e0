"""Liveness messages (API 1.6): a quiet compute names the digest of its
last full report instead of sending it again."""

import json
import logging

import oslo_messaging
import pytest

from scheduler import context
from scheduler.drivers import filter_scheduler
from scheduler import host_manager
from scheduler import host_view
from scheduler import manager as manager_mod
from scheduler import node_reports
from scheduler import objects
from scheduler import rejections
from scheduler.objects import host_state as host_state_obj
from scheduler import report_backlog
from scheduler.resources import liveness
from scheduler import rpc
from scheduler import rpcapi
from tests.unit import fixtures

CTX = context.get_admin_context()


@pytest.fixture(autouse=True)
def liveness_on(conf):
    """Computes of these tests send liveness messages (off by default)."""
    conf.config(report_liveness=True, group='scheduler')


def rich_report(host='h1', **changes):
    """A report with every kind of value a digest must see alike."""
    values = dict(
        cpu_allocation_ratio=16.0, ram_allocation_ratio=1.5,
        host_ip='10.0.0.3', metrics={'cpu.percent': 0.25, 'load': 3.0},
        stats={'num_os_type_linux': '2'}, cpu_info={'arch': 'x86_64'},
        supported_instances=[['x86_64', 'kvm', 'hvm']],
        pci_pools=[objects.PciDevicePool(vendor_id='8086',
                                         product_id='1520', numa_node=0,
                                         count=4)],
        numa_topology=objects.NUMATopology(cells=[
            objects.NUMACell(id=0, cpuset={0, 1, 2, 3}, memory=2048)]),
        instance_uuids=[fixtures.uuid(1)],
        instance_image_properties={'os_type=linux': 1})
    values.update(changes)
    return fixtures.report(host, **values).set_defaults()


def _over_the_wire(state):
    ser = rpc.RequestContextSerializer()
    wire = json.loads(json.dumps(ser.serialize_entity(CTX, state)))
    return rpc.ServerSerializer().deserialize_entity(CTX, wire)


# --- the stored form ---------------------------------------------------------

def _alike(primitive):
    """``primitive`` with every list of changed fields, nested objects'
    too, in one order (oslo lists them in a set's order, which differs
    between processes)."""
    if isinstance(primitive, list):
        return [_alike(item) for item in primitive]
    if not isinstance(primitive, dict):
        return primitive
    return {key: (sorted(value) if key == 'versioned_object.changes'
                  else _alike(value))
            for key, value in primitive.items()}


_STORED = {
    'rich': rich_report,
    'plain': lambda: fixtures.report('h2'),
    'nulls': lambda: rich_report(numa_topology=None,
                                 disk_available_least=None, cell_uuid=None,
                                 host_ip=None)}


@pytest.mark.parametrize('kind', sorted(_STORED))
def test_the_stored_report_of_a_view_is_the_objects_primitive(kind):
    state = _STORED[kind]()
    view = host_view.HostView(_over_the_wire(state))
    # A copy that claims were laid over stores the compute's report.
    claimed = view.copy()
    claimed.memory_mb_used += 1024
    for made in (view, claimed):
        stored = made.report_primitive()
        assert _alike(stored) == _alike(made.report.obj_to_primitive())
        assert json.loads(json.dumps(stored)) == json.loads(json.dumps(
            report_backlog.report_row(made, report_backlog.stored_time())[
                'report']))
        back = objects.HostState.obj_from_primitive(
            json.loads(json.dumps(stored)))
        assert host_state_obj.content_digest(back) == \
            host_state_obj.content_digest(state)


# --- the digest -------------------------------------------------------------

def test_the_digest_is_alike_on_the_wire_in_a_view_and_in_the_inventory():
    state = rich_report()
    digest = host_state_obj.content_digest(state)
    view = host_view.HostView(_over_the_wire(state))
    row = report_backlog.report_row(view, report_backlog.stored_time())
    row.update(report=json.loads(json.dumps(row['report'])), changed_seq=1)
    stored = node_reports.stored_view(row)
    version = objects.HostState.VERSION
    assert digest.startswith(version + ':')
    assert view.content_digest(version) == digest
    assert stored.content_digest(version) == digest
    assert stored.successor().content_digest(version) == digest
    # At an older version: the fields that version has.
    assert (view.content_digest('1.0')
            == host_state_obj.content_digest(state, '1.0') != digest)


def test_the_digest_says_what_changed_but_not_when():
    digest = host_state_obj.content_digest(rich_report())
    later = rich_report()
    later.updated_at = later.updated_at.replace(year=2030)
    assert host_state_obj.content_digest(later) == digest
    for change in ({'memory_mb_used': 512}, {'metrics': {'load': 1.0}},
                   {'instance_uuids': []}, {'disabled': True}):
        assert host_state_obj.content_digest(rich_report(**change)) != digest
    with pytest.raises(ValueError):
        host_state_obj.content_digest(rich_report(), '9.0')


# --- the host manager -------------------------------------------------------

@pytest.fixture
def clock():
    now = [1000000.0]
    liveness.set_clock(lambda: now[0])
    yield now
    liveness.set_clock(None)


def _digest(report):
    return host_state_obj.content_digest(report)


def test_a_matching_digest_renews_the_node_and_writes_only_its_time(clock):
    report = rich_report()
    hm = fixtures.manager_with([report])
    hm.flush()
    seen = hm.get_host_state('h1').received_at
    clock[0] += 30
    assert hm.take_alive([(('h1', 'h1'), _digest(report))]) == []
    assert hm.get_host_state('h1').received_at == seen + 30
    assert hm._backlog.touched == {('h1', 'h1')}
    assert not hm._backlog.dirty


def test_another_digest_an_unknown_node_or_a_down_one_want_the_report(
        clock, conf):
    report = rich_report()
    hm = fixtures.manager_with([report, rich_report('h2')])
    seen = hm.get_host_state('h1').received_at
    wanted = hm.take_alive([
        (('h1', 'h1'), _digest(rich_report(memory_mb_used=512))),
        (('h3', 'h3'), _digest(report)),
        (('h1', 'h1'), '9.9:abc')])
    assert wanted == [('h1', 'h1'), ('h3', 'h3'), ('h1', 'h1')]
    assert hm.get_host_state('h1').received_at == seen
    clock[0] += conf.conf.scheduler.service_down_time + 1
    assert ('h2', 'h2') in hm.check_down_hosts()
    assert hm.take_alive([(('h2', 'h2'), _digest(rich_report('h2')))]) \
        == [('h2', 'h2')]
    assert hm._reports.is_down(('h2', 'h2'))


def test_a_report_another_worker_took_is_read_before_it_is_asked_for(clock):
    url = 'sqlite:///%s' % 'file::memory:?cache=shared&uri=true'
    first = fixtures.manager_with([], url=url)
    other = host_manager.HostManager(inventory=first.db)
    first._writer.window = 0.0
    report = rich_report()
    first.update_from_report(report, shared=True)
    assert other.take_alive([(('h1', 'h1'), _digest(report))]) == []
    assert other.get_host_state('h1').memory_mb == report.memory_mb


def test_a_worker_that_misses_one_node_learns_the_whole_new_fleet(clock):
    url = 'sqlite:///%s' % 'file::memory:?cache=shared&uri=true'
    first = fixtures.manager_with([], url=url)
    other = host_manager.HostManager(inventory=first.db)
    first._writer.window = 0.0
    reports = [rich_report('h%d' % n) for n in range(5)]
    for report in reports:
        first.update_from_report(report, shared=True)
    # The other worker serves no request: the first liveness it takes
    # reads what changed for every node, not for that one only ...
    assert other.take_alive([(('h0', 'h0'), _digest(reports[0]))]) == []
    assert sorted(other._usage_cache.rows) == [
        ('h%d' % n, 'h%d' % n) for n in range(5)]
    # ... so the next nodes' liveness is renewed without a read.
    other.refresh_nodes = other.refresh_usage = None
    assert other.take_alive([(('h%d' % n, 'h%d' % n), _digest(report))
                             for n, report in enumerate(reports)]) == []


# --- the endpoint -----------------------------------------------------------

class _Computes:
    def __init__(self):
        self.asked = []

    def send_report(self, ctxt, host, node):
        self.asked.append((host, node))


def _manager(reports):
    hosts = fixtures.manager_with(reports)
    # As the periodic flush does: the reports' usage is written.
    hosts.flush()
    driver = filter_scheduler.FilterScheduler(hosts)
    driver.compute_rpcapi = _Computes()
    return manager_mod.SchedulerManager(driver=driver)


def test_the_endpoint_renews_and_asks_once_an_interval_for_the_rest(clock):
    report = rich_report()
    manager = _manager([report])
    hm = manager.driver.host_manager
    seen = hm.get_host_state('h1').received_at
    clock[0] += 5
    for _ in range(3):
        manager.alive.report_alive(
            CTX, nodes=[['h1', 'h1', _digest(report)],
                        ['h9', 'h9', _digest(report)]],
            sent_at=clock[0] - 1, service='newer argument')
    assert hm.get_host_state('h1').received_at == seen + 5
    # Asked once, not at every message.
    assert manager.driver.compute_rpcapi.asked == [('h9', 'h9')]
    assert manager.reports.lag.current(60) == pytest.approx(1.0)


@pytest.mark.parametrize('nodes', [
    None, [], 'h1', [['h1', 'h1']], [['bad host!', 'h1', 'd']],
    [['h1', 'h1', 7]], [['h1', 'h1', 'x' * 200]]])
def test_malformed_liveness_is_refused_with_a_warning(nodes, caplog,
                                                      monkeypatch):
    monkeypatch.setattr(rejections, '_limiter', rejections._Limiter())
    manager = _manager([rich_report()])
    manager.alive.report_alive(CTX, nodes=nodes)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert manager.driver.compute_rpcapi.asked == []


def test_a_compute_speaks_only_for_its_own_hosts(clock, conf):
    conf.config(compute_users={'rack7': 'rack7-*'}, group='trust')
    mine, theirs = rich_report('rack7-1'), rich_report('rack8-1')
    manager = _manager([mine, theirs])
    hm = manager.driver.host_manager
    seen = {h.host: h.received_at for h in hm.get_all_host_states()}
    clock[0] += 5
    ctxt = context.RequestContext(user_id='u', project_id='p')
    ctxt.sender = 'rack7'
    manager.alive.report_alive(ctxt, nodes=[
        ['rack7-1', 'rack7-1', _digest(mine)],
        ['rack8-1', 'rack8-1', _digest(theirs)]])
    assert hm.get_host_state('rack7-1').received_at == seen['rack7-1'] + 5
    assert hm.get_host_state('rack8-1').received_at == seen['rack8-1']


def test_a_message_off_the_bus_asks_with_its_own_context(
        clock, conf, caplog, monkeypatch):
    # As the alive consumer serves it: the context deferred
    # (``context.Deferred``), built for the cast back to the compute and
    # for the log line of a refusal, with the message's request id.
    from oslo_context import context as oslo_context
    from scheduler import alive_consumer
    monkeypatch.setattr(rejections, '_limiter', rejections._Limiter())
    conf.config(compute_users={'rack7': 'rack7-*'}, group='trust')
    report = rich_report('rack7-1')
    manager = _manager([report])
    asked = []
    manager.driver.compute_rpcapi.send_report = (
        lambda ctxt, host, node: asked.append(
            (ctxt.to_dict()['request_id'], ctxt.sender, host)))

    class Message:
        def __init__(self, request_id, nodes):
            self.properties = {'user_id': 'rack7'}
            self.body = json.dumps({
                'oslo.version': '2.0', 'oslo.message': json.dumps({
                    'method': 'report_alive', 'version': '1.6',
                    'args': {'nodes': nodes},
                    '_context_request_id': request_id,
                    '_context_user': 'u'})}).encode()
    alive_consumer.serve(manager.alive, Message('req-1', [
        ['rack7-1', 'rack7-1', _digest(report)]]))
    assert asked == []
    alive_consumer.serve(manager.alive, Message('req-2', [
        ['rack7-9', 'rack7-9', _digest(report)]]))
    assert asked == [('req-2', 'rack7', 'rack7-9')]
    caplog.clear()
    alive_consumer.serve(manager.alive, Message('req-3', [
        ['rack8-1', 'rack8-1', _digest(report)]]))
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and 'rack8-1' in warnings[0].getMessage()
    assert oslo_context.get_current().request_id == 'req-3'


def test_a_batch_judges_each_sender_once_and_counts_at_its_end(
        clock, conf, monkeypatch):
    from scheduler import metrics
    from scheduler import trust
    conf.config(compute_users={'rack7': 'rack7-*'}, group='trust')
    reports = [rich_report('rack7-%d' % n) for n in range(3)]
    theirs = rich_report('rack8-1')
    manager = _manager(reports + [theirs])
    hm = manager.driver.host_manager
    judged, counted = [], []
    judge = trust.speaker_of
    monkeypatch.setattr(trust, 'speaker_of', lambda who, channel: (
        judged.append(who) or judge(who, channel)))
    monkeypatch.setattr(metrics, 'record_report',
                        lambda count=1: counted.append(count))

    def ctx(who):
        made = context.RequestContext()
        made.sender = who
        return made

    def alive(who, report):
        host = report.host
        manager.alive.report_alive(ctx(who), nodes=[
            [host, host, _digest(report)]], sent_at=clock[0])
    seen = hm.get_host_state('rack8-1').received_at
    clock[0] += 5
    with manager.alive.batch():
        for report in reports:
            alive('rack7', report)
        alive('rack7', theirs)
        alive('rack8', theirs)
        assert counted == []
    # Each sender judged once; each message trusted as alone.
    assert judged == ['rack7', 'rack8']
    assert counted == [3]
    assert hm.get_host_state('rack8-1').received_at == seen
    # The configuration of the next batch is the one of then.
    conf.config(compute_users={'rack7': 'rack7-*', 'rack8': 'rack8-*'},
                group='trust')
    with manager.alive.batch():
        alive('rack8', theirs)
    assert hm.get_host_state('rack8-1').received_at == seen + 5
    # Alone, as through the RPC server: counted at once.
    alive('rack7', reports[0])
    assert counted == [3, 1, 1]


# --- the client -------------------------------------------------------------

class _Recorder:
    """SchedulerAPI's casts, recorded instead of sent."""

    def __init__(self, api, monkeypatch, refuse_alive=False):
        self.sent = []
        monkeypatch.setattr(api, 'update_service_capabilities',
                            lambda ctxt, state: self.sent.append(
                                ('full', state.memory_mb_used)))

        def alive(ctxt, nodes):
            if refuse_alive:
                raise oslo_messaging.MessageDeliveryFailure('403')
            self.sent.append(('alive', nodes[0][2]))
        monkeypatch.setattr(api, 'report_alive', alive)


def test_the_client_sends_liveness_only_for_a_state_already_sent(
        conf, fake_transport, monkeypatch):
    conf.config(scheduler='1.6', group='upgrade_levels')
    api = rpcapi.SchedulerAPI(transport=fake_transport)
    sent = _Recorder(api, monkeypatch).sent
    state = rich_report()
    assert api.report(CTX, state) is False
    assert api.report(CTX, state) is True
    state.memory_mb_used = 512
    assert api.report(CTX, state) is False
    assert api.report(CTX, state) is True
    # A scheduler asked for it.
    api.want_full_report('h1', 'h1')
    assert api.report(CTX, state) is False
    assert [kind for kind, _ in sent] == ['full', 'alive', 'full', 'alive',
                                          'full']
    assert sent[3][1] == _digest(state)


def test_a_client_capped_below_1_6_sends_full_reports(
        conf, fake_transport, monkeypatch):
    conf.config(scheduler='1.5', group='upgrade_levels')
    api = rpcapi.SchedulerAPI(transport=fake_transport)
    sent = _Recorder(api, monkeypatch).sent
    for _ in range(3):
        api.report(CTX, rich_report())
    assert [kind for kind, _ in sent] == ['full'] * 3
    conf.config(scheduler='1.6', group='upgrade_levels')
    conf.config(report_intake=False, group='scheduler')
    api = rpcapi.SchedulerAPI(transport=fake_transport)
    sent = _Recorder(api, monkeypatch).sent
    for _ in range(2):
        api.report(CTX, rich_report())
    assert [kind for kind, _ in sent] == ['full'] * 2


def test_liveness_the_broker_refuses_goes_as_the_full_report(
        conf, fake_transport, monkeypatch, caplog):
    conf.config(scheduler='1.6', group='upgrade_levels')
    api = rpcapi.SchedulerAPI(transport=fake_transport)
    sent = _Recorder(api, monkeypatch, refuse_alive=True).sent
    with caplog.at_level(logging.WARNING, logger='scheduler.rpcapi'):
        for _ in range(3):
            api.report(CTX, rich_report())
    assert [kind for kind, _ in sent] == ['full'] * 3
    assert len([r for r in caplog.records
                if r.levelno == logging.WARNING]) == 1


def test_an_auto_cap_digests_at_the_schedulers_hoststate_version(
        conf, fake_transport, monkeypatch):
    api = rpcapi.SchedulerAPI(transport=fake_transport)
    monkeypatch.setattr(api, '_manifest_for_server',
                        lambda: {'HostState': '1.1'})
    assert api._report_version() == '1.1'


def test_the_quiet_nodes_of_many_go_in_one_message(
        conf, fake_transport, monkeypatch):
    conf.config(scheduler='1.6', group='upgrade_levels')
    api = rpcapi.SchedulerAPI(transport=fake_transport)
    messages = []
    monkeypatch.setattr(api, 'update_service_capabilities',
                        lambda ctxt, state: messages.append(state.host))
    monkeypatch.setattr(api, 'report_alive',
                        lambda ctxt, nodes: messages.append(
                            [node[0] for node in nodes]))
    states = [rich_report('h%d' % n) for n in range(3)]
    assert api.report_many(CTX, states) == 0
    states[1].memory_mb_used = 512
    assert api.report_many(CTX, states) == 2
    assert messages == ['h0', 'h1', 'h2', ['h0', 'h2'], 'h1']
