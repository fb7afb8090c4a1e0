"""The Prometheus metrics: what is counted, how it reads, who serves it."""

import logging
import os
import re
import socket
import subprocess
import sys
import textwrap
import urllib.error
import urllib.request

from oslo_config import cfg
import pytest

from prometheus_client import values

from scheduler.conf import prometheus as prometheus_conf
from scheduler.filters import base
from scheduler import metrics

CONF = cfg.CONF

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(?:,|$)')
UNESCAPE = {'\\\\': '\\', '\\"': '"', '\\n': '\n'}


def parse(text: str) -> dict:
    """Exposition text -> {(name, ((label, value), ...)): float}.

    Labels sorted by name: their order in the text means nothing.
    """
    samples = {}
    for line in text.splitlines():
        if not line or line.startswith('#'):
            continue
        name, labels, value = SAMPLE.match(line).groups()
        pairs = tuple(sorted(
            (key, re.sub(r'\\.', lambda m: UNESCAPE[m.group(0)], val))
            for key, val in LABEL.findall(labels or '')))
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
def clean_metrics(monkeypatch):
    """Every test starts in memory, on the default buckets, not serving.

    prepare() switches prometheus_client to multiprocess mode for the
    whole process: undone here so that other tests count in memory.
    """
    def fresh():
        metrics.stop()
        monkeypatch.delenv('PROMETHEUS_MULTIPROC_DIR', raising=False)
        values.ValueClass = values.MutexValue
        metrics._directory = None
        metrics._metrics = metrics._Metrics(prometheus_conf.DEFAULT_BUCKETS)
    fresh()
    yield
    fresh()


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
    for name, (kind, _help, _labels) in metrics.METRICS.items():
        assert '# TYPE %s %s\n' % (name, kind) in text
        assert '# HELP %s ' % name in text
    assert parse(text) == {(name, ()): 0
                           for name, (kind, _h, labels) in
                           metrics.METRICS.items()
                           if kind in ('counter', 'gauge')
                           and not labels}


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


def test_children_are_prometheus_clients_own_and_new_with_a_new_registry(
        conf, tmp_path):
    # Looked up once: the child prometheus_client gives, every time.
    child = metrics._metrics.child('scheduler_requests_total', 'm', 'ok')
    assert child is metrics._metrics.by_name[
        'scheduler_requests_total'].labels('m', 'ok')
    assert metrics._metrics.child('scheduler_requests_total', 'm',
                                  'ok') is child
    metrics.record_request('m', 'ok', 0.01)
    assert requests(parse(metrics.render()), 'm', 'ok') == 1
    # A new set of metrics (multiprocess mode here) starts from its own.
    conf.config(enabled=True, group='prometheus')
    conf.config(state_path=str(tmp_path))
    metrics.prepare(CONF)
    assert metrics._metrics.child('scheduler_requests_total', 'm',
                                  'ok') is not child
    metrics.record_request('m', 'ok', 0.01)
    metrics.record_request('m', 'ok', 0.01)
    assert requests(parse(metrics.render()), 'm', 'ok') == 2


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
        (float(dict(labels)['le']), value) for (sample, labels), value
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
    assert samples[(bucket, (('le', '0.1'), ('method', 'explain')))] == 1
    assert samples[(bucket, (('le', '0.05'), ('method', 'explain')))] == 0


def test_histogram_buckets_come_from_the_config(conf):
    conf.config(histogram_buckets=[2.0, 0.5], group='prometheus')
    conf.config(enabled=True, port=free_port(), group='prometheus')
    metrics.start(CONF)
    metrics.record_request('select_destinations', 'success', 1)

    text = metrics.render()

    bounds = re.findall(r'_bucket\{le="([^"]+)",method="select_destinations"',
                        text)
    assert bounds == ['0.5', '2.0', '+Inf']


def test_label_values_are_escaped():
    name = 'Odd\\Filter "quoted"\nsecond line'
    metrics.record_filter_steps([base.FilterStep(name, 3, 1)])

    text = metrics.render()

    assert ('scheduler_filter_runs_total'
            '{filter="Odd\\\\Filter \\"quoted\\"\\nsecond line"} 1.0') in text
    samples = parse(text)
    assert samples[('scheduler_filter_eliminations_total',
                    (('filter', name),))] == 2


