"""``scheduler-manage`` imports a command's machinery only to run it.

Issue 29 item 10: ``select`` and ``explain`` took 14 to 15 s from the
command line on a loaded machine, and ``--help`` alone 6 s, most of it
importing every command's modules (the driver and filters, the
database, the objects, oslo.messaging) whatever the command.  The
parser now lives in ``scheduler.cli.parsers`` and names each command's
function by module; these tests fail if a top-level import brings the
heavy modules back into the help, or into a command that needs none of
them.
"""

import argparse
import importlib
import json
import os
import subprocess
import sys

import pytest

from scheduler.cli import parsers

#: What only running a command may import: the command modules, and
#: what they need (the database, the objects, the driver and filters,
#: the bus, the replay), which took most of ``--help``'s CPU.
HEAVY = (
    'scheduler.cli.requests', 'scheduler.cli.hosts',
    'scheduler.cli.aggregates', 'scheduler.cli.db',
    'scheduler.cli.config_check', 'scheduler.cli.replay',
    'scheduler.cli.errors', 'scheduler.config',
    'scheduler.db.api', 'scheduler.objects', 'scheduler.columns',
    'scheduler.drivers.filter_scheduler', 'scheduler.host_manager',
    'scheduler.rpc', 'scheduler.replay.runner',
    'sqlalchemy', 'oslo_db.sqlalchemy', 'oslo_messaging',
    'oslo_versionedobjects',
    'kombu', 'numpy',
)

#: Runs ``scheduler-manage`` with argv[1:] as the console script does
#: (``scheduler.cmd`` greens the process first), then prints the
#: modules it imported.
_RUN = '''
import json, sys
from scheduler.cmd import manage
try:
    manage.main(sys.argv[1:])
except SystemExit:
    pass
sys.__stdout__.write('\\nMODULES ' + json.dumps(sorted(sys.modules)))
'''


def _imported(*argv: str) -> set:
    env = dict(os.environ, COLUMNS='100')
    result = subprocess.run([sys.executable, '-c', _RUN, *argv],
                            capture_output=True, text=True, env=env,
                            timeout=120)
    assert 'MODULES ' in result.stdout, result.stderr
    return set(json.loads(result.stdout.rsplit('MODULES ', 1)[1]))


@pytest.mark.parametrize('argv', [
    ['--help'],
    ['hosts', '--help'],
    ['select', '--help'],
    ['explain', '--help'],
    ['aggregate', 'create', '--help'],
    ['db', 'sync', '--help'],
    ['config', 'check', '--help'],
    ['replay', '--help'],
    ['capacity', '--help'],
    ['no-such-command'],
])
def test_help_and_usage_errors_import_no_command_module(argv):
    heavy = sorted(name for name in _imported(*argv) if name in HEAVY)
    assert heavy == [], (
        '"scheduler-manage %s" imported %s: import them where the '
        'command runs, not at the top of scheduler.cmd.manage or '
        'scheduler.cli.parsers' % (' '.join(argv), heavy))


def test_a_command_imports_its_own_module_only(tmp_path):
    """``hosts list`` reads the inventory: not the driver, the replay
    or another command's module."""
    conf = tmp_path / 'scheduler.conf'
    conf.write_text('[database]\nconnection = sqlite:///%s\n'
                    % (tmp_path / 'missing.sqlite'))
    imported = _imported('--config-file', str(conf), 'hosts', 'list')
    assert 'scheduler.cli.hosts' in imported
    assert 'scheduler.db.api' in imported
    assert not imported & {
        'scheduler.cli.requests', 'scheduler.cli.aggregates',
        'scheduler.cli.config_check', 'scheduler.cli.replay',
        'scheduler.drivers.filter_scheduler', 'scheduler.replay.runner'}


def _commands(parser: argparse.ArgumentParser):
    for value in parser._defaults.values():
        if isinstance(value, parsers.Command):
            yield value
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _commands(sub)


def test_every_command_names_a_function_that_exists():
    """Commands are named by string now: a typo must fail here, not
    when an operator runs the command."""
    parser = argparse.ArgumentParser()
    common = argparse.ArgumentParser(add_help=False)
    parsers.add_common_options(common)
    parsers.register_all(parser.add_subparsers(), common)
    commands = list(_commands(parser))
    assert len(commands) > 20
    for command in commands:
        module = importlib.import_module(command.module)
        assert callable(getattr(module, command.name)), command
