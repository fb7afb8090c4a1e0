"""Every command: one line per error, the output formats, long cells."""

import io

import oslo_messaging
import pytest
import yaml

from scheduler.cli import errors
from scheduler.cli import output
from scheduler.cli import requests as requests_cli
from scheduler.db import api as db_api
from scheduler import exception
from scheduler import rpc
from tests.unit import cli


@pytest.fixture
def manage(monkeypatch, capsys, tmp_path):
    return cli.Manage(monkeypatch, capsys, tmp_path)


def test_no_scheduler_answering_is_one_line(conf):
    conf.config(transport_url='rabbit://guest:s3cret@127.0.0.1:5672/')
    conf.config(topic='nobody-here', group='scheduler')
    line = errors.describe(oslo_messaging.MessagingTimeout('late'), 7)
    assert line.startswith(
        'no scheduler answered on topic nobody-here at transport '
        'rabbit://guest:***@127.0.0.1:5672/ within 7 s')
    assert 's3cret' not in line


def test_a_call_the_bus_never_took_is_one_line(conf):
    conf.config(transport_url='rabbit://guest:s3cret@127.0.0.1:5672/')
    line = errors.describe(rpc.MessageBusUnreachable('no reply queue'), 3)
    assert line.startswith(
        'cannot reach the message bus at rabbit://guest:***@127.0.0.1:5672/'
        ': the call was not taken within 3 s')
    assert 's3cret' not in line and '\n' not in line


def test_unreachable_broker_is_one_line_and_exit_1(manage, conf):
    # Port 9 (discard) is closed on loopback: refused at once.
    conf.config(transport_url='rabbit://guest:s3cret@127.0.0.1:9/')
    result = manage('select', '--timeout', '2')
    assert result.code == 1
    assert result.err.count('\n') == 1, result.err
    assert result.err.startswith(
        'scheduler-manage: cannot reach the message bus at '
        'rabbit://guest:***@127.0.0.1:9/')
    assert 's3cret' not in result.err
    assert 'Traceback' not in result.err


def test_debug_adds_the_traceback(manage, conf):
    conf.config(transport_url='rabbit://guest:guest@127.0.0.1:9/')
    result = manage('--debug', 'explain', '--timeout', '1')
    assert result.code == 1
    assert 'Traceback' in result.err
    assert result.err.rstrip().splitlines()[-1].startswith(
        'scheduler-manage: cannot reach the message bus')


def test_database_error_is_one_line(manage, conf, tmp_path):
    conf.config(connection='sqlite:///%s' % (tmp_path / 'none' / 'x.db'),
                group='database')
    db_api.reset_engine()
    result = manage('aggregate', 'list')
    assert result.code == 1
    assert result.err.count('\n') == 1, result.err
    assert result.err.startswith('scheduler-manage: database error at '
                                 'sqlite:///')


def test_scheduler_errors_keep_their_type():
    line = errors.describe(exception.NoValidHost(reason='none fit'), 30)
    assert line == 'NoValidHost: No valid host was found. none fit'


def test_select_says_it_claims(manage, capsys):
    with pytest.raises(SystemExit):
        manage('select', '--help')
    text = ' '.join(capsys.readouterr().out.split())
    assert 'RESERVES capacity' in text
    assert 'claim expires' in text
    assert '--dry-run' in text


@pytest.mark.parametrize('option', ['--ram', '--vcpus', '--disk',
                                    '--ephemeral', '--swap', '--max-hosts'])
def test_a_negative_size_is_a_usage_error(manage, capsys, option):
    # Before, --ram -5 reached the Flavor and ended in "unexpected
    # ValueError".
    with pytest.raises(SystemExit) as exit_info:
        manage('select', option, '-5')
    assert exit_info.value.code == 2
    assert '-5: must not be negative' in capsys.readouterr().err


def test_select_dry_run_explains(manage, monkeypatch):
    ran = []
    monkeypatch.setattr(requests_cli, 'cmd_explain',
                        lambda args: ran.append(args) or 0)
    assert manage('select', '--dry-run').code == 0
    assert len(ran) == 1


def test_explain_shows_the_best_of_a_big_ranking(manage, monkeypatch):
    # Printing every one of 10,000 ranked hosts took seconds and
    # megabytes of terminal: the table shows --max-hosts of them.
    ranking = [{'host': 'h%05d' % i, 'nodename': 'h%05d' % i,
                'weight': 1.0 - i / 1e4, 'contributions': {'RAMWeigher': 0}}
               for i in range(10000)]

    class API:
        def explain(self, ctxt, spec):
            return {'driver': 'FilterScheduler', 'hosts_known': 10000,
                    'candidates': 10000, 'passed': 10000, 'forced': False,
                    'filters': [], 'rejected': {}, 'ranking': ranking}
    monkeypatch.setattr(requests_cli, 'scheduler_api', lambda args: API())
    result = manage('explain', '--admin', '--max-hosts', '20')
    assert result.code == 0, result.err
    assert 'Ranking (best first, first 20 of 10000 shown)' in result.out
    assert 'h00019' in result.out and 'h00020' not in result.out
    data = manage('explain', '--admin', '--format', 'json').json()
    assert len(data['ranking']) == 10000


ROWS = [{'name': 'a', 'hosts': ['h1', 'h2'], 'metadata': {'k': 'v'}},
        {'name': 'b', 'hosts': [], 'metadata': {}}]


@pytest.mark.parametrize('fmt, check', [
    ('json', lambda text: '"name": "a"' in text),
    ('yaml', lambda text: yaml.safe_load(text)[0]['hosts'] == ['h1', 'h2']),
    ('value', lambda text: text.splitlines() == ['a h1, h2 k=v', 'b - -']),
])
def test_formats(fmt, check):
    stream = io.StringIO()
    output.emit(ROWS, ['name', 'hosts', 'metadata'], fmt, stream)
    assert check(stream.getvalue()), stream.getvalue()


def test_long_cells_are_cut_in_tables_only():
    rows = [{'name': 'x' * 1000}]
    table = io.StringIO()
    output.emit(rows, ['name'], 'table', table)
    assert 'x' * (output.MAX_CELL - 3) + '...' in table.getvalue()
    assert 'x' * output.MAX_CELL not in table.getvalue()
    data = io.StringIO()
    output.emit(rows, ['name'], 'json', data)
    assert 'x' * 1000 in data.getvalue()


class Terminal(io.StringIO):

    def isatty(self):
        return True


def test_tables_fit_the_terminal(monkeypatch):
    monkeypatch.setenv('COLUMNS', '80')
    monkeypatch.setenv('LINES', '24')
    stream = Terminal()
    rows = [{c: 'word ' * 30 for c in 'abcd'}]
    output.emit(rows, list('abcd'), 'table', stream)
    widths = {len(line) for line in stream.getvalue().splitlines()}
    assert max(widths) <= 80, widths
