"""The Prometheus metrics: what is counted, how it reads, who serves it."""

import json
import logging
import os
import re
import socket
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request

from oslo_config import cfg
import pytest

from scheduler.filters import base
from scheduler import metrics

CONF = cfg.CONF

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(?:,|$)')
UNESCAPE = {'\\\\': '\\', '\\"': '"', '\\n': '\n'}


def parse(text: str) -> dict:
    """Exposition text -> {(name, ((label, value), ...)): float}."""
    samples = {}
    for line in text.splitlines():
        if not line or line.startswith('#'):
            continue
        name, labels, value = SAMPLE.match(line).groups()
        pairs = tuple(
            (key, re.sub(r'\\.', lambda m: UNESCAPE[m.group(0)], val))
            for key, val in LABEL.findall(labels or ''))
        samples[(name, pairs)] = float(value)
    return samples


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def fetch(port: int, path: str = '/metrics', method: str = 'GET'):
    request = urllib.request.Request('http://127.0.0.1:%d%s' % (port, path),
                                     method=method)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.headers, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read().decode()


@pytest.fixture(autouse=True)
def clean_metrics():
    metrics.reset_for_tests()
    yield
    metrics.reset_for_tests()


@pytest.fixture
def serving(conf):
    """Metrics served on a free loopback port; returns the port."""
    port = free_port()
    conf.config(enabled=True, port=port, group='prometheus')
    metrics.start(CONF)
    assert metrics._server is not None
    return port


def requests(samples, method, outcome):
    return samples[('scheduler_requests_total',
                    (('method', method), ('outcome', outcome)))]


# -- rendering ----------------------------------------------------------

def test_every_metric_has_help_and_type():
    text = metrics.render()
    for name, (kind, _help) in metrics.METRICS.items():
        assert '# TYPE %s %s\n' % (name, kind) in text
        assert '# HELP %s ' % name in text
    assert parse(text) == {('scheduler_host_reports_total', ()): 0}


def test_counters_and_gauges():
    metrics.record_request('select_destinations', 'success', 0.01)
    metrics.record_request('select_destinations', 'success', 0.02)
    metrics.record_request('select_destinations', 'no_valid_host', 0.03)
    metrics.record_selections('filter_scheduler', 3)
    metrics.record_selections('filter_scheduler', 2)
    metrics.record_report()
    metrics.set_hosts(known=10, up=9)
    metrics.set_hosts(known=10, up=7)

    samples = parse(metrics.render())

    assert requests(samples, 'select_destinations', 'success') == 2
    assert requests(samples, 'select_destinations', 'no_valid_host') == 1
    assert samples[('scheduler_selections_total',
                    (('driver', 'filter_scheduler'),))] == 5
    assert samples[('scheduler_host_reports_total', ())] == 1
    assert samples[('scheduler_hosts', (('state', 'known'),))] == 10
    assert samples[('scheduler_hosts', (('state', 'up'),))] == 7


def test_filter_steps_count_runs_and_eliminations():
    report = base.FilterReport(steps=[base.FilterStep('RamFilter', 50, 12),
                                      base.FilterStep('DiskFilter', 12, 0)])
    metrics.record_filter_steps(report.steps)
    metrics.record_filter_steps([base.FilterStep('RamFilter', 50, 40)])

    samples = parse(metrics.render())

    def value(metric, name):
        return samples[('scheduler_filter_%s_total' % metric,
                        (('filter', name),))]
    assert value('runs', 'RamFilter') == 2
    assert value('eliminations', 'RamFilter') == 38 + 10
    assert value('runs', 'DiskFilter') == 1
    assert value('eliminations', 'DiskFilter') == 12


