"""The demo against RabbitMQ: service and simulator as separate processes."""

import subprocess

from tests.functional import daemons


def test_demo_over_rabbitmq(rabbit_url):
    done = subprocess.run(
        [daemons.console_script('scheduler-demo'), '--transport-url',
         rabbit_url], capture_output=True, text=True, timeout=300,
        stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for driver in ('filter_scheduler', 'chance_scheduler', 'ip_scheduler'):
        assert '== %s ==' % driver in done.stdout
    assert 'Every check passed' in done.stdout
