"""``scheduler-manage`` for a big fleet, against a running service.

A service on PostgreSQL with two simulated fleets on RabbitMQ; one
fleet stops, as computes taken out of service do.  The command line
reads what the service flushed to the inventory (``hosts list`` with
filters, a sort, a limit and the totals; ``hosts delete --all-down``
for every host gone at once), asks the service (``select``; its
NoValidHost points to ``explain``), and with ``debug = True`` in its
config file (as devstack writes it) prints its answer with no log line
above it.
"""

import json
import re
import subprocess

from scheduler.cli import hosts as hosts_cli
from scheduler.db import api as db_api
from tests.functional import daemons
from tests.unit import fixtures

#: A log line as oslo.log writes it (date, time, pid, level).
LOG_LINE = re.compile(r'^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ \d+ [A-Z]+ ',
                      re.MULTILINE)


def _fleet(tmp_path, prefix: str, count: int, memory_gb: int) -> str:
    path = tmp_path / ('%s.json' % prefix)
    path.write_text(json.dumps({'groups': [{
        'prefix': prefix, 'count': count, 'memory_mb': memory_gb * 1024,
        'local_gb': 1000, 'vcpus': 32}]}))
    return str(path)


def _client_config(cluster, database_url: str) -> str:
    """The operator's config: the service's debug setting, and its
    ``service_down_time`` (the one ``hosts`` and ``--all-down`` use)."""
    return daemons.write_multi_config(
        str(cluster.tmp / 'operator.conf'),
        '[DEFAULT]\ntransport_url = %s\ndebug = True\n\n[scheduler]\n'
        'topic = %s\nservice_down_time = 6\n\n[database]\nconnection = %s\n'
        % (cluster.transport_url, cluster.topic, database_url))


def _states() -> dict:
    """host -> state, as ``hosts list`` computes it (in this process:
    cheaper to poll than the command)."""
    return {row['host']: row['state'] for row in hosts_cli.host_rows()}


def test_operating_a_fleet_from_the_command_line(cluster, conf,
                                                 postgresql_url):
    cluster.start_scheduler(postgresql_url)
    cluster.start_sim(name='sim-web', fleet=_fleet(cluster.tmp, 'web', 6, 64))
    gone = cluster.start_sim(name='sim-db',
                             fleet=_fleet(cluster.tmp, 'db', 3, 16))
    config = _client_config(cluster, postgresql_url)
    conf.config(connection=postgresql_url, group='database')
    conf.config(service_down_time=6, group='scheduler')
    db_api.reset_engine()
    daemons.wait_for(
        lambda: list(_states().values()).count('up')
        == 9, 60, what='the service to flush every report')

    def manage(*args: str) -> subprocess.CompletedProcess:
        done = subprocess.run(
            [daemons.console_script('scheduler-manage'), '--config-file',
             config] + list(args), capture_output=True, text=True,
            timeout=120)
        # debug = True is the service's: a command prints its answer
        # (or its one-line error), no log line above it.
        assert not LOG_LINE.search(done.stdout + done.stderr), \
            (done.stdout + done.stderr)[:3000]
        return done

    def listed(*args: str) -> list:
        done = manage('hosts', 'list', '--format', 'json', *args)
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout)

    # What the service flushed to the inventory: filtered, sorted, cut
    # and summed up.
    assert [r['host'] for r in listed('--host', 'db-*')] == \
        ['db-001', 'db-002', 'db-003']
    done = manage('hosts', 'list', '--format', 'json', '--sort=-memory_mb',
                  '--limit', '2')
    assert done.returncode == 0, done.stderr[-3000:]
    assert [r['memory_mb'] for r in json.loads(done.stdout)] == \
        [64 * 1024] * 2
    assert '(2 of 9 matching node(s); --limit 0 for all)' in done.stderr
    totals = {row['field']: row['value'] for row in listed('--summary')}
    assert (totals['nodes'], totals['nodes up'], totals['memory_mb']) == \
        (9, 9, (6 * 64 + 3 * 16) * 1024)

    # select asks the service (32 GB: a web host); a NoValidHost points
    # to explain.
    done = manage('select', '--format', 'json', '--ram', str(32 * 1024))
    assert done.returncode == 0, done.stderr[-3000:]
    (placed,) = json.loads(done.stdout)
    assert placed['host'].startswith('web-'), placed
    failed = manage('select', '--ram', str(10 ** 8))
    assert failed.returncode == 1
    assert failed.stdout == ''
    assert 'NoValidHost' in failed.stderr
    assert '"explain --admin"' in failed.stderr, failed.stderr[-3000:]

    # One fleet stops: its hosts go down, and go in one command.
    gone.stop()
    daemons.wait_for(
        lambda: sorted(h for h, state in _states().items()
                       if state == 'down')
        == ['db-001', 'db-002', 'db-003'], 60,
        what='the stopped fleet to be down')
    done = manage('hosts', 'delete', '--all-down')
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.findall(r'^Deleted host (\S+): 1 node', done.stdout,
                      re.MULTILINE) == ['db-001', 'db-002', 'db-003'], \
        done.stdout
    assert '3 host(s) deleted, 0 refused' in done.stdout
    assert sorted(r['host'] for r in listed()) == \
        ['web-%03d' % n for n in range(1, 7)]
    # The running service forgets them too, and keeps serving the rest.
    daemons.wait_for(
        lambda: cluster.api.explain(cluster.admin_ctxt, fixtures.request(
            memory_mb=64))['hosts_known'] == 6, 60,
        what='the service to forget the deleted hosts')
    assert 'was deleted from the inventory; forgot it' in \
        cluster.scheduler.log()
