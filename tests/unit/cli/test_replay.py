"""``scheduler-manage snapshot``, ``replay`` and ``capacity`` in process."""

import json

import pytest

from scheduler.replay import trace
from tests.unit import cli
from tests.unit import test_replay as helpers


@pytest.fixture
def manage(monkeypatch, capsys, tmp_path):
    return cli.Manage(monkeypatch, capsys, tmp_path)


def _fleet_file(tmp_path) -> str:
    path = tmp_path / 'fleet.json'
    path.write_text(json.dumps({'groups': [
        {'prefix': 'c', 'count': 3, 'memory_mb': 8192, 'vcpus': 4,
         'local_gb': 100, 'availability_zone': 'az1'}]}))
    return str(path)


def test_replay_writes_the_comparison_and_the_report(manage, tmp_path):
    path = str(tmp_path / 'trace.jsonl')
    trace.write(path, [helpers.request_event(n, helpers.spec(
        mb=2048, vcpus=1, gb=10)) for n in range(4)])
    spread = helpers.write_config(tmp_path, 'spread', 1.0)
    pack = helpers.write_config(tmp_path, 'pack', -1.0)
    result = manage('replay', '--fleet', _fleet_file(tmp_path), '--trace',
                    path, '--config', spread, '--config', pack, '--json',
                    str(tmp_path / 'out.json'), '--html',
                    str(tmp_path / 'out.html'), '--format', 'json')
    assert result.code == 0, result.err
    assert 'replay spread: 4/4 events (100%)' in result.err
    document = json.loads((tmp_path / 'out.json').read_text())
    used = {c['name']: c['hosts_used'] for c in document['configs']}
    assert used == {'spread': 3, 'pack': 1}
    assert (tmp_path / 'out.html').read_text().startswith('<!DOCTYPE html>')
    rows = {r['figure']: r for r in result.json()}
    assert rows['requests placed'] == {'figure': 'requests placed',
                                       'spread': 4, 'pack': 4}


def test_replay_explains_every_request_when_asked(manage, tmp_path):
    path = str(tmp_path / 'trace.jsonl')
    trace.write(path, [helpers.request_event(n, helpers.spec(
        mb=2048, vcpus=1, gb=10)) for n in range(5)])
    spread = helpers.write_config(tmp_path, 'spread', 1.0)
    out = tmp_path / 'out.json'
    result = manage('replay', '--fleet', _fleet_file(tmp_path), '--trace',
                    path, '--config', spread, '--json', str(out),
                    '--explain', 'all', '--quiet')
    assert result.code == 0, result.err
    explained = [r['results']['spread']['explain']
                 for r in json.loads(out.read_text())['requests']]
    assert len(explained) == 5 and all(x and x['ranking']
                                       for x in explained)
    with pytest.raises(SystemExit) as bad:     # argparse's usage error
        manage('replay', '--fleet', _fleet_file(tmp_path), '--trace',
               path, '--config', spread, '--explain', 'some')
    assert bad.value.code == 2
    assert '"all"' in manage.capsys.readouterr().err


def test_replay_needs_a_fleet_a_trace_and_a_configuration(manage):
    result = manage('replay', '--config', 'x.conf')
    assert result.code == 2
    assert '--fleet, --trace required' in result.err


def test_capacity_counts_on_a_fleet_file(manage, tmp_path):
    result = manage('capacity', '--fleet', _fleet_file(tmp_path),
                    '--flavor', 'half:4096:1:10', '--format', 'json',
                    '--quiet')
    assert result.code == 0, result.err
    assert {r['zone']: r['fits'] for r in result.json()} == \
        {'az1': 6, '*': 6}


def test_capacity_takes_the_flavors_of_a_trace(manage, tmp_path):
    path = str(tmp_path / 'trace.jsonl')
    trace.write(path, [helpers.request_event(0, helpers.spec(
        mb=8192, vcpus=1, gb=10, name='whole'))])
    result = manage('capacity', '--fleet', _fleet_file(tmp_path),
                    '--trace', path, '--format', 'json', '--quiet')
    assert result.code == 0, result.err
    assert [(r['flavor'], r['zone'], r['fits']) for r in result.json()] \
        == [('whole', 'az1', 3), ('whole', '*', 3)]
    unknown = manage('capacity', '--fleet', _fleet_file(tmp_path),
                     '--trace', path, '--flavor', 'nope')
    assert unknown.code != 0 and 'not in the trace' in unknown.err


def test_capacity_takes_the_flavors_of_the_recorded_trace(manage,
                                                          tmp_path):
    # What the service records at [trace] path, rotated files included.
    recorded = tmp_path / 'recorded.jsonl'
    trace.write(str(recorded), [helpers.request_event(0, helpers.spec(
        mb=8192, vcpus=1, gb=10, name='whole'))])
    trace.write(str(recorded) + '.1', [helpers.request_event(0, helpers.spec(
        mb=4096, vcpus=1, gb=10, name='half'))])
    (tmp_path / 'recorded.jsonl.bak').write_text('not a trace')
    conf = '[trace]\npath = %s\n' % recorded
    result = manage('capacity', '--fleet', _fleet_file(tmp_path),
                    '--format', 'json', '--quiet', config=conf)
    assert result.code == 0, result.err
    assert sorted((r['flavor'], r['zone'], r['fits'])
                  for r in result.json()) == [
        ('half', '*', 6), ('half', 'az1', 6),
        ('whole', '*', 3), ('whole', 'az1', 3)]
    nothing = manage('capacity', '--fleet', _fleet_file(tmp_path),
                     config='[trace]\npath = %s\n' % (tmp_path / 'none'))
    assert nothing.code == 2 and 'none recorded' in nothing.err


def test_snapshot_writes_what_replay_reads(manage, inventory, tmp_path):
    out = tmp_path / 'snap.json'
    result = manage('snapshot', '--output', str(out))
    assert result.code == 0, result.err
    document = json.loads(out.read_text())
    assert document['format'] == 'scheduler-fleet-snapshot'
    assert document['reports'] == []
