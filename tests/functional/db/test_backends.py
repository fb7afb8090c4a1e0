"""The inventory scenario on real PostgreSQL and MariaDB/MySQL servers.

SQLite forgives what the servers do not (lengths, strict SQL modes,
collations, foreign keys, microsecond timestamps); this runs the API
once end to end on each server.
"""

import datetime

from alembic import autogenerate
from alembic import migration as alembic_migration
import pytest
import sqlalchemy as sa

from scheduler import conf
from scheduler.db import api
from scheduler.db import engine
from scheduler.db import migration
from scheduler.db import models
from scheduler.db import usage
from scheduler import exception
from tests.unit.db import test_taken_casts
from tests.unit.db import test_usage

CONF = conf.CONF

T0 = datetime.datetime(2025, 3, 1, 12, 0, 0, 123456)


@pytest.fixture(params=['postgresql_url', 'mysql_url'])
def backend(request):
    url = request.getfixturevalue(request.param)
    CONF.set_override('connection', url, group='database')
    api.reset_engine()
    yield url
    api.reset_engine()
    CONF.clear_override('connection', group='database')


def _reports(count, updated_at, free_ram_mb):
    return [{
        'host': 'compute%03d' % (i // 2),
        'nodename': 'node%04d' % i,
        'uuid': '00000000-0000-4000-8000-%012d' % i,
        'disabled': i % 10 == 0,
        'updated_at': updated_at,
        'report': {'free_ram_mb': free_ram_mb + i, 'cpu_info': {'x': 'é'}},
    } for i in range(count)]


def _sync_and_check_schema():
    migration.db_sync()
    assert migration.db_version() == migration.head()
    with api.get_engine().connect() as conn:
        context = alembic_migration.MigrationContext.configure(
            conn, opts={'compare_type': True})
        assert autogenerate.compare_metadata(
            context, models.Base.metadata) == []


def _aggregates():
    rack = api.aggregate_create('rack1', availability_zone='az1',
                                metadata={'ssd': 'true'})
    api.aggregate_host_add(rack['uuid'], 'compute000')
    api.aggregate_host_add('rack1', 'compute001')
    with pytest.raises(exception.AggregateHostExists):
        api.aggregate_host_add('rack1', 'compute001')
    with pytest.raises(exception.AggregateNameExists):
        api.aggregate_create('rack1')
    # Names and hosts compare exactly, whatever the server's collation.
    api.aggregate_create('Rack1', metadata={'note': 'zürich ☃'})
    api.aggregate_metadata_set('rack1', {'ssd': None, 'gpu': 'yes'})

    rack = api.aggregate_get(rack['id'])
    assert rack['hosts'] == ['compute000', 'compute001']
    assert rack['metadata'] == {'availability_zone': 'az1', 'gpu': 'yes'}
    assert api.aggregate_get('Rack1')['metadata'] == {'note': 'zürich ☃'}

    cast = dict(rack, name='rack-one', hosts=['compute002'],
                metadata={'availability_zone': 'az2'},
                availability_zone='az2')
    upserted = api.aggregate_upsert(cast)
    assert (upserted['id'], upserted['name'], upserted['hosts']) == (
        rack['id'], 'rack-one', ['compute002'])
    assert upserted['availability_zone'] == 'az2'

    api.aggregate_delete('rack-one')
    assert [a['name'] for a in api.aggregate_get_all()] == ['Rack1']


def _host_reports():
    api.host_reports_save(_reports(1000, T0, free_ram_mb=0))
    first = {r['nodename']: r for r in api.host_reports_get_all()}
    later = T0 + datetime.timedelta(minutes=1)
    newcomer = dict(_reports(1, later, free_ram_mb=0)[0],
                    host='newcomer', nodename='newcomer')
    api.host_reports_save(_reports(1000, later, free_ram_mb=5000)
                          + [newcomer])
    api.host_reports_save(_reports(1000, T0, free_ram_mb=-1))

    stored = [row for row in api.host_reports_get_all()
              if row['host'] != 'newcomer']
    assert len(stored) == 1000
    for row in stored:
        index = int(row['nodename'][4:])
        assert row['id'] == first[row['nodename']]['id']
        assert row['report'] == {'free_ram_mb': 5000 + index,
                                 'cpu_info': {'x': 'é'}}
        assert row['disabled'] is (index % 10 == 0)
        assert row['updated_at'] == later
    assert first['node0000']['updated_at'] == T0
    # Quiet nodes: only their time moves, and never backwards.
    touched = later + datetime.timedelta(minutes=1)
    api.host_reports_touch([('compute001', 'node0002'),
                            ('compute001', 'node0003')], touched)
    api.host_reports_touch([('compute001', 'node0002')], T0)
    times = {r['nodename']: r['updated_at']
             for r in api.host_reports_get_all()}
    assert (times['node0002'], times['node0003'], times['node0004']) == (
        touched, touched, later)
    # The times of some nodes, read by key (an unknown one is left out).
    assert sorted((r['nodename'], r['updated_at'])
                  for r in api.host_report_times(
                      [('compute001', 'node0002'), ('compute001', 'node0003'),
                       ('compute001', 'nowhere')])) == [
        ('node0002', touched), ('node0003', touched)]
    assert api.host_delete('compute000') == 2
    assert api.host_delete('newcomer', 'newcomer') == 1
    assert len(api.host_reports_get_all()) == 998


def _claim_scenarios(module=test_usage):
    """Every claim-protocol scenario of the unit tests, on this server.

    Conditional UPDATEs, row locks, sequences and savepoints are where
    the backends differ; the scenarios run one after the other on the
    same database, emptied in between.  ``module``: the unit tests'
    module (the claims', or the taken casts' that claims renew).
    """
    for name in sorted(dir(module)):
        scenario = getattr(module, name)
        if not (name.startswith('test_') and callable(scenario)):
            continue
        if any(mark.name == 'xfail'
               for mark in getattr(scenario, 'pytestmark', ())):
            continue  # a known defect, its unit test says which
        with engine.transaction() as session:
            session.execute(sa.delete(models.Instance))
            session.execute(sa.delete(models.NodeUsage))
            session.execute(sa.delete(models.TakenCast))
            session.execute(sa.delete(models.ServerGroupLock))
        usage.apply_reports([test_usage._report()])
        try:
            scenario()
        except Exception as e:
            raise AssertionError('claim scenario %s failed on %s: %r'
                                 % (name, api.get_engine().dialect.name,
                                    e)) from e


def test_inventory_scenario(backend):
    _sync_and_check_schema()
    _aggregates()
    _host_reports()
    _claim_scenarios()
    _claim_scenarios(test_taken_casts)
