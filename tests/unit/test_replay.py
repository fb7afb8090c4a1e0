"""The what-if replay: trace recording and reading, replay, comparison,
report, demo and capacity, in process on SQLite."""

import json
import os
import re
import uuid

from oslo_config import cfg
import pytest

from scheduler import exception
from scheduler import objects
from scheduler.replay import capacity
from scheduler.replay import compare
from scheduler.replay import demo
from scheduler.replay import html
from scheduler.replay import snapshot
from scheduler.replay import trace

CONF = cfg.CONF
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def spec(mb=1024, vcpus=1, gb=10, name='small', project='project-a',
         zone=None, num=1) -> objects.RequestSpec:
    return objects.RequestSpec(
        flavor=objects.Flavor(flavorid=name, name=name, memory_mb=mb,
                              vcpus=vcpus, root_gb=gb, ephemeral_gb=0,
                              swap=0, extra_specs={}),
        project_id=project, user_id='user-a', num_instances=num,
        availability_zone=zone, image=objects.ImageMeta(properties={}))


def request_event(t, spec_obj, hosts=None, nvh=False) -> dict:
    uuids = [str(uuid.uuid4()) for _ in range(spec_obj.num_instances)]
    answer = ({'no_valid_host': 'none', 'filters': []} if nvh else
              {'hosts': [[h, h] for h in hosts]} if hosts else {})
    return {'kind': 'request', 't': t, 'spec': spec_obj.obj_to_primitive(),
            'instance_uuids': uuids, 'answer': answer, 'decision_s': 0.0}


def small_fleet(count=4, zones=('az1', 'az2')):
    """``count`` hosts per zone, each a little bigger than the one before
    (no two weigh the same, so no tie is broken at random)."""
    groups = []
    for z, zone in enumerate(zones):
        for n in range(count):
            groups.append({'prefix': 'h%s' % zone, 'count': 1,
                           'memory_mb': 8192 + 512 * (n + z * count),
                           'vcpus': 8, 'local_gb': 200,
                           'cpu_allocation_ratio': 1.0,
                           'ram_allocation_ratio': 1.0,
                           'disk_allocation_ratio': 1.0,
                           'availability_zone': zone})
    return snapshot.parse({'groups': groups}, source='test fleet')


def write_config(tmp_path, name, multiplier) -> str:
    path = tmp_path / ('%s.conf' % name)
    path.write_text('[filter_scheduler]\nhost_subset_size = 1\n'
                    'ram_weight_multiplier = %s\ncpu_weight_multiplier = %s\n'
                    'disk_weight_multiplier = %s\n'
                    'io_ops_weight_multiplier = 0.0\n'
                    % (multiplier, multiplier, multiplier))
    return str(path)


# -- the trace ----------------------------------------------------------

def recorder(tmp_path, **kwargs) -> trace.Recorder:
    values = dict(path=str(tmp_path / 'trace.jsonl'), max_bytes=1 << 20,
                  backup_count=2, clear=False, key=b'k', host='test')
    values.update(kwargs)
    return trace.Recorder(**values)


def test_recorder_hashes_project_ids_unless_asked_for_clear(tmp_path):
    rec = recorder(tmp_path)
    served = spec(project='tenant-secret')
    rec.request(served, ['u1'], error=exception.NoValidHost(reason='full'))
    rec.close()
    # The request being served keeps its ids.
    assert served.project_id == 'tenant-secret'
    assert served.user_id == 'user-a'
    assert 'user-a' not in (tmp_path / 'trace.jsonl').read_text()
    text = (tmp_path / 'trace.jsonl').read_text()
    assert 'tenant-secret' not in text
    [event] = trace.read([str(tmp_path / 'trace.jsonl')])
    hashed = trace.spec_of(event).project_id
    assert hashed == trace.hashed('tenant-secret', b'k')
    assert event['answer']['no_valid_host'] == 'full'

    clear = recorder(tmp_path, path=str(tmp_path / 'clear.jsonl'),
                     clear=True)
    clear.request(spec(project='tenant-secret'), ['u1'])
    clear.close()
    [event] = trace.read([str(tmp_path / 'clear.jsonl')])
    assert trace.spec_of(event).project_id == 'tenant-secret'


