"""devstack/plugin.sh, run by tests/devstack/run_plugin_harness.sh.

The harness sources the plugin the way devstack does, phase after phase,
against stub devstack functions, in a temporary directory it removes at
exit (see its header).  It checks the calls and the written file itself;
these tests check its verdict, parse its report, and load the
scheduler.conf it wrote through ``scheduler.config.parse_args``.
"""

import os
import pathlib
import shutil
import subprocess
import sys

from oslo_config import cfg
import pytest

from scheduler import config

ROOT = pathlib.Path(__file__).resolve().parents[2]
HARNESS = ROOT / 'tests' / 'devstack' / 'run_plugin_harness.sh'
SHELL_FILES = [ROOT / 'devstack' / 'plugin.sh',
               ROOT / 'devstack' / 'settings',
               HARNESS]
CONF_PATH = '<ROOT>/etc/scheduler/scheduler.conf'
BIN = '<ROOT>/usr/local/bin'

CONF = cfg.CONF


def _run_harness(**env) -> tuple:
    bash = shutil.which('bash')
    if not bash:
        pytest.fail('bash is needed to run the devstack plugin harness')
    full_env = {k: v for k, v in os.environ.items()
                if not k.startswith('SCHEDULER_')}
    full_env['SCHEDULER_HARNESS_PYTHON'] = sys.executable
    full_env.update(env)
    proc = subprocess.run([bash, str(HARNESS)], capture_output=True,
                          text=True, timeout=300, env=full_env, cwd=ROOT)
    return proc, _sections(proc.stdout)


def _sections(stdout: str) -> dict:
    sections: dict = {}
    current = None
    for line in stdout.splitlines():
        if line.startswith('### '):
            current = line[4:].strip()
            sections[current] = []
        elif line.startswith('HARNESS '):
            sections['result'] = [line]
            current = None
        elif current is not None:
            sections[current].append(line)
    return sections


@pytest.fixture(scope='module')
def harness():
    proc, sections = _run_harness()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return sections


def _calls(sections) -> list:
    return [tuple(line.split('\t')) for line in sections['calls']]


def _phase_calls(sections, phase: str) -> list:
    """The calls made while plugin.sh ran ``phase`` ("stack install"...)."""
    out = []
    current = None
    for call in _calls(sections):
        if call[0] == 'RUN':  # a new devstack script run starts
            current = None
        elif call[0] == 'PHASE':
            current = call[1]
        elif current == phase:
            out.append(call)
    return out


def test_harness_passes(harness):
    assert harness['result'] == ['HARNESS OK']
    failed = [c for c in harness['checks'] if not c.startswith('ok: ')]
    assert not failed
    assert len(harness['checks']) >= 30


def test_phases_in_devstack_order(harness):
    phases = [c[1] for c in _calls(harness) if c[0] == 'PHASE']
    assert phases == ['stack install', 'stack post-config', 'stack extra',
                      'unstack', 'clean']


def test_settings_enable_the_service(harness):
    calls = _calls(harness)
    runs = [c for c in calls if c[0] == 'RUN']
    assert runs == [('RUN', 'stack install', 'stack post-config',
                     'stack extra'), ('RUN', 'unstack'), ('RUN', 'clean')]
    # Each run sources the settings, which enable the service.
    assert calls.count(('enable_service', 'sch')) == 3


def test_install(harness):
    calls = _phase_calls(harness, 'stack install')
    assert ('setup_develop', str(ROOT)) in calls
    assert not [c for c in calls if c[0] in ('pip_install', 'FORBIDDEN')]


def test_post_config(harness):
    calls = _phase_calls(harness, 'stack post-config')
    assert ('get_transport_url',) in calls
    assert ('database_connection_url', 'scheduler') in calls
    assert ('recreate_database', 'scheduler') in calls
    assert ('iniset', CONF_PATH, 'scheduler', 'driver',
            'filter_scheduler') in calls
    assert ('iniset_multiline', CONF_PATH, 'filter_scheduler',
            'available_filters', 'scheduler.filters.all_filters',
            'scheduler.filters.ram.RamFilter') in calls
    # Today's scheduler-manage has no "db" command: probed, not called.
    assert ('scheduler-manage', 'db', '--help') in calls
    assert not [c for c in calls
                if c[0] == 'scheduler-manage' and 'sync' in c]


def test_extra_runs_the_daemon(harness):
    calls = _phase_calls(harness, 'stack extra')
    assert calls[1:] == [
        ('run_process', 'sch',
         '%s/scheduler-service --config-file %s' % (BIN, CONF_PATH)),
        ('run_process', 'sch-sim',
         '%s/scheduler-compute-sim --config-file %s --hosts 3'
         % (BIN, CONF_PATH)),
    ]


