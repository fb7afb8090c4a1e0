"""``scheduler-manage config check``: every problem, in one run."""

import json
import os
import socket
import sqlite3
import subprocess
import sys

import pytest

from scheduler.cli import config_check
from scheduler.conf import nova_names
from scheduler import conf as scheduler_conf
from scheduler.db import migration
from tests.unit import cli

CONF = scheduler_conf.CONF

BROKEN_WEIGHER = 'tests.unit.cli.test_config_check.BrokenWeigher'


class BrokenWeigher:
    """A weigher class that imports but cannot start."""

    def __init__(self):
        raise RuntimeError('needs [broken] option')


@pytest.fixture
def manage(monkeypatch, capsys, tmp_path):
    return cli.Manage(monkeypatch, capsys, tmp_path)


def _rows(result) -> list:
    return result.json()


def _failed(rows: list) -> dict:
    """``{check: [detail, ...]}`` of the failed rows."""
    out: dict = {}
    for row in rows:
        if row['result'] == config_check.FAIL:
            out.setdefault(row['check'], []).append(row['detail'])
    return out


def _check(manage, *extra, config=None) -> tuple:
    result = manage('config', 'check', '--format', 'json', *extra,
                    config=config)
    return result.code, _rows(result)


@pytest.fixture
def free_port():
    """A loopback port nobody listens on."""
    sock = socket.socket()
    sock.bind(('127.0.0.1', 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


@pytest.fixture
def broker():
    """A loopback listener standing in for a broker: it accepts."""
    sock = socket.socket()
    sock.bind(('127.0.0.1', 0))
    sock.listen(8)
    yield sock.getsockname()[1]
    sock.close()


# --- a good configuration ------------------------------------------------

def test_a_good_configuration_passes(manage, inventory):
    code, rows = _check(manage)
    assert code == 0, rows
    assert _failed(rows) == {}
    assert {r['result'] for r in rows} <= {config_check.OK,
                                           config_check.SKIP}
    checks = [r['check'] for r in rows]
    for name in ('options', 'unknown_options', 'driver',
                 'available_filters', 'enabled_filters',
                 'weight_classes', 'database', 'transport_url',
                 'message_bus', 'prefix_map', 'multipliers', 'intervals'):
        assert name in checks
    by_check = {r['check']: r['detail'] for r in rows}
    assert by_check['database'].endswith('at %s (head)' % migration.head())
    assert by_check['message_bus'] == 'not contacted (add --check-bus)'


def test_json_rows_have_stable_keys(manage, inventory):
    _code, rows = _check(manage)
    assert all(sorted(row) == ['check', 'detail', 'result'] for row in rows)


def test_table_output(manage, inventory):
    result = manage('config', 'check')
    assert result.code == 0
    lines = result.out.splitlines()
    assert [cell.strip() for cell in lines[1].split('|')[1:-1]] == [
        'check', 'result', 'detail']
    assert all(line[0] in '+|' for line in lines[:-1])
    assert lines[-1] == 'Every check passed'


# --- one problem at a time -------------------------------------------------

@pytest.mark.parametrize('options, check, detail', [
    ({'driver': ('no_such_driver', 'scheduler')},
     'driver', "Scheduler driver 'no_such_driver'"),
    ({'enabled_filters': (['RamFilter', 'NoSuchFilter'], 'filter_scheduler')},
     'enabled_filters', 'NoSuchFilter is not in available_filters'),
    ({'available_filters': (['scheduler.filters.all_filters',
                             'nowhere.MyFilter'], 'filter_scheduler')},
     'available_filters', "'nowhere.MyFilter'"),
    ({'weight_classes': (['no.such.Weigher'], 'filter_scheduler')},
     'weight_classes', "'no.such.Weigher'"),
    ({'weight_classes': ([BROKEN_WEIGHER], 'filter_scheduler')},
     'weight_classes', 'BrokenWeigher: RuntimeError: needs [broken] option'),
    ({'transport_url': ('rabbit://guest:s3cret@broker:notaport/', None)},
     'transport_url', "invalid literal for int() with base 10: 'notaport'"),
    ({'transport_url': ('rabit://broker/', None)},
     'transport_url', "unknown transport 'rabit'"),
    ({'prefix_map': ({'10.0.0.300/8': 'doc', '10.2': 'ops'},
                     'ip_scheduler')},
     'prefix_map', "'10.0.0.300/8' is not a valid CIDR"),
    ({'ram_weight_multiplier': (float('nan'), 'filter_scheduler')},
     'multipliers', '[filter_scheduler] ram_weight_multiplier is nan'),
])
def test_each_problem_fails_with_a_clear_detail(manage, inventory, conf,
                                                options, check, detail):
    for name, (value, group) in options.items():
        conf.config(**{name: value, 'group': group})
    code, rows = _check(manage)
    assert code == 1
    failed = _failed(rows)
    assert any(detail in d for d in failed[check]), failed
    # The driver cannot start without its filters and weighers either;
    # nothing else is blamed.
    assert set(failed) <= {check, 'driver'}
    assert 's3cret' not in json.dumps(rows)


def test_a_database_without_schema(manage, conf, tmp_path):
    path = tmp_path / 'empty.sqlite'
    sqlite3.connect(str(path)).close()
    conf.config(connection='sqlite:///%s' % path, group='database')
    code, rows = _check(manage)
    assert code == 1
    assert _failed(rows) == {'database': [
        'sqlite:///%s has no schema: run "scheduler-manage db sync"'
        % path]}


def test_a_missing_database_file_is_not_created(manage, conf, tmp_path):
    path = tmp_path / 'missing' / 'inventory.sqlite'
    conf.config(connection='sqlite:///%s' % path, group='database')
    code, rows = _check(manage)
    assert code == 1
    assert 'the file does not exist: run "scheduler-manage db sync"' in \
        _failed(rows)['database'][0]
    assert not path.parent.exists()


def test_a_database_behind_or_ahead_of_this_release(manage, inventory):
    with inventory.get_engine().begin() as conn:
        conn.exec_driver_sql("UPDATE alembic_version SET version_num = "
                             "'0123abcd'")
    code, rows = _check(manage)
    assert code == 1
    detail, = _failed(rows)['database']
    assert 'is at 0123abcd, which this release does not know' in detail


def test_an_unreachable_database_never_shows_the_password(manage, conf):
    conf.config(connection='mysql+pymysql://sched:s3cr%40t@127.0.0.1:9/db',
                group='database')
    code, rows = _check(manage)
    assert code == 1
    detail, = _failed(rows)['database']
    assert detail.startswith('mysql+pymysql://sched:***@127.0.0.1:9/db: '
                             'cannot connect: ')
    assert 's3cr' not in json.dumps(rows)


def test_a_negative_pci_weight_multiplier(manage, inventory):
    code, rows = _check(manage, config='[filter_scheduler]\n'
                        'pci_weight_multiplier = -1.0\n')
    assert code == 1
    detail, = _failed(rows)['options']
    assert detail.startswith('[filter_scheduler] pci_weight_multiplier: '
                             'Should be greater than or equal to 0')


def test_a_split_ipv6_source_is_a_warning(manage, inventory, conf):
    conf.config(prefix_map={'fd00': ':/8:dev'}, group='ip_scheduler')
    code, rows = _check(manage)
    assert code == 0
    assert [r['detail'] for r in rows if r['result'] == config_check.WARN] \
        == ['fd00::/8:dev looks like a split IPv6 source: prefix_map takes '
            'IPv4 sources only']


def test_misspelt_options_and_sections_are_warnings(manage, inventory):
    code, rows = _check(manage, config='[filter_scheduler]\n'
                        'enabled_filter = RamFilter\n'
                        'ram_weight_multiplier = 2.0\n\n'
                        '[filter_schedular]\nhost_subset_size = 2\n\n'
                        '[oslo_messaging_rabbit]\n'
                        'heartbeat_timeout_threshold = 30\n')
    assert code == 0, rows
    path = str(manage.config_file)
    assert [r['detail'] for r in rows if r['result'] == config_check.WARN] \
        == ['[filter_schedular] in %s: no option of this service is in '
            'this section' % path,
            '[filter_scheduler] enabled_filter in %s is not an option: it '
            'is ignored' % path]


def test_novas_option_names_fail_and_name_ours(manage, inventory):
    # A configuration carried over from nova (the seeds' names): every
    # one of them would be ignored, so the check fails.
    code, rows = _check(manage, config='[DEFAULT]\n'
                        'scheduler_default_filters = RamFilter\n'
                        'scheduler_driver = filter_scheduler\n')
    assert code == 1
    path = str(manage.config_file)
    assert _failed(rows)['unknown_options'] == [
        "[DEFAULT] scheduler_default_filters in %s is nova's name: this "
        'service ignores it and reads [filter_scheduler] enabled_filters '
        'instead' % path,
        "[DEFAULT] scheduler_driver in %s is nova's name: this service "
        'ignores it and reads [scheduler] driver instead' % path]


def test_nova_names_map_to_options_that_exist(conf):
    for group, name in nova_names.RENAMED.values():
        assert name in conf.conf[group], (group, name)


def test_a_failing_drivers_import_error_is_shown_whole(manage, inventory):
    result = manage('config', 'check', config='[scheduler]\n'
                    'driver = mypkg.nothere.Driver\n')
    assert result.code == 1
    assert "No module named 'mypkg'" in result.out


def test_a_short_service_down_time_is_a_warning(manage, inventory, conf):
    conf.config(service_down_time=15, report_interval=10, group='scheduler')
    result = manage('config', 'check')
    assert result.code == 0
    assert result.out.splitlines()[-1] == 'No check failed (1 warning(s))'


@pytest.mark.parametrize('interval', [60, 90])
def test_a_report_interval_of_service_down_time_fails(manage, inventory,
                                                      conf, interval):
    """Hosts would flap down and up: an error, not a warning."""
    conf.config(service_down_time=60, report_interval=interval,
                group='scheduler')
    code, rows = _check(manage)
    assert code == 1
    [detail] = _failed(rows)['intervals']
    assert 'flapping' in detail and 'report_interval (%d s)' % interval \
        in detail


@pytest.mark.parametrize('value, result', [(2, 'ok'), (5, 'ok'),
                                           (6, 'warn'), (30, 'warn')])
def test_a_long_reconnection_pause_is_a_warning(manage, inventory, conf,
                                                value, result):
    conf.config(rabbit_interval_max=value, group='oslo_messaging_rabbit')
    code, rows = _check(manage)
    assert code == 0
    [row] = [r for r in rows if r['check'] == 'rabbit_interval_max']
    assert row['result'] == result, row
    if result == 'warn':
        assert 'rabbit_interval_max is %d s' % value in row['detail']


# --- every problem at once -----------------------------------------------

def test_every_problem_is_reported_together(manage, tmp_path):
    empty = tmp_path / 'empty.sqlite'
    sqlite3.connect(str(empty)).close()
    CONF.clear_override('transport_url')
    code, rows = _check(manage, config="""
[DEFAULT]
transport_url = rabbit://guest:s3cret@broker:notaport/

[scheduler]
driver = no_such_driver

[database]
connection = sqlite:///%s

[filter_scheduler]
enabled_filters = RamFilter, NoSuchFilter
weight_classes = scheduler.weights.all_weighers, no.such.Weigher
pci_weight_multiplier = -1

[ip_scheduler]
prefix_map = 10.0.0.300/8:doc, 10.2:ops
""" % empty)
    assert code == 1
    failed = _failed(rows)
    assert sorted(failed) == ['database', 'driver', 'enabled_filters',
                              'options', 'prefix_map', 'transport_url',
                              'weight_classes']
    assert 'no_such_driver' in failed['driver'][0]
    assert 'NoSuchFilter' in failed['enabled_filters'][0]
    assert 'no.such.Weigher' in failed['weight_classes'][0]
    assert 'has no schema' in failed['database'][0]
    assert 'notaport' in failed['transport_url'][0]
    assert '10.0.0.300/8' in failed['prefix_map'][0]
    assert 'pci_weight_multiplier' in failed['options'][0]
    assert 's3cret' not in json.dumps(rows)


def test_table_counts_the_problems(manage, inventory, conf):
    conf.config(driver='no_such_driver', group='scheduler')
    conf.config(prefix_map={'10.0.0.300/8': 'doc'}, group='ip_scheduler')
    result = manage('config', 'check')
    assert result.code == 1
    assert result.out.splitlines()[-1] == '2 problem(s) found'


# --- the message bus -----------------------------------------------------

def test_check_bus_wants_an_amqp_login_not_a_tcp_connection(
        manage, inventory, conf, broker):
    """A port that accepts but never speaks AMQP fails within --timeout.

    Real logins (good and wrong passwords, TLS) are in
    tests/functional/test_config_check_bus.py.
    """
    conf.config(transport_url='rabbit://guest:s3cret@127.0.0.1:%d/' % broker)
    code, rows = _check(manage, '--check-bus', '--timeout', '1')
    assert code == 1, rows
    detail, = _failed(rows)['message_bus']
    assert detail.startswith('127.0.0.1:%d: no AMQP handshake' % broker)
    transport, = [r for r in rows if r['check'] == 'transport_url']
    assert transport['detail'] == (
        'rabbit://guest:***@127.0.0.1:%d/ (127.0.0.1:%d)' % (broker, broker))
    assert 's3cret' not in json.dumps(rows)


def test_check_bus_names_a_broker_that_does_not_answer(
        manage, inventory, conf, free_port):
    conf.config(transport_url='rabbit://guest:s3cret@127.0.0.1:%d/'
                % free_port)
    code, rows = _check(manage, '--check-bus', '--timeout', '1')
    assert code == 1
    detail, = _failed(rows)['message_bus']
    assert detail.startswith('127.0.0.1:%d does not answer: ' % free_port)
    assert 's3cret' not in json.dumps(rows)


def test_the_bus_is_not_contacted_without_check_bus(manage, inventory, conf,
                                                    free_port):
    conf.config(transport_url='rabbit://127.0.0.1:%d/' % free_port)
    code, rows = _check(manage)
    assert code == 0


def test_fake_transport_has_nothing_to_reach(manage, inventory):
    code, rows = _check(manage, '--check-bus')
    assert code == 0
    assert [r['detail'] for r in rows if r['check'] == 'message_bus'] == [
        'fake:// is in-process: nothing to reach']


# --- as operators run it -------------------------------------------------

def _console_script() -> list:
    script = os.path.join(os.path.dirname(sys.executable), 'scheduler-manage')
    if os.access(script, os.X_OK):
        return [script]
    return [sys.executable, '-m', 'scheduler.cmd.manage']


def test_the_console_script_prints_json_only(inventory, tmp_path):
    config_file = tmp_path / 'scheduler.conf'
    config_file.write_text(
        '[DEFAULT]\ntransport_url = fake://\nstate_path = %s\n\n'
        '[scheduler]\ndriver = no_such_driver\n\n'
        '[database]\nconnection = %s\n'
        % (tmp_path, CONF.database.connection))
    proc = subprocess.run(
        _console_script() + ['--config-file', str(config_file), 'config',
                             'check', '--format', 'json'],
        stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=120)
    assert proc.returncode == 1, proc.stderr
    rows = json.loads(proc.stdout)
    assert list(_failed(rows)) == ['driver']


# --- the generated sample and the libraries' sections ----------------------

SAMPLE = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'etc',
                      'scheduler', 'scheduler.conf.sample')
GENERATOR = os.path.join(os.path.dirname(SAMPLE),
                         'scheduler-config-generator.conf')


def test_namespaces_are_the_generators():
    with open(GENERATOR) as f:
        listed = [line.split('=', 1)[1].strip() for line in f
                  if line.startswith('namespace')]
    assert tuple(listed) == config_check.NAMESPACES


def test_the_generated_sample_has_no_unknown_option(tmp_path):
    """Every option of the sample, uncommented, is known ([oslo_reports]
    included): the sample is what operators start from.  In its own
    process: the sample's settings must not outlive the test."""
    lines = []
    with open(SAMPLE) as f:
        for line in f:
            if line.startswith('#') and ' = ' in line and \
                    not line.startswith('# '):
                line = line[1:]
                if line.split(' = ')[1].strip() in ('', '<None>'):
                    continue
            lines.append(line)
    path = tmp_path / 'from-sample.conf'
    path.write_text(''.join(lines))
    script = os.path.join(os.path.dirname(sys.executable),
                          'scheduler-manage')
    done = subprocess.run([script, '--config-file', str(path), 'config',
                           'check', '--format', 'json'],
                          capture_output=True, text=True, timeout=120)
    # Every sample default is on, logging to stdout included: the JSON
    # document is the last thing printed.
    rows = json.loads(done.stdout[done.stdout.rindex('\n[\n') + 1:])
    assert [(r['result'], r['detail']) for r in rows
            if r['check'] == 'unknown_options'] == [
        (config_check.OK, 'every option set is known')]


def test_a_library_option_misspelt_is_a_warning(manage, inventory):
    code, rows = _check(manage, config='[oslo_reports]\nlog_dri = /tmp\n')
    assert code == 0, rows
    assert [r['detail'] for r in rows if r['result'] == config_check.WARN] \
        == ['[oslo_reports] log_dri in %s is not an option: it is ignored'
            % manage.config_file]


def test_unknown_options_agree_with_oslo_config_validator(
        manage, inventory):
    """The check flags what ``oslo-config-validator`` flags, given the
    generator's namespaces, and no more (a section nothing reads is one
    row for all its options)."""
    config = ('[DEFAULT]\ndebug = true\nenabled_filter = RamFilter\n'
              '[filter_scheduler]\nenabled_filters = RamFilter\n'
              'host_subset_size = 2\nhost_subset = 2\n'
              '[oslo_messaging_rabbit]\nheartbeat_timeout_threshold = 30\n'
              'heartbeat_timeout = 30\n'
              '[database]\nmax_pool_size = 5\n'
              '[nosuch]\nfoo = 1\nbar = 2\n')
    code, rows = _check(manage, config=config)
    ours = set()
    for row in rows:
        if row['check'] != 'unknown_options' or row['result'] == 'ok':
            continue
        section, rest = row['detail'][1:].split('] ', 1)
        if rest.startswith('in '):
            ours.update((section, key) for key in ('foo', 'bar'))
        else:
            ours.add((section, rest.split(' ', 1)[0]))
    script = os.path.join(os.path.dirname(sys.executable),
                          'oslo-config-validator')
    done = subprocess.run([script, '--config-file', GENERATOR,
                           '--input-file', str(manage.config_file)],
                          capture_output=True, text=True, timeout=120)
    theirs = {tuple(line.rsplit(':', 1)[1].split(' ', 1)[0].split('/'))
              for line in done.stderr.splitlines()
              if line.endswith(' is not part of the sample config')}
    assert done.returncode == 1, done.stderr
    assert ours == theirs == {('DEFAULT', 'enabled_filter'),
                              ('filter_scheduler', 'host_subset'),
                              ('oslo_messaging_rabbit', 'heartbeat_timeout'),
                              ('nosuch', 'foo'), ('nosuch', 'bar')}


def test_plugins_from_other_packages_say_restart(manage, inventory, conf):
    conf.config(available_filters=[
        'scheduler.filters.all_filters',
        'tests.unit.fixtures.out_of_tree.trove_filter.TroveImageFilter'],
        group='filter_scheduler')
    conf.config(enabled_filters=['RamFilter', 'TroveImageFilter'],
                group='filter_scheduler')
    code, rows = _check(manage)
    warnings = [r['detail'] for r in rows if r['check'] == 'plugins']
    assert warnings == [
        'TroveImageFilter from tests: after installing or upgrading it, '
        'restart the service (systemctl restart); a reload (SIGHUP) does '
        'not see new or changed plugin packages']


@pytest.mark.parametrize('answer, verdict', [
    ((True, 'STATEMENT'), config_check.FAIL),
    ((True, 'ROW'), config_check.OK),
    ((True, 'MIXED'), config_check.OK),
    ((False, 'STATEMENT'), config_check.OK),
])
def test_a_mysql_server_logging_statements_fails_the_binlog_check(
        conf, monkeypatch, answer, verdict):
    """Report writes run at READ COMMITTED, which InnoDB will not log in
    STATEMENT format: such a server would refuse every report."""
    conf.config(connection='mysql+pymysql://root@127.0.0.1/x',
                group='database')
    monkeypatch.setattr(config_check, '_ask',
                        lambda url, timeout, question: answer)
    [result] = config_check.check_binlog()
    assert result.result == verdict, result
    if verdict == config_check.FAIL:
        assert 'binlog_format = ROW or MIXED' in result.detail


def test_the_binlog_check_skips_other_databases(conf):
    conf.config(connection='sqlite://', group='database')
    [result] = config_check.check_binlog()
    assert result.result == config_check.SKIP