def test_histogram_buckets_are_cumulative():
    for seconds in (0.0005, 0.003, 0.003, 0.2, 30):
        metrics.record_request('select_destinations', 'success', seconds)

    samples = parse(metrics.render())

    name = 'scheduler_request_duration_seconds'
    method = ('method', 'select_destinations')
    buckets = sorted(
        (float(labels[1][1]), value) for (sample, labels), value
        in samples.items() if sample == name + '_bucket')
    counts = [count for _le, count in buckets]
    assert counts == sorted(counts), 'buckets must be cumulative'
    by_le = dict(buckets)
    assert by_le[0.001] == 1
    assert by_le[0.0025] == 1
    assert by_le[0.005] == 3
    assert by_le[0.1] == 3
    assert by_le[0.25] == 4
    assert by_le[10.0] == 4
    assert by_le[float('inf')] == 5
    assert samples[(name + '_count', (method,))] == 5
    assert samples[(name + '_sum', (method,))] == pytest.approx(30.2065)


def test_a_duration_on_a_bound_falls_in_that_bucket():
    metrics.record_request('explain', 'success', 0.1)
    samples = parse(metrics.render())
    bucket = 'scheduler_request_duration_seconds_bucket'
    assert samples[(bucket, (('method', 'explain'), ('le', '0.1')))] == 1
    assert samples[(bucket, (('method', 'explain'), ('le', '0.05')))] == 0


def test_histogram_buckets_come_from_the_config(conf):
    conf.config(histogram_buckets=[2.0, 0.5], group='prometheus')
    conf.config(enabled=True, port=free_port(), group='prometheus')
    metrics.start(CONF)
    metrics.record_request('select_destinations', 'success', 1)

    text = metrics.render()

    bounds = re.findall(r'_bucket\{method="select_destinations",le="([^"]+)"',
                        text)
    assert bounds == ['0.5', '2.0', '+Inf']


def test_label_values_are_escaped():
    name = 'Odd\\Filter "quoted"\nsecond line'
    metrics.record_filter_steps([base.FilterStep(name, 3, 1)])

    text = metrics.render()

    assert ('scheduler_filter_runs_total'
            '{filter="Odd\\\\Filter \\"quoted\\"\\nsecond line"} 1') in text
    samples = parse(text)
    assert samples[('scheduler_filter_eliminations_total',
                    (('filter', name),))] == 2


# -- workers' files ------------------------------------------------------

def _worker_file(directory, pid, start=None, answered=0, up=None,
                 up_at=0.0, durations=()):
    """A file as another worker would write it."""
    registry = metrics._Registry([0.1, 1.0])
    registry.inc([('scheduler_requests_total',
                   (('method', 'select_destinations'),
                    ('outcome', 'success')), answered)])
    for seconds in durations:
        registry.observe('scheduler_request_duration_seconds',
                         (('method', 'select_destinations'),), seconds)
    snapshot = registry.snapshot()
    if up is not None:
        snapshot['gauges'] = [['scheduler_hosts', {'state': 'up'}, up, up_at]]
    snapshot['pid'] = pid
    snapshot['start'] = start or metrics._start_time(pid)
    path = directory / ('%d.json' % pid)
    path.write_text(json.dumps(snapshot))
    return path


@pytest.fixture
def other_processes():
    """Three live processes: two stand in for workers, one for a stranger."""
    procs = [subprocess.Popen([sys.executable, '-c',
                               'import time; time.sleep(60)'])
             for _ in range(3)]
    yield [proc.pid for proc in procs]
    for proc in procs:
        proc.kill()
        proc.wait()


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, '-c', 'pass'])
    proc.wait()
    return proc.pid


