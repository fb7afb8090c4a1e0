"""The scheduler's own metrics, served in the Prometheus text format.

Written on the standard library rather than prometheus_client so the
service keeps its dependency list, and because the multi-process part
it needs is small:

* each process counts in memory, under one lock (cheap on the request
  path);
* a process writes its values to ``<state_path>/metrics/<pid>.json``
  (temp file + rename, so readers never see half a file) on ``flush()``
  and before it answers a scrape;
* every worker listens on the same port (SO_REUSEPORT) and the kernel
  hands a scrape to one of them, which adds up the files of all live
  workers and deletes those of workers that are gone.

So a scrape shows the whole service whichever worker answers.  A
worker that restarts comes back with a new pid and zero counts, which
Prometheus sees as a counter reset, as it would with one process.
"""

import bisect
import contextlib
import http.server
import json
import math
import os
import socket
import socketserver
import tempfile
import threading
import time
import typing

from oslo_log import log as logging

from scheduler.conf import prometheus as prometheus_conf

LOG = logging.getLogger(__name__)

CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8'

#: Seconds between the server's checks for stop(): how long stop() waits.
_POLL_INTERVAL = 0.1

#: name -> (type, help), in the order of the exposition.
METRICS = {
    'scheduler_requests_total': (
        'counter', 'Scheduling requests answered, by RPC method and outcome.'),
    'scheduler_request_duration_seconds': (
        'histogram', 'Time to answer a scheduling request, by RPC method.'),
    'scheduler_selections_total': (
        'counter', 'Instances placed on a host, by scheduler driver.'),
    'scheduler_filter_runs_total': (
        'counter', 'Times a host filter ran over the candidate hosts.'),
    'scheduler_filter_eliminations_total': (
        'counter', 'Candidate hosts a host filter removed.'),
    'scheduler_hosts': (
        'gauge', 'Compute hosts the scheduler knows of, and those up.'),
    'scheduler_host_reports_total': (
        'counter', 'Host state reports received from compute agents.'),
    'scheduler_claim_conflicts_total': (
        'counter', 'Claims that lost a race for a node to another worker '
                   'and were retried on the next candidate.'),
    'scheduler_rejected_requests_total': (
        'counter', 'Calls, casts and raw messages refused as malformed or '
                   'over a limit, by method and error type.'),
    'scheduler_claims_expired_total': (
        'counter', 'Claims released because the compute never reported '
                   'the instance (a build that was probably lost).'),
}

Labels = tuple  # ((name, value), ...) in a fixed order per metric


class _Registry:
    """One process's values; every method is safe from any (green)thread."""

    def __init__(self, buckets: typing.Iterable[float]):
        self.lock = threading.Lock()
        self.buckets = tuple(sorted(set(buckets)))
        # An unlabelled counter is shown at 0 before its first event.
        self.counters = {('scheduler_host_reports_total', ()): 0.0}
        self.gauges: dict = {}      # key -> (value, time it was set)
        self.histograms: dict = {}  # key -> [per-bucket counts, sum]

    def use_buckets(self, buckets: typing.Iterable[float]) -> None:
        """Switch bucket bounds; durations timed with old bounds are lost."""
        bounds = tuple(sorted(set(buckets)))
        with self.lock:
            if bounds != self.buckets:
                self.buckets = bounds
                self.histograms.clear()

    def inc(self, items: typing.Iterable[tuple]) -> None:
        """Add ``amount`` to each ``(name, labels, amount)`` counter."""
        with self.lock:
            for name, labels, amount in items:
                key = _key(name, labels)
                self.counters[key] = self.counters.get(key, 0.0) + amount

    def set(self, items: typing.Iterable[tuple]) -> None:
        """Set each ``(name, labels, value)`` gauge, noting when."""
        now = time.time()
        with self.lock:
            for name, labels, value in items:
                self.gauges[_key(name, labels)] = (float(value), now)

    def observe(self, name: str, labels: Labels, value: float) -> None:
        key = _key(name, labels)
        with self.lock:
            hist = self.histograms.get(key)
            if hist is None:
                hist = self.histograms[key] = [
                    [0] * (len(self.buckets) + 1), 0.0]
            hist[0][bisect.bisect_left(self.buckets, value)] += 1
            hist[1] += value

    def snapshot(self) -> dict:
        """This process's values as JSON-ready data (the file's content)."""
        pid = os.getpid()
        start = _start_time(pid)
        with self.lock:
            return {
                'pid': pid,
                'start': start,
                'counters': [[name, dict(labels), value]
                             for (name, labels), value
                             in self.counters.items()],
                'gauges': [[name, dict(labels), value, at]
                           for (name, labels), (value, at)
                           in self.gauges.items()],
                'histograms': [
                    [name, dict(labels),
                     {'buckets': list(zip(self.buckets, counts)),
                      'sum': total, 'count': sum(counts)}]
                    for (name, labels), (counts, total)
                    in self.histograms.items()],
            }


