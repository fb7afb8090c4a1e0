"""The scheduler's own metrics, served by prometheus_client.

With ``[prometheus] enabled``, ``prepare()`` (in the parent, before the
workers fork) points prometheus_client's multiprocess mode at
``<state_path>/metrics``; every worker serves ``/metrics`` on the same
port (SO_REUSEPORT) and reads every process's files, so a scrape shows
the whole service whichever worker answers.  A stopped worker is marked
dead: its gauges no longer count, its counters stay in the totals.
Disabled, the metrics are counted in memory and nothing is served.
"""

import os
import shutil
import socket
import threading
import typing
from wsgiref import simple_server

from oslo_log import log as logging
import prometheus_client
from prometheus_client import multiprocess
from prometheus_client import values

from scheduler.conf import prometheus as prometheus_conf

LOG = logging.getLogger(__name__)

CONTENT_TYPE = prometheus_client.CONTENT_TYPE_LATEST

#: name -> (type, help, label names), in the order of the exposition.
METRICS = {
    'scheduler_requests_total': (
        'counter', 'Scheduling requests answered, by RPC method and outcome.',
        ('method', 'outcome')),
    'scheduler_request_duration_seconds': (
        'histogram', 'Time to answer a scheduling request, by RPC method.',
        ('method',)),
    'scheduler_selections_total': (
        'counter', 'Instances placed on a host, by scheduler driver.',
        ('driver',)),
    'scheduler_filter_runs_total': (
        'counter', 'Times a host filter ran over the candidate hosts.',
        ('filter',)),
    'scheduler_filter_eliminations_total': (
        'counter', 'Candidate hosts a host filter removed.', ('filter',)),
    'scheduler_hosts': (
        'gauge', 'Compute hosts the scheduler knows of, and those up.',
        ('state',)),
    'scheduler_host_reports_total': (
        'counter', 'Host state reports received from compute agents.', ()),
    'scheduler_report_lag_seconds': (
        'gauge', 'Time from a compute sending its report to a worker taking '
                 'it (the least over the last reports taken): how long '
                 'reports wait on the bus.', ()),
    'scheduler_claim_conflicts_total': (
        'counter', 'Claims that lost a race for a node to another worker '
                   'and were retried on the next candidate.', ()),
    'scheduler_rejected_requests_total': (
        'counter', 'Calls, casts and raw messages refused as malformed or '
                   'over a limit, by method and error type.',
        ('method', 'error')),
    'scheduler_claims_expired_total': (
        'counter', 'Claims released because the compute never reported '
                   'the instance (a build that was probably lost).', ()),
}

# No "_created" samples: multiprocess mode cannot give them.
prometheus_client.disable_created_metrics()


class _Metrics:
    """One set of metric objects, in one registry.

    Rebuilt when the mode (in memory or multiprocess) or the histogram
    buckets change: prometheus_client fixes both when a metric is made.
    """

    def __init__(self, buckets: typing.Iterable[float]):
        self.buckets = tuple(sorted(set(float(b) for b in buckets)))
        self.registry = prometheus_client.CollectorRegistry(
            auto_describe=True)
        self.by_name: dict = {}
        for name, (kind, help_text, labels) in METRICS.items():
            if kind == 'counter':
                metric = prometheus_client.Counter(
                    name, help_text, labels, registry=self.registry)
            elif kind == 'gauge':
                # Every worker sees the same fleet: the newest value of a
                # live worker, not a sum over workers.
                metric = prometheus_client.Gauge(
                    name, help_text, labels, registry=self.registry,
                    multiprocess_mode='livemostrecent')
            else:
                metric = prometheus_client.Histogram(
                    name, help_text, labels, registry=self.registry,
                    buckets=self.buckets)
            self.by_name[name] = metric
        self._children: dict = {}

    def child(self, name: str, *labels: str):
        """``by_name[name].labels(*labels)``, looked up once (a request
        records two per filter; ``labels`` takes a lock each time).
        Nothing removes a child, so it is the one ``labels`` would give.
        """
        key = (name, labels)
        found = self._children.get(key)
        if found is None:
            found = self._children[key] = self.by_name[name].labels(*labels)
        return found


