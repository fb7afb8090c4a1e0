"""doc/config-reference.md is generated from the option definitions."""

import importlib.util
import os

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
TOOL = os.path.join(REPO, 'tools', 'gen_config_reference.py')
REFERENCE = os.path.join(REPO, 'doc', 'config-reference.md')


def _tool():
    spec = importlib.util.spec_from_file_location('gen_config_reference',
                                                  TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_config_reference_is_current():
    fresh = _tool().render()
    with open(REFERENCE) as f:
        checked_in = f.read()
    assert fresh == checked_in, (
        'doc/config-reference.md is stale: run "python '
        'tools/gen_config_reference.py" and commit the result')


def test_config_reference_names_every_option():
    from scheduler.conf import opts
    text = _tool().render()
    for group, options in opts.list_opts():
        name = getattr(group, 'name', group)
        for opt in options:
            reload = 'live' if opt.mutable else 'restart'
            assert '* Reload: %s\n' % reload in _entry(text, name, opt.dest)


def _entry(text, group, option):
    section = text.split('## [%s]\n' % group, 1)[1].split('\n## ', 1)[0]
    return section.split('### `%s`\n' % option, 1)[1].split('\n### ', 1)[0]


def test_config_reference_does_not_depend_on_the_machine():
    # host and state_path default to this machine's name and home: the
    # reference shows their sample defaults instead.
    text = _tool().render()
    assert '* Default: `<current_hostname>`\n' in _entry(text, 'DEFAULT',
                                                         'host')
    assert '* Default: `~/.local/state/scheduler`\n' in _entry(
        text, 'DEFAULT', 'state_path')
    assert os.path.expanduser('~') + '/.local' not in text


def test_check_mode_reports_a_stale_file(tmp_path, capsys):
    tool = _tool()
    stale = tmp_path / 'config-reference.md'
    stale.write_text('old\n')
    assert tool.main(['--check', '--output', str(stale)]) == 1
    assert 'python tools/gen_config_reference.py' in capsys.readouterr().err
    assert tool.main(['--output', str(stale)]) == 0
    assert tool.main(['--check', '--output', str(stale)]) == 0