def _key(name: str, labels: Labels) -> tuple:
    """Label values as strings, so any caller's values sort and print."""
    return name, tuple((label, str(value)) for label, value in labels)


_registry = _Registry(prometheus_conf.DEFAULT_BUCKETS)
#: Serialises snapshot + write, so an older snapshot never replaces a
#: newer one in the file (other workers would see counters go back).
_write_lock = threading.Lock()
_directory: str | None = None
_server: http.server.HTTPServer | None = None


# -- what the service records -------------------------------------------

def record_request(method: str, outcome: str, seconds: float) -> None:
    """Count and time one answered request: rate, errors and latency."""
    _registry.inc([('scheduler_requests_total',
                    (('method', method), ('outcome', outcome)), 1)])
    _registry.observe('scheduler_request_duration_seconds',
                      (('method', method),), seconds)


def record_selections(driver: str, count: int) -> None:
    """Count instances placed, to compare with requests received."""
    _registry.inc([('scheduler_selections_total', (('driver', driver),),
                    count)])


def record_filter_steps(steps: typing.Iterable) -> None:
    """Count runs and eliminations per filter, from a FilterReport's steps.

    Shows which filters do the work of turning hosts away, so an
    operator can tell capacity shortage from a too strict filter.
    """
    items = []
    for step in steps:
        labels = (('filter', step.name),)
        items.append(('scheduler_filter_runs_total', labels, 1))
        items.append(('scheduler_filter_eliminations_total', labels,
                      step.removed))
    _registry.inc(items)


def set_hosts(known: int, up: int) -> None:
    """Set the host gauges; a drop in ``up`` means computes went silent."""
    _registry.set([('scheduler_hosts', (('state', 'known'),), known),
                   ('scheduler_hosts', (('state', 'up'),), up)])


def record_report() -> None:
    """Count one compute report: their rate shows the fleet is talking."""
    _registry.inc([('scheduler_host_reports_total', (), 1)])


def record_claim_conflict() -> None:
    """Count a lost claim race: a steady rate means workers collide."""
    _registry.inc([('scheduler_claim_conflicts_total', (), 1)])


def record_rejection(method: str, error: str) -> None:
    """Count one refused call or message: a rising rate is an attack
    or a broken caller, even when the log rate-limits its lines."""
    _registry.inc([('scheduler_rejected_requests_total',
                    (('method', method), ('error', error)), 1)])


def record_claim_expired() -> None:
    """Count one claim the compute never confirmed (a lost build)."""
    _registry.inc([('scheduler_claims_expired_total', (), 1)])


# -- serving ------------------------------------------------------------

def start(conf) -> None:
    """Serve ``/metrics`` when ``[prometheus] enabled``; call after fork.

    Each worker calls this in its own process.  A port that cannot be
    bound is logged and the service carries on without the endpoint:
    metrics must never keep the scheduler from scheduling.
    """
    global _directory, _server
    group = conf.prometheus
    if not group.enabled:
        return
    _stop_serving()
    _registry.use_buckets(group.histogram_buckets)
    _directory = os.path.join(conf.state_path, 'metrics')
    host, port = group.bind_host, group.port
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        server = _Server((host, port), family)
    except OSError as e:
        LOG.error('Cannot serve metrics on %(host)s:%(port)s set by '
                  '[prometheus] bind_host and [prometheus] port: %(error)s; '
                  'running without the /metrics endpoint',
                  {'host': host, 'port': port, 'error': e})
        return
    _server = server
    threading.Thread(target=server.serve_forever, name='prometheus',
                     kwargs={'poll_interval': _POLL_INTERVAL},
                     daemon=True).start()
    # Overwrites at once a file left by a dead process with our pid.
    flush()
    LOG.info('Serving metrics at http://%s:%d/metrics (pid %d)',
             host, server.server_address[1], os.getpid())