_lock = threading.Lock()
_metrics = _Metrics(prometheus_conf.DEFAULT_BUCKETS)
#: The multiprocess directory, once prepare() chose one.
_directory: str | None = None
_server: simple_server.WSGIServer | None = None


# -- what the service records -------------------------------------------

def record_request(method: str, outcome: str, seconds: float) -> None:
    """Count and time one answered request: rate, errors and latency."""
    m = _metrics
    m.child('scheduler_requests_total', method, outcome).inc()
    m.child('scheduler_request_duration_seconds', method).observe(seconds)


def record_selections(driver: str, count: int) -> None:
    """Count instances placed, to compare with requests received."""
    _metrics.child('scheduler_selections_total', driver).inc(count)


def record_filter_steps(steps: typing.Iterable) -> None:
    """Count runs and eliminations per filter, from a FilterReport's
    steps (summed per filter first: each instance walks the filters)."""
    runs: dict = {}
    removed: dict = {}
    for step in steps:
        runs[step.name] = runs.get(step.name, 0) + 1
        removed[step.name] = removed.get(step.name, 0) + step.removed
    m = _metrics
    for name, count in runs.items():
        m.child('scheduler_filter_runs_total', name).inc(count)
        # Made (so exported, at 0) even when nothing was removed, but
        # not incremented by 0: each increment takes a lock.
        eliminations = m.child('scheduler_filter_eliminations_total', name)
        if removed[name]:
            eliminations.inc(removed[name])


def set_hosts(known: int, up: int) -> None:
    """Set the host gauges; a drop in ``up`` means computes went silent."""
    gauge = _metrics.by_name['scheduler_hosts']
    gauge.labels('known').set(known)
    gauge.labels('up').set(up)


def record_report(count: int = 1) -> None:
    """Count ``count`` compute reports: their rate shows the fleet is
    talking.  Counted at once for the nodes of one message: each
    increment takes a lock."""
    if count:
        _metrics.by_name['scheduler_host_reports_total'].inc(count)


def set_report_lag(seconds: float) -> None:
    """Set the report lag gauge (``scheduler.report_lag``)."""
    _metrics.by_name['scheduler_report_lag_seconds'].set(seconds)


def record_claim_conflict() -> None:
    """Count a lost claim race: a steady rate means workers collide."""
    _metrics.by_name['scheduler_claim_conflicts_total'].inc()


def record_rejection(method: str, error: str) -> None:
    """Count one refused call or message: a rising rate is an attack
    or a broken caller, even when the log rate-limits its lines."""
    _metrics.child('scheduler_rejected_requests_total', method,
                   error).inc()


def record_claim_expired() -> None:
    """Count one claim the compute never confirmed (a lost build)."""
    _metrics.by_name['scheduler_claims_expired_total'].inc()


# -- serving ------------------------------------------------------------

def prepare(conf) -> None:
    """With ``[prometheus] enabled``, in the parent before the workers
    fork: empty ``<state_path>/metrics`` and write there from now on."""
    if not conf.prometheus.enabled:
        return
    directory = os.path.join(conf.state_path, 'metrics')
    with _lock:
        shutil.rmtree(directory, ignore_errors=True)
        os.makedirs(directory, exist_ok=True)
        os.environ['PROMETHEUS_MULTIPROC_DIR'] = directory
        _write_to(directory, conf)


