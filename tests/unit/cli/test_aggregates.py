"""``scheduler-manage aggregate ...`` against a real inventory.

The announcement to running schedulers is recorded instead of cast:
these tests check what is written and what would be announced.
"""

import os
import re
import subprocess
import sys

from oslo_utils import timeutils
import pytest

from scheduler.cli import aggregates as aggregates_cli
from tests.unit import cli
from tests.unit import fixtures


@pytest.fixture
def manage(monkeypatch, capsys, tmp_path):
    return cli.Manage(monkeypatch, capsys, tmp_path)


@pytest.fixture
def announced(monkeypatch):
    """What the commands announced: ``('changed'|'deleted', aggregate)``."""
    calls = []

    def record(changed=None, deleted=None):
        if changed is not None:
            calls.append(('changed', changed))
        if deleted is not None:
            calls.append(('deleted', deleted))

    monkeypatch.setattr(aggregates_cli, '_announce', record)
    return calls


@pytest.fixture
def reported(inventory):
    """h1, h2 and h3 have reported: the inventory knows them."""
    for host in ('h1', 'h2', 'h3'):
        report = fixtures.report(host)
        report.set_defaults()
        inventory.host_reports_save([{
            'host': host, 'nodename': host, 'uuid': report.obj_get('uuid'),
            'disabled': False, 'updated_at': timeutils.utcnow(),
            'report': report.obj_to_primitive()}])
    return inventory


@pytest.fixture
def rack(manage, reported, announced):
    """An aggregate ``rack1`` in zone az1 with h1, announced already."""
    result = manage('aggregate', 'create', 'rack1', '--zone', 'az1',
                    '--property', 'ssd=true', '--format', 'json')
    assert result.code == 0, result.err
    manage('aggregate', 'add-host', 'rack1', 'h1')
    announced.clear()
    return result.json()


def _json(manage, *argv) -> dict:
    result = manage(*argv, '--format', 'json')
    assert result.code == 0, result.err
    return result.json()


def test_create(manage, inventory, announced):
    agg = _json(manage, 'aggregate', 'create', 'rack1', '--zone', 'az1',
                '--property', 'ssd=true', '--property', 'gpu = no')
    assert sorted(agg) == sorted(
        aggregates_cli.COLUMNS + ['created_at', 'updated_at'])
    assert (agg['name'], agg['availability_zone'], agg['hosts']) == (
        'rack1', 'az1', [])
    assert agg['metadata'] == {'availability_zone': 'az1', 'ssd': 'true',
                               'gpu': 'no'}
    (what, sent), = announced
    assert what == 'changed'
    assert {k: sent[k] for k in aggregates_cli.COLUMNS} == {
        k: agg[k] for k in aggregates_cli.COLUMNS}
    assert inventory.aggregate_get('rack1')['uuid'] == agg['uuid']


def test_create_table(manage, inventory, announced):
    result = manage('aggregate', 'create', 'rack1')
    assert result.code == 0
    assert re.search(r'\| name +\| rack1 +\|', result.out)
    assert re.search(r'\| availability_zone +\| - +\|', result.out)


def test_create_a_name_in_use(manage, rack, announced):
    result = manage('aggregate', 'create', 'rack1')
    assert result.code == 1
    assert result.out == ''
    assert result.err == 'AggregateNameExists: Aggregate rack1 already ' \
                         'exists.\n'
    assert announced == []


def test_set_renames_rezones_and_sets_properties(manage, rack, announced):
    agg = _json(manage, 'aggregate', 'set', 'rack1', '--name', 'rack-one',
                '--zone', 'az2', '--property', 'ssd=false',
                '--property', 'pci=yes')
    assert (agg['name'], agg['availability_zone'], agg['hosts']) == (
        'rack-one', 'az2', ['h1'])
    assert agg['metadata'] == {'availability_zone': 'az2', 'ssd': 'false',
                               'pci': 'yes'}
    assert [(what, a['name']) for what, a in announced] == [
        ('changed', 'rack-one')]