def flush() -> None:
    """Write this process's file, so the worker answering scrapes sees it.

    Called from a periodic task: a worker's numbers in a scrape are at
    most one period old unless that worker answers the scrape itself.
    """
    directory = _directory
    if directory is None:
        return
    try:
        _write_snapshot(directory)
    except OSError as e:
        LOG.warning('Could not write metrics to %s: %s', directory, e)


def stop() -> None:
    """Stop serving and remove this process's file (its pid is going)."""
    global _directory
    directory, _directory = _directory, None
    _stop_serving()
    if directory is not None:
        with _write_lock, contextlib.suppress(OSError):
            os.unlink(_own_path(directory))


def render() -> str:
    """The exposition of every live worker of the service (``/metrics``)."""
    directory = _directory
    snapshots = []
    if directory is not None:
        try:
            snapshots.append(_write_snapshot(directory))
        except OSError as e:
            LOG.warning('Could not write metrics to %s: %s', directory, e)
        snapshots.extend(_read_other_workers(directory))
    if not snapshots:
        snapshots.append(_registry.snapshot())
    return _format(*_merge(snapshots))


def reset_for_tests() -> None:
    """Stop serving and forget every value and setting."""
    global _registry
    stop()
    _registry = _Registry(prometheus_conf.DEFAULT_BUCKETS)


def _forget_parent() -> None:
    """In a forked child: counts and the server belong to the parent."""
    global _registry, _write_lock, _directory, _server
    _registry = _Registry(_registry.buckets)
    _write_lock = threading.Lock()
    _directory = None
    _server = None


os.register_at_fork(after_in_child=_forget_parent)


def _stop_serving() -> None:
    global _server
    server, _server = _server, None
    if server is not None:
        server.shutdown()
        server.server_close()


class _Handler(http.server.BaseHTTPRequestHandler):
    """``GET /metrics``; 404 for other paths, 405 for other methods."""

    timeout = 10  # a stuck client must not hold a (green)thread forever

    def do_GET(self) -> None:
        if self.path.split('?', 1)[0] != '/metrics':
            self._reply(404, 'Not found: metrics are at /metrics\n')
            return
        try:
            body = render()
        except Exception:
            LOG.exception('Could not render the metrics')
            self._reply(500, 'Could not render the metrics\n')
            return
        self._reply(200, body, CONTENT_TYPE)

    def __getattr__(self, name: str):
        """Answer 405 to any other method (the base class says 501)."""
        if name.startswith('do_'):
            return self._method_not_allowed
        raise AttributeError(name)

    def _method_not_allowed(self) -> None:
        self._reply(405, 'Method not allowed: use GET\n',
                    headers={'Allow': 'GET'})

    def _reply(self, status: int, body: str,
               content_type: str = 'text/plain; charset=utf-8',
               headers: dict | None = None) -> None:
        data = body.encode('utf-8')
        self.send_response(status)
        self.send_header('Content-Type', content_type)
        self.send_header('Content-Length', str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != 'HEAD':
            self.wfile.write(data)

    def log_message(self, format: str, *args) -> None:
        LOG.debug('metrics endpoint: %s - %s', self.address_string(),
                  format % args)


class _Server(http.server.ThreadingHTTPServer):
    """One (green)thread per scrape; the port shared by all workers."""

    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def __init__(self, address: tuple, family: int):
        self.address_family = family
        super().__init__(address, _Handler)

    def server_bind(self) -> None:
        # SO_REUSEPORT lets every worker bind the port; the kernel
        # spreads connections among them.
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        # TCPServer's bind, skipping HTTPServer's reverse DNS lookup.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]


# -- files of the workers -----------------------------------------------

def _own_path(directory: str) -> str:
    return os.path.join(directory, '%d.json' % os.getpid())


def _write_snapshot(directory: str) -> dict:
    """Write this process's values atomically; return what was written."""
    with _write_lock:
        snapshot = _registry.snapshot()
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, suffix='.tmp',
                                   prefix='.%d.' % os.getpid())
        try:
            with os.fdopen(fd, 'w') as f:
                json.dump(snapshot, f)
            os.replace(tmp, _own_path(directory))
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    return snapshot


_SECTIONS = {'counters', 'gauges', 'histograms'}


