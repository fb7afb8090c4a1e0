"""Scenarios for the inventory API on a SQLite file."""

import datetime

from oslo_utils import timeutils
import pytest
import sqlalchemy as sa

from scheduler import conf
from scheduler.db import api
from scheduler.db import migration
from scheduler import exception
from scheduler import objects

CONF = conf.CONF

T0 = datetime.datetime(2025, 3, 1, 12, 0, 0, 123456)
UUID1 = '8a2f1a8e-3b7c-4c1e-9a57-0d3c5c1e0a01'
UUID2 = '8a2f1a8e-3b7c-4c1e-9a57-0d3c5c1e0a02'


@pytest.fixture(autouse=True)
def sqlite_inventory(tmp_path):
    """A migrated SQLite inventory in a directory that does not exist yet."""
    path = tmp_path / 'state' / 'scheduler.sqlite'
    CONF.set_override('connection', f'sqlite:///{path}', group='database')
    api.reset_engine()
    migration.db_sync()
    yield path
    api.reset_engine()
    CONF.clear_override('connection', group='database')


def _count(table: str) -> int:
    with api.get_engine().connect() as conn:
        return conn.execute(sa.text(f'SELECT COUNT(*) FROM {table}')).scalar()


def _report(host, nodename, updated_at=T0, **data):
    return {
        'host': host,
        'nodename': nodename,
        'uuid': data.pop('uuid', None),
        'disabled': data.pop('disabled', False),
        'updated_at': updated_at,
        'report': {'host': host, 'nodename': nodename, **data},
    }