def test_recorder_rotates_and_keeps_the_disk_used_bounded(tmp_path):
    rec = recorder(tmp_path, max_bytes=4096, backup_count=2)
    for n in range(200):
        rec.release('host-%d' % n, str(uuid.uuid4()))
    rec.close()
    files = sorted(os.listdir(tmp_path))
    assert files == ['trace.jsonl', 'trace.jsonl.1', 'trace.jsonl.2']
    for name in files:
        assert os.path.getsize(tmp_path / name) <= 4096
    # Every file starts with its header, so each reads alone.
    events = trace.read([str(tmp_path / 'trace.jsonl*')])
    assert 0 < len(events) < 200
    assert events[-1]['host'] == 'host-199'


def test_a_trace_that_cannot_be_written_never_fails_a_request(tmp_path):
    blocker = tmp_path / 'file'
    blocker.write_text('')
    rec = recorder(tmp_path, path=str(blocker / 'trace.jsonl'))
    rec.request(spec(), ['u1'])
    assert rec.broken
    rec.request(spec(), ['u2'])   # stays quiet


def test_reading_merges_files_in_time_order_and_refuses_others(tmp_path):
    trace.write(str(tmp_path / 'a'), [request_event(3, spec()),
                                      request_event(1, spec())])
    trace.write(str(tmp_path / 'b'), [request_event(2, spec())])
    assert [e['t'] for e in trace.read([str(tmp_path / '*')])] == [1, 2, 3]
    (tmp_path / 'c').write_text('{"kind": "header", "format": "other"}\n')
    with pytest.raises(trace.TraceError, match='not a scheduler trace'):
        trace.read([str(tmp_path / 'c')])
    with pytest.raises(trace.TraceError, match='no such trace file'):
        trace.read([str(tmp_path / 'missing-*')])


def test_serving_records_only_when_enabled(tmp_path, conf):
    class Driver:
        def select_destinations(self, ctxt, spec_obj, uuids,
                                return_alternates=False, report=None):
            pass

    trace.reset()
    try:
        assert isinstance(trace.serving(Driver(), spec(), ['u']),
                          trace._NotServed)
        conf.config(enabled=True, path=str(tmp_path / 't.jsonl'),
                    group='trace')
        trace.reset()
        served = trace.serving(Driver(), spec(), ['u'])
        assert 'report' in served.kwargs
        served.refused(exception.NoValidHost(reason='full'))
        served.refused(RuntimeError('not an answer'))
        trace.recorder().close()
        [event] = trace.read([str(tmp_path / 't.jsonl')])
        assert event['instance_uuids'] == ['u']
        assert 'no_valid_host' in event['answer']
    finally:
        trace.reset()