def test_a_scrape_adds_up_every_live_worker(conf, tmp_path,
                                            other_processes):
    conf.config(enabled=True, port=free_port(), histogram_buckets=[0.1, 1],
                group='prometheus')
    metrics.start(CONF)
    directory = tmp_path / 'metrics'
    first, second, stranger = other_processes
    now = time.time()
    metrics.record_request('select_destinations', 'success', 0.05)
    metrics.set_hosts(known=4, up=2)  # set now: newer than the others
    first_file = _worker_file(directory, first, answered=2, up=3,
                              up_at=now - 30, durations=[0.5, 2])
    second_file = _worker_file(directory, second, answered=5, up=1,
                               up_at=now - 60, durations=[0.05])
    dead_file = _worker_file(directory, _dead_pid(), answered=100)
    # A worker that died long ago, whose pid another program now has
    # (told apart by the start time in /proc).
    reused_file = _worker_file(directory, stranger, start='1',
                               answered=1000)

    samples = parse(metrics.render())

    assert requests(samples, 'select_destinations', 'success') == 1 + 2 + 5
    assert samples[('scheduler_hosts', (('state', 'up'),))] == 2
    assert samples[('scheduler_hosts', (('state', 'known'),))] == 4
    name = 'scheduler_request_duration_seconds'
    method = ('method', 'select_destinations')
    assert samples[(name + '_bucket', (method, ('le', '0.1')))] == 2
    assert samples[(name + '_bucket', (method, ('le', '1.0')))] == 3
    assert samples[(name + '_bucket', (method, ('le', '+Inf')))] == 4
    assert samples[(name + '_count', (method,))] == 4
    assert samples[(name + '_sum', (method,))] == pytest.approx(2.6)
    assert first_file.exists() and second_file.exists()
    assert not dead_file.exists()
    assert not reused_file.exists()


def test_the_newest_gauge_wins(conf, tmp_path, other_processes):
    conf.config(enabled=True, port=free_port(), group='prometheus')
    metrics.start(CONF)
    metrics.set_hosts(known=4, up=2)
    _worker_file(tmp_path / 'metrics', other_processes[0], up=3,
                 up_at=time.time() + 60)

    samples = parse(metrics.render())

    assert samples[('scheduler_hosts', (('state', 'up'),))] == 3
    assert samples[('scheduler_hosts', (('state', 'known'),))] == 4


def test_files_not_written_by_a_worker_are_ignored(conf, tmp_path,
                                                   other_processes):
    conf.config(enabled=True, port=free_port(), group='prometheus')
    metrics.start(CONF)
    metrics.record_report()
    directory = tmp_path / 'metrics'
    (directory / ('%d.json' % other_processes[0])).write_text('{"half": ')
    (directory / ('%d.json' % other_processes[1])).write_text('[1, 2]')
    (directory / '.123.abc.tmp').write_text('{}')
    (directory / 'notes.txt').write_text('hello')

    samples = parse(metrics.render())

    assert samples[('scheduler_host_reports_total', ())] == 1


def test_flush_writes_this_workers_file_and_stop_removes_it(
        serving, tmp_path):
    own = tmp_path / 'metrics' / ('%d.json' % os.getpid())
    metrics.record_report()
    metrics.flush()
    snapshot = json.loads(own.read_text())
    assert snapshot['pid'] == os.getpid()
    assert ['scheduler_host_reports_total', {}, 1] in snapshot['counters']
    assert [p.name for p in own.parent.iterdir()] == [own.name]

    metrics.stop()

    assert not own.exists()
    with pytest.raises(OSError):
        socket.create_connection(('127.0.0.1', serving), timeout=5)


# -- the endpoint --------------------------------------------------------

def test_the_endpoint_serves_the_exposition(serving):
    metrics.record_request('select_destinations', 'success', 0.2)

    status, headers, body = fetch(serving)

    assert status == 200
    assert headers['Content-Type'] == metrics.CONTENT_TYPE
    assert requests(parse(body), 'select_destinations', 'success') == 1


@pytest.mark.parametrize('path', ['/', '/metrics/x', '/favicon.ico'])
def test_other_paths_are_not_found(serving, path):
    status, _headers, _body = fetch(serving, path)
    assert status == 404


@pytest.mark.parametrize('method', ['POST', 'PUT', 'DELETE', 'HEAD', 'FOO'])
def test_other_methods_are_not_allowed(serving, method):
    status, headers, _body = fetch(serving, method=method)
    assert status == 405
    assert headers['Allow'] == 'GET'