def test_unstack_stops(harness):
    calls = _phase_calls(harness, 'unstack')
    assert calls == [('stop_process', 'sch-sim'), ('stop_process', 'sch')]


def test_clean_removes_everything(harness):
    calls = _phase_calls(harness, 'clean')
    assert ('sudo', 'rm', '-rf', '<ROOT>/etc/scheduler') in calls
    assert ('mysql', '-uroot', '-psecretdb', '-h127.0.0.1', '-e',
            'DROP DATABASE IF EXISTS scheduler;') in calls
    assert 'ok: clean: state dir gone' in harness['checks']


def test_nothing_forbidden(harness):
    assert not [c for c in _calls(harness) if c[0] in ('FORBIDDEN', 'die')]


def test_written_file_loads_with_oslo_config(harness, conf, tmp_path):
    path = tmp_path / 'scheduler.conf'
    text = '\n'.join(harness['scheduler.conf']) + '\n'
    path.write_text(text.replace('<ROOT>', str(tmp_path / 'root')))
    # The conf fixture overrides these two; overrides beat config files.
    CONF.clear_override('transport_url')
    CONF.clear_override('state_path')
    CONF.clear_override('connection', group='database')

    config.parse_args(['--config-file', str(path)],
                      default_config_files=[], setup_logging=False)

    assert CONF.transport_url == (
        'rabbit://stackrabbit:secretrabbit@127.0.0.1:5672/')
    assert CONF.database.connection == (
        'mysql+pymysql://root:secretdb@127.0.0.1/scheduler?charset=utf8')
    assert CONF.scheduler.driver == 'filter_scheduler'
    assert CONF.scheduler.topic == 'scheduler'
    assert CONF.scheduler.workers == 2
    assert CONF.debug is True
    assert CONF.use_journal is True
    assert CONF.state_path == str(tmp_path / 'root' / 'opt' / 'stack' /
                                  'data' / 'scheduler')
    assert CONF.filter_scheduler.enabled_filters == [
        'ComputeFilter', 'RamFilter', 'VCPUFilter']
    assert CONF.filter_scheduler.available_filters == [
        'scheduler.filters.all_filters', 'scheduler.filters.ram.RamFilter']
    # Not set by the plugin: the service's defaults stay.
    assert CONF.filter_scheduler.weight_classes == [
        'scheduler.weights.all_weighers']


def test_harness_own_oslo_check_ran(harness):
    assert 'ok: oslo.config parses scheduler.conf' in harness['checks']
    assert ('debug=True') in harness['oslo.config']


def test_db_sync_when_scheduler_manage_has_it():
    proc, sections = _run_harness(SCHEDULER_HARNESS_MANAGE_HAS_DB='1')
    assert proc.returncode == 0, proc.stdout + proc.stderr
    calls = _phase_calls(sections, 'stack post-config')
    sync = ('scheduler-manage', '--config-file', CONF_PATH, 'db', 'sync')
    assert sync in calls
    # After the database was recreated.
    assert calls.index(('recreate_database', 'scheduler')) < calls.index(sync)


def test_harness_leaves_no_temporary_directory(tmp_path):
    proc, sections = _run_harness(TMPDIR=str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize('path', SHELL_FILES, ids=lambda p: p.name)
def test_bash_syntax(path):
    proc = subprocess.run(['bash', '-n', str(path)], capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize('path', SHELL_FILES, ids=lambda p: p.name)
def test_shellcheck(path):
    tool = shutil.which('shellcheck')
    if not tool:
        pytest.skip('shellcheck not installed (Debian package "shellcheck")')
    proc = subprocess.run([tool, '-x', str(path)], capture_output=True,
                          text=True, cwd=path.parent)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_journal_can_be_turned_off():
    proc, sections = _run_harness(SCHEDULER_HARNESS_USE_JOURNAL='False')
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not [line for line in sections['scheduler.conf']
                if line.startswith('use_journal')]


def test_no_removed_devstack_variables():
    """USE_SYSTEMD left devstack in 2020: every service is a unit now."""
    for path in (ROOT / 'devstack').iterdir():
        assert 'USE_SYSTEMD' not in path.read_text(), path


@pytest.mark.parametrize('doc', ['devstack/README.rst', 'devstack/plugin.sh',
                                 'doc/admin-guide.md'])
def test_documented_enable_plugin_line_names_the_branch(doc):
    """devstack defaults to "master"; this repository has only "main"."""
    lines = [line.strip().lstrip('# ') for line in
             (ROOT / doc).read_text().splitlines()
             if 'enable_plugin openstack-scheduler' in line]
    assert lines
    for line in lines:
        assert line.split()[-1] == 'main', line
