"""doc/config-reference.rst is oslo-config-generator's rst output.

It documents the namespaces of the sample config's generator file, so
the reference and ``etc/scheduler/scheduler.conf.sample`` list the same
options; ``tox -e genref`` rewrites it.
"""

import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
GENERATOR_CONF = os.path.join(REPO, 'etc', 'scheduler',
                              'scheduler-config-generator.conf')
REFERENCE = os.path.join(REPO, 'doc', 'config-reference.rst')
COMMAND = ('oslo-config-generator --config-file '
           'etc/scheduler/scheduler-config-generator.conf --format rst '
           '--output-file doc/config-reference.rst')


@pytest.fixture(scope='module')
def fresh(tmp_path_factory) -> str:
    """What ``tox -e genref`` would write now.

    In a process of its own: importing the scheduler changes library
    option defaults in place (the control exchange), which the command
    does not see either.
    """
    out = tmp_path_factory.mktemp('genref') / 'config-reference.rst'
    script = os.path.join(os.path.dirname(sys.executable),
                          'oslo-config-generator')
    subprocess.run([script, '--config-file', GENERATOR_CONF, '--format',
                    'rst', '--output-file', str(out)], check=True,
                   capture_output=True, timeout=120)
    return out.read_text()


def _entry(text: str, group: str, option: str) -> str:
    section = text.split('.. oslo.config:group:: %s\n' % group, 1)[1]
    section = section.split('\n.. oslo.config:group:: ', 1)[0]
    entry = section.split('.. oslo.config:option:: %s\n' % option, 1)[1]
    return entry.split('\n.. oslo.config:option:: ', 1)[0]


def _entries(text: str) -> dict:
    """``{(group, option): its text}``.

    The generator writes the options of one group in the order the
    installed packages' entry points are found, which differs between
    two virtualenvs of the same versions: what must agree is each
    option's entry, not where it stands.
    """
    found = {}
    for section in text.split('.. oslo.config:group:: ')[1:]:
        group, _, body = section.partition('\n')
        for entry in body.split('.. oslo.config:option:: ')[1:]:
            name, _, rest = entry.partition('\n')
            found[(group, name)] = rest.strip()
    return found


def test_config_reference_is_current(fresh):
    with open(REFERENCE) as f:
        checked_in = f.read()
    assert _entries(fresh) == _entries(checked_in), (
        'doc/config-reference.rst is stale: run "tox -e genref" (or "%s") '
        'and commit the result' % COMMAND)


def test_config_reference_says_which_options_a_reload_applies(fresh):
    from scheduler.conf import opts
    for group, options in opts.list_opts():
        name = getattr(group, 'name', group)
        for opt in options:
            entry = _entry(fresh, name, opt.dest)
            assert (':Mutable:' in entry) == bool(opt.mutable), (name, opt)


def test_config_reference_does_not_depend_on_the_machine(fresh):
    # host and state_path default to this machine's name and home: the
    # reference shows their sample defaults instead.
    assert ':Default: ``<current_hostname>``' in _entry(fresh, 'DEFAULT',
                                                        'host')
    assert ':Default: ``~/.local/state/scheduler``' in _entry(
        fresh, 'DEFAULT', 'state_path')
    assert os.path.expanduser('~') + '/.local' not in fresh