def test_filter_steps_of_several_instances_add_up_per_filter():
    metrics.record_filter_steps([
        base.FilterStep('RamFilter', 10, 4),
        base.FilterStep('DiskFilter', 4, 4),
        base.FilterStep('RamFilter', 4, 3),
        base.FilterStep('DiskFilter', 3, 1)])

    samples = parse(metrics.render())

    runs = ('scheduler_filter_runs_total', (('filter', 'RamFilter'),))
    gone = ('scheduler_filter_eliminations_total',
            (('filter', 'DiskFilter'),))
    assert samples[runs] == 2
    assert samples[gone] == 2
    assert samples[('scheduler_filter_eliminations_total',
                    (('filter', 'RamFilter'),))] == 7


# -- multiprocess mode ----------------------------------------------------

def test_prepare_empties_the_directory_and_files_take_the_values(
        conf, tmp_path):
    directory = tmp_path / 'metrics'
    directory.mkdir()
    (directory / 'counter_123.db').write_text('left by a previous run')
    conf.config(enabled=True, group='prometheus')

    metrics.prepare(CONF)
    metrics.record_report()

    names = sorted(p.name for p in directory.iterdir())
    assert 'counter_123.db' not in names
    assert 'counter_%d.db' % os.getpid() in names
    assert parse(metrics.render())[('scheduler_host_reports_total', ())] == 1


def test_prepare_does_nothing_when_disabled(conf, tmp_path):
    metrics.prepare(CONF)
    assert not (tmp_path / 'metrics').exists()
    assert 'PROMETHEUS_MULTIPROC_DIR' not in os.environ


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
    assert requests(parse(metrics.render()), 'select_destinations',
                    'success') == 1


def test_disabled_by_default_nothing_listens(conf, tmp_path):
    assert CONF.prometheus.enabled is False
    port = free_port()
    conf.config(port=port, group='prometheus')

    metrics.start(CONF)
    metrics.record_report()

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
    # A second worker: the multiprocess directory the test process (the
    # "parent") prepared comes in its environment.
    import os, sys, time, urllib.request
    if sys.argv[1] == 'green':
        from scheduler import concurrency
        concurrency.monkey_patch()
        import eventlet.patcher
        assert eventlet.patcher.is_monkey_patched('socket')
    from oslo_config import cfg
    from scheduler import conf, metrics
    state_path, port, stop_file = sys.argv[2], int(sys.argv[3]), sys.argv[4]
    cfg.CONF([], default_config_files=[])
    cfg.CONF.set_override('state_path', state_path)
    cfg.CONF.set_override('enabled', True, group='prometheus')
    cfg.CONF.set_override('port', port, group='prometheus')
    metrics.start(cfg.CONF)
    assert metrics._server is not None
    metrics.record_request('select_destinations', 'success', 0.5)
    metrics.record_request('select_destinations', 'success', 0.5)
    metrics.set_hosts(known=4, up=4)
    url = 'http://127.0.0.1:%d/metrics' % port
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.status == 200
    print('ready', flush=True)
    while not os.path.exists(stop_file):
        time.sleep(0.05)
    metrics.stop()
""")


def _scrape(port) -> dict:
    status, _headers, body = fetch(port)
    assert status == 200
    return parse(body)


@pytest.mark.parametrize('mode', ['green', 'threads'])
def test_workers_share_the_port_and_every_scrape_shows_all(
        conf, tmp_path, mode):
    port = free_port()
    conf.config(enabled=True, port=port, group='prometheus')
    metrics.prepare(CONF)
    metrics.record_request('select_destinations', 'success', 0.1)
    metrics.set_hosts(known=2, up=2)
    metrics.start(CONF)
    env = dict(os.environ, PYTHONPATH=REPO)
    env.pop('SCHEDULER_NO_MONKEY_PATCH', None)
    proc = subprocess.Popen(
        [sys.executable, '-c', WORKER, mode, str(tmp_path), str(port),
         str(tmp_path / 'stop')], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)
    try:
        if proc.stdout.readline() != 'ready\n':
            proc.kill()
            pytest.fail('worker did not start: %s' % proc.communicate()[1])
        for _ in range(10):  # new connections: either process answers
            samples = _scrape(port)
            assert requests(samples, 'select_destinations', 'success') == 3
            assert samples[('scheduler_hosts', (('state', 'known'),))] == 4
    finally:
        (tmp_path / 'stop').touch()
        _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    samples = _scrape(port)
    # Counters keep what the gone worker counted; its gauge is gone.
    assert requests(samples, 'select_destinations', 'success') == 3
    assert samples[('scheduler_hosts', (('state', 'known'),))] == 2