def start(conf) -> None:
    """Serve ``/metrics`` when ``[prometheus] enabled``; each worker
    calls it after the fork.  A port that cannot be bound is logged:
    metrics must never keep the scheduler from scheduling."""
    global _metrics, _server
    group = conf.prometheus
    if not group.enabled:
        return
    if _directory is None:
        _join_or_prepare(conf)
    _stop_serving()
    buckets = tuple(sorted(set(float(b) for b in group.histogram_buckets)))
    with _lock:
        if buckets != _metrics.buckets:
            _metrics = _Metrics(buckets)
    host, port = group.bind_host, group.port
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        server = simple_server.make_server(
            host, port, _app, _server_class(family),
            handler_class=_QuietHandler)
    except OSError as e:
        LOG.error('Cannot serve metrics on %(host)s:%(port)s set by '
                  '[prometheus] bind_host and [prometheus] port: %(error)s; '
                  'running without the /metrics endpoint',
                  {'host': host, 'port': port, 'error': e})
        return
    _server = server
    threading.Thread(target=server.serve_forever, name='prometheus',
                     kwargs={'poll_interval': 0.1}, daemon=True).start()
    LOG.info('Serving metrics at http://%s:%d/metrics (pid %d)',
             host, server.server_address[1], os.getpid())


def _join_or_prepare(conf) -> None:
    """Use the directory a parent prepared (it is in our environment),
    else prepare one: a service started without ``prepare()``."""
    directory = os.path.join(conf.state_path, 'metrics')
    if os.environ.get('PROMETHEUS_MULTIPROC_DIR') != directory:
        prepare(conf)
        return
    with _lock:
        _write_to(directory, conf)


def _write_to(directory: str, conf) -> None:
    """Metrics made from now on write to ``directory`` (under ``_lock``)."""
    global _metrics, _directory
    values.ValueClass = values.MultiProcessValue()
    _directory = directory
    _metrics = _Metrics(conf.prometheus.histogram_buckets)


def stop() -> None:
    """Stop serving; this process's gauges stop counting (it is going)."""
    _stop_serving()
    if _directory is not None:
        multiprocess.mark_process_dead(os.getpid(), _directory)


def render() -> str:
    """The exposition of every process of the service (``/metrics``)."""
    return prometheus_client.generate_latest(_registry()).decode('utf-8')


def _registry() -> prometheus_client.CollectorRegistry:
    if _directory is None:
        return _metrics.registry
    registry = prometheus_client.CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=_directory)
    return registry


def _stop_serving() -> None:
    global _server
    server, _server = _server, None
    if server is not None:
        server.shutdown()
        server.server_close()


def _app(environ, start_response):
    """``GET /metrics``; 404 for other paths, 405 for other methods."""
    if environ.get('PATH_INFO', '/') != '/metrics':
        return _reply(start_response, '404 Not Found',
                      b'Not found: metrics are at /metrics\n')
    if environ['REQUEST_METHOD'] != 'GET':
        return _reply(start_response, '405 Method Not Allowed',
                      b'Method not allowed: use GET\n', [('Allow', 'GET')])
    try:
        body = render().encode('utf-8')
    except Exception:
        LOG.exception('Could not render the metrics')
        return _reply(start_response, '500 Internal Server Error',
                      b'Could not render the metrics\n')
    return _reply(start_response, '200 OK', body, content_type=CONTENT_TYPE)


def _reply(start_response, status: str, body: bytes, headers=(),
           content_type: str = 'text/plain; charset=utf-8') -> list:
    start_response(status, [('Content-Type', content_type),
                            ('Content-Length', str(len(body)))]
                   + list(headers))
    return [body]


class _QuietHandler(simple_server.WSGIRequestHandler):
    """Scrapes logged at debug level, not on stderr."""

    timeout = 10  # a stuck client must not hold a (green)thread forever

    def log_message(self, format: str, *args) -> None:
        LOG.debug('metrics endpoint: %s - %s', self.address_string(),
                  format % args)


def _server_class(family: int) -> type:
    """prometheus_client's threading WSGI server, on a shared port."""

    class Server(prometheus_client.exposition.ThreadingWSGIServer):
        address_family = family
        allow_reuse_address = True

        def server_bind(self) -> None:
            # SO_REUSEPORT lets every worker bind the port; the kernel
            # spreads connections among them.
            self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT,
                                   1)
            super().server_bind()

    return Server