def test_a_busy_port_is_logged_and_the_service_carries_on(conf, caplog):
    caplog.set_level(logging.INFO, logger='scheduler.metrics')
    with socket.socket() as taken:
        taken.bind(('127.0.0.1', 0))
        taken.listen()
        port = taken.getsockname()[1]
        conf.config(enabled=True, port=port, group='prometheus')

        metrics.start(CONF)

        errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
        assert len(errors) == 1
        assert '[prometheus] port' in errors[0].getMessage()
        assert str(port) in errors[0].getMessage()
        assert metrics._server is None
    metrics.record_request('select_destinations', 'success', 0.1)
    metrics.flush()
    assert requests(parse(metrics.render()), 'select_destinations',
                    'success') == 1


def test_disabled_by_default_nothing_listens(conf, tmp_path):
    assert CONF.prometheus.enabled is False
    port = free_port()
    conf.config(port=port, group='prometheus')

    metrics.start(CONF)
    metrics.record_report()
    metrics.flush()

    assert metrics._server is None
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(('127.0.0.1', port), timeout=5)
    assert not (tmp_path / 'metrics').exists()
    metrics.stop()


def test_start_twice_keeps_one_server(serving):
    metrics.start(CONF)
    assert fetch(serving)[0] == 200


# -- real worker processes ------------------------------------------------

WORKER = textwrap.dedent("""
    import os, sys, time, urllib.request
    if sys.argv[1] == 'green':
        from scheduler import concurrency
        concurrency.monkey_patch()
        assert concurrency.is_patched()
    from oslo_config import cfg
    from scheduler import conf, metrics
    state_path, port, stop_file = sys.argv[2], int(sys.argv[3]), sys.argv[4]
    cfg.CONF([], default_config_files=[])
    cfg.CONF.set_override('state_path', state_path)
    cfg.CONF.set_override('enabled', True, group='prometheus')
    cfg.CONF.set_override('port', port, group='prometheus')
    metrics.record_request('select_destinations', 'success', 0.5)
    metrics.record_request('select_destinations', 'success', 0.5)
    metrics.start(cfg.CONF)
    assert metrics._server is not None
    url = 'http://127.0.0.1:%d/metrics' % port
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.status == 200
    print('ready', flush=True)
    while not os.path.exists(stop_file):
        time.sleep(0.05)
    metrics.stop()
""")


def _run_worker(mode, tmp_path, port):
    env = dict(os.environ, PYTHONPATH=REPO)
    env.pop('SCHEDULER_NO_MONKEY_PATCH', None)
    proc = subprocess.Popen(
        [sys.executable, '-c', WORKER, mode, str(tmp_path), str(port),
         str(tmp_path / 'stop')],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        cwd=REPO)
    line = proc.stdout.readline()
    if line != 'ready\n':
        proc.kill()
        _out, err = proc.communicate()
        pytest.fail('worker did not start: %s' % err)
    return proc


def _stop_worker(proc, tmp_path):
    (tmp_path / 'stop').touch()
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err


@pytest.mark.parametrize('mode', ['green', 'threads'])
def test_workers_share_the_port_and_every_scrape_shows_all(
        conf, tmp_path, mode):
    port = free_port()
    conf.config(enabled=True, port=port, group='prometheus')
    metrics.record_request('select_destinations', 'success', 0.1)
    metrics.start(CONF)
    worker = _run_worker(mode, tmp_path, port)
    worker_file = tmp_path / 'metrics' / ('%d.json' % worker.pid)
    try:
        assert worker_file.exists()
        for _ in range(10):  # new connections: either process answers
            status, _headers, body = fetch(port)
            assert status == 200
            assert requests(parse(body), 'select_destinations',
                            'success') == 3
    finally:
        _stop_worker(worker, tmp_path)
    assert not worker_file.exists()
    assert requests(parse(fetch(port)[2]), 'select_destinations',
                    'success') == 1