def test_casts_are_recorded_per_instance_with_their_redeliveries(
        tmp_path, conf, monkeypatch):
    """``schedule_run_instance`` places one instance at a time: each is
    a request of the trace; a build no compute took is released there
    and placed again, and the replay follows it."""
    import oslo_messaging
    from scheduler import context
    from scheduler import driver as driver_mod
    from scheduler.drivers import filter_scheduler
    from tests.unit import fixtures

    class Computes:
        """The broker routes no cast to ``roomy``."""

        def __init__(self):
            self.casts = []

        def run_instance(self, context, host, node, instance_uuid,
                         spec_obj, limits=None):
            if host == 'roomy':
                raise oslo_messaging.MessageUndeliverable(
                    Exception('NO_ROUTE'), 'scheduler', host, {})
            self.casts.append((host, instance_uuid))

    monkeypatch.setattr(driver_mod.time, 'sleep', lambda seconds: None)
    conf.config(weight_classes=['RAMWeigher'],
                enabled_filters=fixtures.CORE_FILTERS,
                group='filter_scheduler')
    reports = [fixtures.report('roomy', memory_mb=1 << 16),
               fixtures.report('small', memory_mb=4096)]
    path = tmp_path / 'trace.jsonl'
    conf.config(enabled=True, path=str(path), group='trace')
    trace.reset()
    try:
        driver = filter_scheduler.FilterScheduler(
            fixtures.manager_with(reports))
        driver.compute_rpcapi = Computes()
        driver.schedule_run_instance(
            context.get_admin_context(), fixtures.request(num_instances=2),
            [fixtures.uuid(1), fixtures.uuid(2)])
        trace.recorder().close()
    finally:
        trace.reset()
    assert driver.compute_rpcapi.casts == [('small', fixtures.uuid(1)),
                                           ('small', fixtures.uuid(2))]
    events = trace.read([str(path)])
    assert [(e['kind'], e.get('instance_uuids') or e['instance_uuid'])
            for e in events] == [
        ('request', [fixtures.uuid(1)]), ('release', fixtures.uuid(1)),
        ('request', [fixtures.uuid(1)]),
        ('request', [fixtures.uuid(2)]), ('release', fixtures.uuid(2)),
        ('request', [fixtures.uuid(2)])]
    assert [e['answer']['hosts'][0][0] for e in events
            if e['kind'] == 'request'] == ['roomy', 'small'] * 2
    assert trace.spec_of(events[2]).ignore_hosts == ['roomy']
    # The same configuration replays it to the same placements.
    fleet = snapshot.Fleet([r.obj_clone() for r in reports], [])
    doc = compare.compare(fleet, events, [('same', None)], progress=None)
    assert doc['configs'][0]['same_as_recorded'] == {'requests': 4,
                                                     'same': 4}
    assert doc['configs'][0]['releases_unknown'] == 0


def test_placements_gone_without_a_deletion_are_recorded_released(
        tmp_path, conf):
    """A compute's full list that lacks an instance, and a claim that
    expires (never built): the replay must free them too."""
    import datetime

    from oslo_utils import timeutils
    import sqlalchemy as sa

    from scheduler import context
    from scheduler.db import engine
    from scheduler.db import models
    from scheduler.drivers import filter_scheduler
    from scheduler import manager as manager_mod
    from tests.unit import fixtures

    conf.config(service_down_time=60, group='scheduler')
    conf.config(enabled_filters=fixtures.CORE_FILTERS,
                group='filter_scheduler')
    path = tmp_path / 'trace.jsonl'
    conf.config(enabled=True, path=str(path), group='trace')
    ctxt = context.get_admin_context()
    trace.reset()
    try:
        driver = filter_scheduler.FilterScheduler(fixtures.manager_with(
            [fixtures.report('h1', memory_mb=8192)]))
        manager = manager_mod.SchedulerManager(driver=driver)
        for n in (1, 2):
            manager.select_destinations(
                ctxt, spec_obj=fixtures.request(memory_mb=1024),
                instance_uuids=[fixtures.uuid(n)])
        # Instance 1 is built and reported, then the compute no longer
        # lists it.
        manager.update_instance_info(ctxt, 'h1', [fixtures.uuid(1)])
        driver.host_manager.update_from_report(fixtures.report(
            'h1', memory_mb=8192, memory_mb_used=1024,
            instance_uuids=[fixtures.uuid(1)]))
        driver.host_manager.flush()
        manager.sync_instance_info(ctxt, 'h1', [])
        # Instance 2 is never built: its claim expires.
        with engine.transaction() as session:
            session.execute(sa.update(models.Instance).values(
                updated_at=timeutils.utcnow()
                - datetime.timedelta(seconds=61)))
        driver.host_manager.refresh_nodes([('h1', 'h1')])
        driver.host_manager.update_from_report(
            fixtures.report('h1', memory_mb=8192))
        manager._expire_claims(ctxt)
        trace.recorder().close()
    finally:
        trace.reset()
    events = trace.read([str(path)])
    assert [(e['kind'], e.get('host'), e.get('instance_uuid'))
            for e in events if e['kind'] == 'release'] == [
        ('release', 'h1', fixtures.uuid(1)),
        ('release', 'h1', fixtures.uuid(2))]


# -- replay and comparison ------------------------------------------------