def test_set_an_empty_zone_removes_it(manage, rack, announced):
    agg = _json(manage, 'aggregate', 'set', str(rack['id']), '--zone', '')
    assert agg['availability_zone'] is None
    assert 'availability_zone' not in agg['metadata']


def test_set_by_uuid(manage, rack, announced):
    agg = _json(manage, 'aggregate', 'set', rack['uuid'], '--property',
                'x=1')
    assert agg['metadata']['x'] == '1'


def test_unset(manage, rack, announced):
    agg = _json(manage, 'aggregate', 'unset', 'rack1', '--property', 'ssd',
                '--property', 'not-set')
    assert agg['metadata'] == {'availability_zone': 'az1'}
    assert len(announced) == 1


def test_unset_needs_a_property(manage, rack):
    with pytest.raises(SystemExit) as exit_info:
        manage('aggregate', 'unset', 'rack1')
    assert exit_info.value.code == 2


def test_add_and_remove_hosts(manage, rack, announced):
    agg = _json(manage, 'aggregate', 'add-host', 'rack1', 'h2')
    assert agg['hosts'] == ['h1', 'h2']
    agg = _json(manage, 'aggregate', 'remove-host', 'rack1', 'h1')
    assert agg['hosts'] == ['h2']
    assert [a['hosts'] for _what, a in announced] == [['h1', 'h2'], ['h2']]


def test_add_a_host_twice(manage, rack, announced):
    result = manage('aggregate', 'add-host', 'rack1', 'h1')
    assert result.code == 1
    assert result.err == ('AggregateHostExists: Host h1 is already in '
                          'aggregate rack1.\n')
    assert announced == []


def test_remove_a_host_not_in_it(manage, rack, announced):
    result = manage('aggregate', 'remove-host', 'rack1', 'h9')
    assert result.code == 1
    assert result.err == ('AggregateHostNotFound: Host h9 is not in '
                          'aggregate rack1.\n')
    assert announced == []


def test_delete(manage, rack, announced, inventory):
    result = manage('aggregate', 'delete', 'rack1')
    assert (result.code, result.out) == (0, 'Deleted aggregate rack1\n')
    assert [(what, a['uuid']) for what, a in announced] == [
        ('deleted', rack['uuid'])]
    assert inventory.aggregate_get_all() == []


def test_list(manage, rack, inventory):
    manage('aggregate', 'create', 'empty')
    rows = _json(manage, 'aggregate', 'list')
    assert [(r['name'], r['availability_zone'], r['hosts']) for r in rows] \
        == [('empty', None, []), ('rack1', 'az1', ['h1'])]
    assert all(sorted(r) == sorted(aggregates_cli.COLUMNS) for r in rows)
    table = manage('aggregate', 'list').out
    assert re.search(r'\| rack1 +\| az1 +\| h1 +\|', table)


def test_show_by_name_id_and_uuid(manage, rack):
    for ident in ('rack1', str(rack['id']), rack['uuid']):
        agg = _json(manage, 'aggregate', 'show', ident)
        assert agg['uuid'] == rack['uuid']
        assert agg['hosts'] == ['h1']


@pytest.mark.parametrize('command', [
    ['show', 'nope'], ['set', 'nope', '--name', 'x'],
    ['unset', 'nope', '--property', 'x'], ['add-host', 'nope', 'h1'],
    ['remove-host', 'nope', 'h1'], ['delete', 'nope']])
def test_an_unknown_aggregate(manage, reported, announced, command):
    result = manage('aggregate', *command)
    assert result.code == 1
    assert result.out == ''
    assert result.err == 'AggregateNotFound: Aggregate nope could not be ' \
                         'found.\n'
    assert announced == []


def test_a_property_without_a_value(manage, inventory, announced):
    with pytest.raises(SystemExit) as exit_info:
        manage('aggregate', 'create', 'rack1', '--property', 'ssd')
    assert str(exit_info.value) == "--property must be KEY=VALUE, not 'ssd'"
    assert inventory.aggregate_get_all() == []