def _read_other_workers(directory: str) -> list:
    """Snapshots of the other live workers; files of dead ones removed."""
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    snapshots = []
    for name in names:
        stem, ext = os.path.splitext(name)
        if ext != '.json' or not stem.isdigit() or int(stem) == os.getpid():
            continue
        path = os.path.join(directory, name)
        try:
            with open(path) as f:
                snapshot = json.load(f)
        except FileNotFoundError:
            continue
        except (OSError, ValueError) as e:
            LOG.warning('Ignored unreadable metrics file %s: %s', path, e)
            continue
        if not isinstance(snapshot, dict) or not _SECTIONS <= snapshot.keys():
            LOG.warning('Ignored metrics file %s: not written by us', path)
            continue
        if _alive(int(stem), snapshot.get('start')):
            snapshots.append(snapshot)
        else:
            LOG.debug('Removing metrics of gone worker %s', stem)
            with contextlib.suppress(OSError):
                os.unlink(path)
    return snapshots


def _start_time(pid: int) -> str | None:
    """When ``pid`` started (Linux), to tell a reused pid from our worker."""
    try:
        with open('/proc/%d/stat' % pid) as f:
            # Field 22; fields after the ")" closing the name start at 3.
            return f.read().rsplit(')', 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _alive(pid: int, start: str | None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    current = _start_time(pid)
    return start is None or current is None or current == start


# -- exposition ---------------------------------------------------------

def _merge(snapshots: list) -> tuple:
    """Sum counters and histograms; the most recently set gauge wins.

    Every worker sees the same fleet, so adding their host gauges would
    count each host once per worker.
    """
    counters: dict = {}
    gauges: dict = {}
    histograms: dict = {}
    for snapshot in snapshots:
        for name, labels, value in snapshot['counters']:
            key = (name, tuple(labels.items()))
            counters[key] = counters.get(key, 0.0) + value
        for name, labels, value, at in snapshot['gauges']:
            key = (name, tuple(labels.items()))
            if key not in gauges or at >= gauges[key][1]:
                gauges[key] = (value, at)
        for name, labels, hist in snapshot['histograms']:
            merged = histograms.setdefault(
                (name, tuple(labels.items())),
                {'buckets': {}, 'sum': 0.0, 'count': 0})
            for bound, count in hist['buckets']:
                merged['buckets'][bound] = (
                    merged['buckets'].get(bound, 0) + count)
            merged['sum'] += hist['sum']
            merged['count'] += hist['count']
    return counters, gauges, histograms


def _format(counters: dict, gauges: dict, histograms: dict) -> str:
    samples: dict = {name: [] for name in METRICS}
    for (name, labels), value in counters.items():
        samples.setdefault(name, []).append((labels, value))
    for (name, labels), (value, _at) in gauges.items():
        samples.setdefault(name, []).append((labels, value))
    for (name, labels), hist in histograms.items():
        samples.setdefault(name, []).append((labels, hist))
    lines = []
    for name, (kind, help_text) in METRICS.items():
        lines.append('# HELP %s %s' % (name, _escape_help(help_text)))
        lines.append('# TYPE %s %s' % (name, kind))
        for labels, value in sorted(samples[name], key=lambda s: s[0]):
            if kind == 'histogram':
                lines.extend(_histogram_lines(name, labels, value))
            else:
                lines.append(_sample(name, labels, value))
    return '\n'.join(lines) + '\n'


def _histogram_lines(name: str, labels: Labels, hist: dict) -> list:
    lines = []
    cumulative = 0
    for bound in sorted(hist['buckets']):
        cumulative += hist['buckets'][bound]
        lines.append(_sample(name + '_bucket',
                             labels + (('le', repr(float(bound))),),
                             cumulative))
    lines.append(_sample(name + '_bucket', labels + (('le', '+Inf'),),
                         hist['count']))
    lines.append(_sample(name + '_sum', labels, hist['sum']))
    lines.append(_sample(name + '_count', labels, hist['count']))
    return lines


def _sample(name: str, labels: Labels, value: float) -> str:
    if not labels:
        return '%s %s' % (name, _number(value))
    pairs = ','.join('%s="%s"' % (key, _escape_label(str(val)))
                     for key, val in labels)
    return '%s{%s} %s' % (name, pairs, _number(value))


def _number(value: float) -> str:
    value = float(value)
    if math.isnan(value):
        return 'NaN'
    if math.isinf(value):
        return '+Inf' if value > 0 else '-Inf'
    if value.is_integer() and abs(value) < 2 ** 53:
        return str(int(value))
    return repr(value)


def _escape_label(value: str) -> str:
    return (value.replace('\\', r'\\').replace('"', r'\"')
            .replace('\n', r'\n'))


def _escape_help(text: str) -> str:
    return text.replace('\\', r'\\').replace('\n', r'\n')