def test_replay_is_repeatable_and_pack_uses_fewer_hosts(tmp_path):
    fleet = small_fleet()
    events = [request_event(n, spec()) for n in range(8)]
    spread = write_config(tmp_path, 'spread', 1.0)
    pack = write_config(tmp_path, 'pack', -1.0)
    doc = compare.compare(fleet, events, [('spread', spread),
                                          ('again', spread),
                                          ('pack', pack)], progress=None)
    by_name = {c['name']: c for c in doc['configs']}
    assert by_name['spread']['hosts_used'] >= 6
    assert by_name['pack']['hosts_used'] == 1
    assert by_name['pack']['placed'] == 8
    for row in doc['requests']:
        assert row['results']['spread']['hosts'] == \
            row['results']['again']['hosts']


def test_json_has_the_keys_the_issue_names(tmp_path):
    fleet = small_fleet(count=1)
    events = [request_event(0, spec()),
              request_event(1, spec(mb=10 ** 6), nvh=True)]
    doc = compare.compare(fleet, events, [('spread', write_config(
        tmp_path, 'spread', 1.0))], progress=None)
    assert {'configs', 'requests'} <= set(doc)
    [summary] = doc['configs']
    assert {'name', 'placed', 'no_valid_host', 'hosts_used', 'stranded',
            'per_filter_rejections'} <= set(summary)
    assert summary['placed'] == 1 and summary['no_valid_host'] == 1
    assert summary['per_filter_rejections']['RamFilter'] == 2
    assert summary['refusals_by_filter'] == {'RamFilter': 1}
    # The refusal is explained: which filter removed which host.
    refused = doc['requests'][1]['results']['spread']
    assert refused['hosts'] is None
    assert {r['filter'] for r in refused['explain']['rejected']} == \
        {'RamFilter'}
    json.dumps(doc)


def test_spread_counts_instances_per_zone_and_aggregate(tmp_path):
    fleet = snapshot.parse({'aggregates': {'ssd': {'disk': 'ssd'}},
                            'groups': [
        {'prefix': 'zoned', 'count': 1, 'memory_mb': 8192, 'vcpus': 8,
         'local_gb': 200, 'availability_zone': 'az1',
         'aggregates': ['ssd']},
        {'prefix': 'plain', 'count': 1, 'memory_mb': 16384, 'vcpus': 8,
         'local_gb': 200}]}, source='test fleet')
    events = [request_event(0, spec()),                 # the bigger host
              request_event(1, spec(zone='az1'))]
    doc = compare.compare(fleet, events, [('c', write_config(
        tmp_path, 'c', 1.0))], progress=None)
    spread = doc['configs'][0]['spread']
    # A host in no zone aggregate is in the default zone.
    assert spread['zones'] == {'az1': 1, CONF.default_availability_zone: 1}
    assert spread['aggregates'] == {'az1': 1, 'ssd': 1}


def test_a_release_frees_what_the_instance_held(tmp_path):
    fleet = small_fleet(count=1, zones=('az1',))
    big = spec(mb=8192, vcpus=4)
    first = request_event(0, big)
    events = [first, request_event(1, big),
              {'kind': 'release', 't': 2, 'host': None,
               'instance_uuid': first['instance_uuids'][0]},
              request_event(3, big)]
    doc = compare.compare(fleet, events, [('c', write_config(
        tmp_path, 'c', 1.0))], progress=None)
    assert [r['results']['c']['hosts'] for r in doc['requests']] == \
        [['haz1-001'], None, ['haz1-001']]
    assert doc['configs'][0]['releases'] == 1
    assert doc['configs'][0]['releases_unknown'] == 0


def test_stranded_counts_free_room_that_the_common_flavor_cannot_use(
        tmp_path):
    fleet = small_fleet(count=1, zones=('az1',))     # 8192 MB, 8 vCPU
    events = [request_event(0, spec(mb=6144, vcpus=1, name='odd')),
              request_event(1, spec(mb=4096, vcpus=1, name='common')),
              request_event(2, spec(mb=4096, vcpus=1, name='common'))]
    doc = compare.compare(fleet, events, [('c', write_config(
        tmp_path, 'c', 1.0))], progress=None)
    stranded = doc['configs'][0]['stranded']
    assert stranded['flavor'] == 'common'
    assert stranded['hosts'] == 1
    assert stranded['memory_mb'] == 2048 and stranded['vcpus'] == 7


