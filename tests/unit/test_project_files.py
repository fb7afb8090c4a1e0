"""Files the project keeps in step with its code: the sample config, CI."""

import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
GENERATOR_CONF = os.path.join(REPO, 'etc', 'scheduler',
                              'scheduler-config-generator.conf')
SAMPLE = os.path.join(REPO, 'etc', 'scheduler', 'scheduler.conf.sample')


def test_sample_config_is_current(tmp_path):
    fresh = tmp_path / 'scheduler.conf.sample'
    subprocess.run(
        [sys.executable, '-m', 'oslo_config.generator', '--config-file',
         GENERATOR_CONF, '--output-file', str(fresh)],
        check=True, cwd=REPO, capture_output=True)
    with open(SAMPLE) as f:
        checked_in = f.read()
    assert fresh.read_text() == checked_in, (
        'etc/scheduler/scheduler.conf.sample is stale: run '
        '"tox -e genconfig" (or oslo-config-generator --config-file '
        'etc/scheduler/scheduler-config-generator.conf) and commit it')


def test_sample_documents_every_scheduler_option():
    from scheduler.conf import opts
    with open(SAMPLE) as f:
        sample = f.read()
    for group, options in opts.list_opts():
        name = getattr(group, 'name', group)
        assert '[%s]' % name in sample
        for opt in options:
            assert '#%s =' % opt.dest in sample, (name, opt.dest)
            assert len(opt.help.strip()) > 40, 'help text of %s' % opt.dest


def test_ci_runs_the_readme_test_command():
    """.ci/run must run exactly what the README tells a newcomer to run."""
    with open(os.path.join(REPO, 'README.md')) as f:
        readme = f.read()
    with open(os.path.join(REPO, '.ci', 'run')) as f:
        ci = f.read()
    commands = [line.strip() for line in readme.splitlines()
                if line.startswith('    python3 -m venv')]
    assert len(commands) == 2, 'the quick start has two commands'
    test_command = [c for c in commands if 'pytest' in c]
    assert test_command and test_command[0] in ci