def test_an_unknown_host_is_refused(manage, rack, announced):
    result = manage('aggregate', 'add-host', 'rack1', 'h1x')
    assert result.code == 1
    assert result.err.startswith('AggregateHostUnknown: Host h1x is not '
                                 'known to the inventory')
    assert '--allow-unknown' in result.err
    assert announced == []
    agg = _json(manage, 'aggregate', 'add-host', 'rack1', 'h1x',
                '--allow-unknown')
    assert agg['hosts'] == ['h1', 'h1x']


def test_a_host_in_two_zones_is_refused(manage, rack, announced):
    _json(manage, 'aggregate', 'create', 'rack2', '--zone', 'az2')
    announced.clear()
    result = manage('aggregate', 'add-host', 'rack2', 'h1')
    assert result.code == 1
    assert result.err == (
        "AggregateZoneConflict: Host h1 would be in two availability "
        "zones: 'az2' of aggregate rack2 and 'az1' of aggregate rack1. A "
        "host belongs to at most one zone, as in nova.\n")
    assert announced == []
    # A zoneless aggregate, or one of the same zone, is fine.
    _json(manage, 'aggregate', 'create', 'ssd')
    assert _json(manage, 'aggregate', 'add-host', 'ssd', 'h1')['hosts'] \
        == ['h1']
    _json(manage, 'aggregate', 'create', 'rack1b', '--zone', 'az1')
    _json(manage, 'aggregate', 'add-host', 'rack1b', 'h1')


@pytest.mark.parametrize('how', [['--zone', 'az2'],
                                 ['--property', 'availability_zone=az2']])
def test_giving_a_zone_that_splits_a_host_is_refused(manage, rack,
                                                     announced, how):
    _json(manage, 'aggregate', 'create', 'ssd')
    _json(manage, 'aggregate', 'add-host', 'ssd', 'h1')
    announced.clear()
    result = manage('aggregate', 'set', 'ssd', *how)
    assert result.code == 1
    assert result.err.startswith('AggregateZoneConflict: Host h1 would be '
                                 "in two availability zones: 'az2' of "
                                 'aggregate ssd')
    assert announced == []
    assert manage('aggregate', 'set', 'ssd', '--zone', 'az1').code == 0


LONG = 'x' * 256


@pytest.mark.parametrize('argv', [
    ('create', LONG), ('create', 'ok', '--zone', LONG),
    ('create', 'ok', '--property', 'k=' + LONG),
    ('create', 'ok', '--property', LONG + '=v'),
    ('set', 'rack1', '--name', LONG),
    ('set', 'rack1', '--property', 'k=a\x01b'),
    ('add-host', 'rack1', LONG, '--allow-unknown'),
    ('set', 'rack1', '--property', 'k=a\udc80b')],
    ids=['name', 'zone', 'value', 'key', 'rename', 'control', 'host',
         'surrogate'])
def test_what_the_inventory_cannot_store_is_one_line(manage, rack, announced,
                                                     argv):
    # PostgreSQL and MySQL refused the row: oslo.db's traceback on
    # stderr before the error line.
    result = manage('aggregate', *argv)
    assert result.code == 1
    assert result.err.startswith('InvalidRequest: ')
    assert result.err.count('\n') == 1
    assert announced == []


def test_a_change_saved_with_the_broker_away_is_one_plain_line(tmp_path):
    """The broker is down: the aggregate is saved, and stderr says once
    why the schedulers were not told (no exception appended to it)."""
    conf = tmp_path / 'scheduler.conf'
    conf.write_text('[DEFAULT]\ntransport_url = rabbit://guest:guest@'
                    '127.0.0.1:1/\n[database]\nconnection = '
                    'sqlite:///%s/inv.sqlite\n' % tmp_path)
    manage = os.path.join(os.path.dirname(sys.executable),
                          'scheduler-manage')
    subprocess.run([manage, '--config-file', str(conf), 'db', 'sync'],
                   check=True, capture_output=True, timeout=120)
    done = subprocess.run([manage, '--config-file', str(conf), 'aggregate',
                           'create', 'rack1'], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert 'Saved, but could not notify the schedulers' in lines[0]
    assert lines[0].count('cannot reach the message bus') == 1, lines[0]