def test_the_replay_leaves_the_configuration_as_it_was(tmp_path, conf):
    conf.config(service_down_time=77, group='scheduler')
    before = CONF.database.connection
    compare.compare(small_fleet(count=1), [request_event(0, spec())],
                    [('c', None)], progress=None)
    assert CONF.scheduler.service_down_time == 77
    assert CONF.database.connection == before


# -- the report ---------------------------------------------------------

def test_the_html_report_is_self_contained(tmp_path):
    events = [request_event(0, spec(name='</script><b>x'))]
    doc = compare.compare(small_fleet(count=1), events, [('c', None)],
                          progress=None)
    page = html.render(doc)
    assert '</script><b>' not in page
    assert not re.search(r'(src|href)\s*=\s*["\']?(https?:)?//', page)
    assert 'replay-data' in page and 'replay-plot' in page


# -- demo and shipped configurations -------------------------------------

def test_the_demo_configurations_are_the_shipped_files():
    for name, text in demo.CONFIGS.items():
        with open(os.path.join(ROOT, 'etc', 'replay', '%s.conf' % name),
                  encoding='utf-8') as f:
            assert f.read() == text


def test_the_demo_trace_is_seeded_and_readable(tmp_path):
    events = demo.trace_events(50, seed=3)
    assert events == demo.trace_events(50, seed=3)
    path = str(tmp_path / 'demo.jsonl')
    trace.write(path, events)
    assert len(trace.read([path])) == len(events)
    snapshot.parse(demo.fleet_document(20))


# -- capacity -------------------------------------------------------------

def test_capacity_places_until_no_valid_host_per_zone(tmp_path):
    fleet = small_fleet(count=2)       # 4 hosts of 8 vCPU, 2 zones
    rows = capacity.capacity(fleet, [('two', 1024, 2, 10, {})],
                             progress=None)
    fits = {r['zone']: r['fits'] for r in rows}
    assert fits == {'az1': 8, 'az2': 8, '*': 16}


def test_capacity_counts_hosts_in_no_zone_in_the_default_zone():
    fleet = snapshot.parse({'groups': [
        {'prefix': 'zoned', 'count': 1, 'memory_mb': 8192, 'vcpus': 8,
         'local_gb': 200, 'availability_zone': 'az1'},
        {'prefix': 'plain', 'count': 2, 'memory_mb': 8192, 'vcpus': 8,
         'local_gb': 200}]}, source='test fleet')
    rows = capacity.capacity(fleet, [('two', 1024, 2, 10, {})],
                             progress=None)
    default = CONF.default_availability_zone
    assert {r['zone']: r['fits'] for r in rows} == \
        {'az1': 8, default: 16, '*': 24}


def test_capacity_stops_at_the_limit():
    rows = capacity.capacity(small_fleet(count=1), [('t', 1, 1, 0, {})],
                             limit=5, progress=None)
    assert all(r['fits'] == 5 and r['at_least'] for r in rows)


def test_snapshot_of_the_inventory_replays_from_the_same_usage(inventory):
    from scheduler import host_manager
    fleet = small_fleet(count=1, zones=('az1',))
    manager = host_manager.HostManager()
    manager.update_aggregates(fleet.aggregates)
    manager.update_from_report(fleet.reports[0])
    manager.flush()
    view = manager.get_all_host_states()[0]
    manager.claim(view, spec(mb=2048, vcpus=2), 'pending-1')
    document = snapshot.take()
    assert document['instances']['pending-1'][2:] == [2048, 2, 10]
    [report] = snapshot.parse(document).reports
    # The claim not yet reported is in the snapshot's report.
    assert report.memory_mb_used == fleet.reports[0].memory_mb_used + 2048
    assert 'pending-1' in report.instance_uuids