def _many_reports(count, updated_at, free_ram_mb):
    return [_report('compute%04d' % (i // 4), 'node%05d' % i,
                    updated_at=updated_at, free_ram_mb=free_ram_mb + i,
                    uuid='00000000-0000-4000-8000-%012d' % i)
            for i in range(count)]


class TestEngine:

    def test_sqlite_directory_is_created(self, sqlite_inventory):
        assert sqlite_inventory.exists()
        assert api.get_engine().url.database == str(sqlite_inventory)

    def test_one_engine_until_reset(self):
        engine = api.get_engine()
        assert api.get_engine() is engine
        api.reset_engine()
        assert api.get_engine() is not engine

    def test_foreign_keys_are_enforced_on_sqlite(self):
        with api.get_engine().connect() as conn:
            assert conn.execute(sa.text('PRAGMA foreign_keys')).scalar() == 1

    def test_no_connection_configured(self):
        api.reset_engine()
        CONF.set_override('connection', '', group='database')
        with pytest.raises(exception.ConfigurationError):
            api.host_reports_get_all()


class TestHostReports:

    def test_a_host_state_primitive_round_trips(self):
        state = objects.HostState(host='cmp1', nodename='cmp1.local',
                                  uuid=UUID1, memory_mb=8192, local_gb=100,
                                  vcpus=8, instance_uuids=[UUID2])
        state.set_defaults()
        primitive = state.obj_to_primitive()

        api.host_reports_save([{
            'host': 'cmp1', 'nodename': 'cmp1.local', 'uuid': UUID1,
            'report': primitive, 'disabled': False, 'updated_at': T0}])

        [stored] = api.host_reports_get_all()
        assert stored['report'] == primitive
        back = objects.HostState.obj_from_primitive(stored['report'])
        assert back.instance_uuids == [UUID2]
        assert stored['uuid'] == UUID1
        assert stored['updated_at'] == T0
        assert stored['created_at'] is not None

    def test_newer_report_replaces_and_keeps_identity(self):
        api.host_reports_save([_report('cmp1', 'n1', free_ram_mb=100)])
        [first] = api.host_reports_get_all()

        later = T0 + datetime.timedelta(seconds=60)
        api.host_reports_save([_report('cmp1', 'n1', updated_at=later,
                                       free_ram_mb=50, disabled=True)])

        [second] = api.host_reports_get_all()
        assert second['report']['free_ram_mb'] == 50
        assert second['disabled'] is True
        assert second['updated_at'] == later
        assert second['id'] == first['id']
        assert second['created_at'] == first['created_at']

    def test_a_new_node_saved_with_changed_ones_takes_a_fresh_id(self):
        # A newcomer listed before a changed node once took the id just
        # freed by deleting the changed node's row (SQLite reuses the
        # highest rowid), and the re-insert of that row then failed on
        # the primary key: the inventory stopped saving for good.
        api.host_reports_save([_report('cmp1', 'n1'), _report('cmp2', 'n2')])
        ids = {r['host']: r['id'] for r in api.host_reports_get_all()}
        later = T0 + datetime.timedelta(seconds=60)
        api.host_reports_save([_report('new', 'n3', updated_at=later),
                               _report('cmp2', 'n2', updated_at=later)])
        rows = {r['host']: r for r in api.host_reports_get_all()}
        assert sorted(rows) == ['cmp1', 'cmp2', 'new']
        assert rows['cmp2']['id'] == ids['cmp2']
        assert rows['new']['id'] not in ids.values()

    def test_older_report_never_replaces_a_newer_one(self):
        later = T0 + datetime.timedelta(seconds=60)
        api.host_reports_save([_report('cmp1', 'n1', updated_at=later,
                                       free_ram_mb=50)])
        api.host_reports_save([_report('cmp1', 'n1', free_ram_mb=100)])

        [stored] = api.host_reports_get_all()
        assert stored['report']['free_ram_mb'] == 50

    def test_same_node_twice_in_one_call_keeps_the_newest(self):
        later = T0 + datetime.timedelta(seconds=5)
        api.host_reports_save([
            _report('cmp1', 'n1', updated_at=later, free_ram_mb=2),
            _report('cmp1', 'n1', free_ram_mb=1),
        ])
        [stored] = api.host_reports_get_all()
        assert stored['report']['free_ram_mb'] == 2

    def test_aware_timestamps_are_stored_as_naive_utc(self):
        plus_two = datetime.timezone(datetime.timedelta(hours=2))
        aware = datetime.datetime(2025, 3, 1, 14, 0, tzinfo=plus_two)
        api.host_reports_save([_report('cmp1', 'n1', updated_at=aware)])
        [stored] = api.host_reports_get_all()
        assert stored['updated_at'] == datetime.datetime(2025, 3, 1, 12, 0)

    def test_missing_timestamp_means_now(self):
        before = timeutils.utcnow()
        api.host_reports_save([_report('cmp1', 'n1', updated_at=None)])
        [stored] = api.host_reports_get_all()
        assert stored['updated_at'] >= before.replace(microsecond=0)

    def test_nothing_to_save(self):
        api.host_reports_save([])
        assert api.host_reports_get_all() == []

    def test_reports_come_back_sorted_by_host_and_node(self):
        api.host_reports_save([_report('b', 'n2'), _report('b', 'n1'),
                               _report('a', 'n9')])
        keys = [(r['host'], r['nodename'])
                for r in api.host_reports_get_all()]
        assert keys == [('a', 'n9'), ('b', 'n1'), ('b', 'n2')]

    def test_ten_thousand_nodes_inserted_then_updated(self):
        api.host_reports_save(_many_reports(10000, T0, free_ram_mb=0))
        inserted = api.host_reports_get_all()
        assert len(inserted) == 10000
        ids = {(r['host'], r['nodename']): r['id'] for r in inserted}

        later = T0 + datetime.timedelta(minutes=1)
        batch = _many_reports(10000, later, free_ram_mb=1000000)
        batch.append(_report('new-host', 'new-node', updated_at=later))
        api.host_reports_save(batch)

        updated = api.host_reports_get_all()
        assert len(updated) == 10001
        assert _count('hosts') == 10001
        for row in updated:
            if row['host'] == 'new-host':
                continue
            index = int(row['nodename'][4:])
            assert row['id'] == ids[(row['host'], row['nodename'])]
            assert row['report']['free_ram_mb'] == 1000000 + index
            assert row['uuid'].endswith('%012d' % index)
            assert row['updated_at'] == later
            assert row['created_at'] is not None

    def test_delete_one_node_then_the_whole_host(self):
        api.host_reports_save([_report('cmp1', 'n1'), _report('cmp1', 'n2'),
                               _report('cmp2', 'n1')])

        assert api.host_delete('cmp1', 'n2') == 1
        assert api.host_delete('cmp1', 'n2') == 0
        api.host_reports_save([_report('cmp1', 'n3')])
        assert api.host_delete('cmp1') == 2
        assert api.host_delete('unknown') == 0

        assert [(r['host'], r['nodename'])
                for r in api.host_reports_get_all()] == [('cmp2', 'n1')]


class TestAggregates:

    def test_create_with_zone_and_metadata(self):
        agg = api.aggregate_create('rack1', availability_zone='az1',
                                   metadata={'ssd': 'true'}, uuid=UUID1)

        assert agg['uuid'] == UUID1
        assert agg['name'] == 'rack1'
        assert agg['hosts'] == []
        assert agg['metadata'] == {'ssd': 'true', 'availability_zone': 'az1'}
        assert agg['availability_zone'] == 'az1'
        assert agg['created_at'] is not None
        assert api.aggregate_get(agg['id']) == agg

    def test_create_generates_a_uuid_and_needs_no_zone(self):
        agg = api.aggregate_create('rack1')
        assert len(agg['uuid']) == 36
        assert agg['availability_zone'] is None
        assert agg['metadata'] == {}

    def test_names_are_unique(self):
        api.aggregate_create('rack1')
        with pytest.raises(exception.AggregateNameExists):
            api.aggregate_create('rack1')

    def test_get_by_id_uuid_name_or_digits(self):
        agg = api.aggregate_create('rack1', uuid=UUID1)
        for ident in (agg['id'], str(agg['id']), UUID1, 'rack1'):
            assert api.aggregate_get(ident)['uuid'] == UUID1

    def test_a_name_made_of_digits_wins_over_an_id(self):
        first = api.aggregate_create('first')
        named = api.aggregate_create(str(first['id']))
        assert api.aggregate_get(str(first['id']))['id'] == named['id']
        assert api.aggregate_get(first['id'])['id'] == first['id']

    @pytest.mark.parametrize('ident', [42, '42', UUID2, 'nope', True])
    def test_get_unknown(self, ident):
        api.aggregate_create('rack1', uuid=UUID1)
        with pytest.raises(exception.AggregateNotFound):
            api.aggregate_get(ident)

    def test_get_all_sorted_by_name(self):
        api.aggregate_create('b', metadata={'k': 'v'})
        api.aggregate_create('a', availability_zone='az')
        aggs = api.aggregate_get_all()
        assert [a['name'] for a in aggs] == ['a', 'b']
        assert aggs[0]['availability_zone'] == 'az'
        assert aggs[1]['metadata'] == {'k': 'v'}

    def test_update_name_and_zone(self):
        agg = api.aggregate_create('rack1', availability_zone='az1')

        renamed = api.aggregate_update(agg['id'], name='rack2')
        assert renamed['name'] == 'rack2'
        assert renamed['availability_zone'] == 'az1'
        assert renamed['updated_at'] >= agg['updated_at']

        moved = api.aggregate_update('rack2', availability_zone='az2')
        assert moved['availability_zone'] == 'az2'
        assert moved['name'] == 'rack2'

        zoneless = api.aggregate_update('rack2', availability_zone=None)
        assert zoneless['availability_zone'] is None
        assert zoneless['metadata'] == {}

        assert api.aggregate_update('rack2', name='rack2')['name'] == 'rack2'

    def test_update_to_a_taken_name(self):
        api.aggregate_create('rack1')
        api.aggregate_create('rack2')
        with pytest.raises(exception.AggregateNameExists):
            api.aggregate_update('rack2', name='rack1')
        assert api.aggregate_get('rack2')['name'] == 'rack2'

    def test_metadata_set_and_unset(self):
        api.aggregate_create('rack1', metadata={'a': '1', 'b': '2'})

        agg = api.aggregate_metadata_set('rack1', {'a': '10', 'c': 3,
                                                   'b': None})
        assert agg['metadata'] == {'a': '10', 'c': '3'}

        agg = api.aggregate_metadata_set(
            'rack1', {'availability_zone': 'az9'})
        assert agg['availability_zone'] == 'az9'

        agg = api.aggregate_metadata_unset(
            'rack1', ['a', 'availability_zone', 'never-set'])
        assert agg['metadata'] == {'c': '3'}
        assert agg['availability_zone'] is None
        assert _count('aggregate_metadata') == 1

    def test_hosts_add_and_remove(self):
        api.aggregate_create('rack1', uuid=UUID1)

        api.aggregate_host_add('rack1', 'cmp2')
        agg = api.aggregate_host_add(UUID1, 'cmp1')
        assert agg['hosts'] == ['cmp1', 'cmp2']

        with pytest.raises(exception.AggregateHostExists):
            api.aggregate_host_add('rack1', 'cmp1')

        agg = api.aggregate_host_remove('rack1', 'cmp2')
        assert agg['hosts'] == ['cmp1']
        with pytest.raises(exception.AggregateHostNotFound):
            api.aggregate_host_remove('rack1', 'cmp2')

    def test_a_host_may_be_in_several_aggregates(self):
        api.aggregate_create('rack1')
        api.aggregate_create('ssd')
        api.aggregate_host_add('rack1', 'cmp1')
        api.aggregate_host_add('ssd', 'cmp1')
        assert [a['hosts'] for a in api.aggregate_get_all()] == [
            ['cmp1'], ['cmp1']]

    def test_delete_cascades_to_hosts_and_metadata(self):
        agg = api.aggregate_create('rack1', availability_zone='az1',
                                   uuid=UUID1)
        api.aggregate_host_add('rack1', 'cmp1')
        api.aggregate_create('other', metadata={'k': 'v'})

        api.aggregate_delete(UUID1)

        with pytest.raises(exception.AggregateNotFound):
            api.aggregate_get(agg['id'])
        assert _count('aggregate_hosts') == 0
        assert _count('aggregate_metadata') == 1
        with pytest.raises(exception.AggregateNotFound):
            api.aggregate_delete(UUID1)

    def test_delete_by_name_and_by_id(self):
        agg = api.aggregate_create('rack1')
        api.aggregate_create('rack2')
        api.aggregate_delete('rack2')
        api.aggregate_delete(agg['id'])
        assert api.aggregate_get_all() == []

    @pytest.mark.parametrize('call', [
        lambda: api.aggregate_update('nope', name='x'),
        lambda: api.aggregate_metadata_set('nope', {'k': 'v'}),
        lambda: api.aggregate_metadata_unset('nope', ['k']),
        lambda: api.aggregate_host_add('nope', 'cmp1'),
        lambda: api.aggregate_host_remove('nope', 'cmp1'),
        lambda: api.aggregate_delete('nope'),
    ])
    def test_unknown_aggregate_everywhere(self, call):
        with pytest.raises(exception.AggregateNotFound):
            call()

    def test_upsert_creates_then_replaces_by_uuid(self):
        created = api.aggregate_upsert({
            'uuid': UUID1, 'name': 'rack1', 'hosts': ['cmp2', 'cmp1'],
            'metadata': {'ssd': 'true'}, 'availability_zone': 'az1'})
        assert created['uuid'] == UUID1
        assert created['hosts'] == ['cmp1', 'cmp2']
        assert created['metadata'] == {'ssd': 'true',
                                       'availability_zone': 'az1'}

        replaced = api.aggregate_upsert({
            'uuid': UUID1, 'name': 'rack-one', 'hosts': ['cmp1', 'cmp3'],
            'metadata': {'gpu': 'yes'}})
        assert replaced['id'] == created['id']
        assert replaced['name'] == 'rack-one'
        assert replaced['hosts'] == ['cmp1', 'cmp3']
        assert replaced['metadata'] == {'gpu': 'yes'}
        assert replaced['availability_zone'] is None
        assert replaced['created_at'] == created['created_at']
        assert _count('aggregate_hosts') == 2
        assert _count('aggregate_metadata') == 1

    def test_upsert_finds_by_name_and_takes_the_given_uuid(self):
        local = api.aggregate_create('rack1', availability_zone='az1')
        agg = api.aggregate_upsert({'uuid': UUID2, 'name': 'rack1',
                                    'hosts': ['cmp1'],
                                    'metadata': {'availability_zone': 'az1'}})
        assert agg['id'] == local['id']
        assert agg['uuid'] == UUID2
        assert agg['hosts'] == ['cmp1']

    def test_upsert_without_uuid(self):
        first = api.aggregate_upsert({'name': 'rack1'})
        again = api.aggregate_upsert({'name': 'rack1', 'hosts': ['cmp1']})
        assert again['uuid'] == first['uuid']
        assert again['hosts'] == ['cmp1']

    def test_upsert_round_trips_what_get_returns(self):
        api.aggregate_create('rack1', availability_zone='az1',
                             metadata={'k': 'v'})
        api.aggregate_host_add('rack1', 'cmp1')
        agg = api.aggregate_get('rack1')
        again = api.aggregate_upsert(agg)
        assert {k: again[k] for k in ('id', 'uuid', 'name', 'hosts',
                                      'metadata', 'availability_zone')} == {
            k: agg[k] for k in ('id', 'uuid', 'name', 'hosts', 'metadata',
                                'availability_zone')}

    def test_upsert_of_a_big_membership_keeps_the_rows_that_stay(self):
        # More hosts than one statement may list (the IN and INSERT
        # chunks), changed at both ends.
        hosts = ['cmp%05d' % i for i in range(2500)]
        first = api.aggregate_upsert({'uuid': UUID1, 'name': 'zone',
                                      'hosts': hosts})
        assert first['hosts'] == hosts
        ids = _host_row_ids()
        again = api.aggregate_upsert({'uuid': UUID1, 'name': 'zone',
                                      'hosts': hosts[1200:] + ['new']})
        assert again['hosts'] == sorted(hosts[1200:] + ['new'])
        assert api.aggregate_get_all()[0]['hosts'] == again['hosts']
        kept = _host_row_ids()
        stayed = hosts[1200:]
        assert [kept[h] for h in stayed] == [ids[h] for h in stayed]
        assert _count('aggregate_hosts') == 1301

    def test_upsert_refuses_a_name_held_by_another_aggregate(self):
        api.aggregate_create('rack1', uuid=UUID1)
        api.aggregate_create('rack2', uuid=UUID2)
        with pytest.raises(exception.AggregateNameExists):
            api.aggregate_upsert({'uuid': UUID2, 'name': 'rack1'})
        assert api.aggregate_get(UUID2)['name'] == 'rack2'


def _host_row_ids() -> dict:
    with api.get_engine().connect() as conn:
        return dict(conn.execute(sa.text(
            'SELECT host, id FROM aggregate_hosts')).all())


def test_the_aggregates_stamp_changes_with_every_aggregate_write():
    stamps = [api.aggregates_stamp()]

    def changed():
        stamps.append(api.aggregates_stamp())
        return stamps[-1] != stamps[-2]

    agg = api.aggregate_create('stamp-1', availability_zone='az1')
    assert changed()
    api.aggregate_host_add(agg['id'], 'h1')
    assert changed()
    api.aggregate_metadata_set(agg['id'], {'k': 'v'})
    assert changed()
    api.aggregate_host_remove(agg['id'], 'h1')
    assert changed()
    api.aggregate_delete(agg['id'])
    assert changed()
    assert api.aggregates_stamp() == stamps[-1], 'reading changes nothing'


def test_a_sqlite_file_keeps_its_connections_with_their_settings():
    engine = api.get_engine()
    with engine.connect() as conn:
        first = conn.connection.dbapi_connection
    with engine.connect() as conn:
        # The same connection again: no reconnect (and PRAGMAs) per
        # transaction.
        assert conn.connection.dbapi_connection is first
        pragmas = [conn.exec_driver_sql('PRAGMA %s' % name).scalar()
                   for name in ('foreign_keys', 'journal_mode',
                                'busy_timeout')]
    # oslo.db's foreign keys and our WAL and busy timeout, all kept.
    assert pragmas == [1, 'wal', 30000]
