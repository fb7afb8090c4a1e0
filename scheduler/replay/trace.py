"""The request trace: what a service served, as JSON lines, and its reader.

Each line is one event (a JSON object with ``kind`` and ``t``, seconds
since the epoch):

* ``header``: the first line of every file: ``format``
  (``scheduler-trace``), ``version``, the service ``host``, whether
  project ids are ``clear``;
* ``request``: one select_destinations call: ``spec`` (the RequestSpec
  primitive as the driver got it, project and user ids hashed unless
  ``[trace] clear_project_ids``), ``instance_uuids``, the ``answer``
  (``{"hosts": [[host, node], ...]}`` or ``{"no_valid_host": reason,
  "filters": [[name, hosts_in, hosts_out], ...]}``) and ``decision_s``;
* ``release``: an instance deleted on a host (``host``,
  ``instance_uuid``), or its placement dropped otherwise (missing from
  the compute's full list, a claim expired unbuilt, a build no compute
  took): a replay frees its resources at that point.

The writer (``Recorder``) rotates the file at ``[trace] max_bytes``,
keeping ``backup_count`` older files, so the disk used is bounded.  It
never fails a request: a file it cannot write is logged once and
recording stops until the next ``reset()`` (SIGHUP).
"""

import glob
import hashlib
import hmac
import json
import os
import time
import typing

from oslo_config import cfg
from oslo_log import log as logging

from scheduler import concurrency
from scheduler import objects

LOG = logging.getLogger(__name__)
CONF = cfg.CONF

FORMAT = 'scheduler-trace'
VERSION = 1


class TraceError(ValueError):
    """A trace file cannot be read; the message says which and where."""


def header(host: str | None, clear: bool, at: float) -> str:
    """The first line of every trace file."""
    return json.dumps({'kind': 'header', 't': at, 'format': FORMAT,
                       'version': VERSION, 'host': host,
                       'clear': clear}) + '\n'


def hashed(value: str | None, key: bytes) -> str | None:
    """``value`` replaced by a short keyed hash, stable for one key."""
    if value is None:
        return None
    digest = hmac.new(key, str(value).encode('utf-8'), hashlib.sha256)
    return 'h-' + digest.hexdigest()[:16]


def spec_primitive(spec_obj, clear: bool, key: bytes) -> dict:
    """The RequestSpec as the trace keeps it (ids hashed unless ``clear``).

    The ids are replaced in the primitive, never in the request being
    served: the primitive is a new dict already, so the request needs
    no copy of its own.
    """
    primitive = spec_obj.obj_to_primitive()
    if not clear:
        data = primitive['versioned_object.data']
        for field in ('project_id', 'user_id'):
            if field in data:
                data[field] = hashed(data[field], key)
    return primitive


def answer_of(selections=None, error: BaseException | None = None,
              report=None) -> dict:
    """A trace ``answer``: the first choices, or NoValidHost and the walk."""
    if error is not None:
        steps = report.steps if report is not None else []
        return {'no_valid_host': str(error.kwargs.get('reason', error))
                if hasattr(error, 'kwargs') else str(error),
                'filters': [[s.name, s.hosts_in, s.hosts_out]
                            for s in steps]}
    if selections is None:
        return {}
    return {'hosts': [[alts[0].service_host, alts[0].nodename]
                      for alts in selections]}


class Recorder:
    """Appends events to the trace file of this process, rotating it.

    Safe to call from every request at once: a line is written under a
    lock that is never held across anything that yields (regular file
    writes do not yield under eventlet).
    """

    def __init__(self, path: str, max_bytes: int, backup_count: int,
                 clear: bool, key: bytes, host: str | None = None):
        self.path = path
        self.max_bytes = max_bytes
        self.backup_count = backup_count
        self.clear = clear
        self.key = key
        self.host = host
        self._lock = concurrency.native_lock()
        self._file: typing.TextIO | None = None
        self._size = 0
        self.broken = False

    @classmethod
    def from_config(cls) -> 'Recorder':
        opts = CONF.trace
        path = opts.path
        if CONF.scheduler.workers > 1:
            # One file per worker process: no two writers rotate one file.
            path = '%s.%d' % (path, os.getpid())
        key = (opts.hash_key or CONF.host or '').encode('utf-8')
        return cls(path, opts.max_bytes, opts.backup_count,
                   opts.clear_project_ids, key, CONF.host)

    # -- writing --------------------------------------------------------

    def request(self, spec_obj, instance_uuids: list, selections=None,
                error: BaseException | None = None, report=None,
                decision_s: float = 0.0, spec_primitive_: dict | None = None,
                at: float | None = None) -> None:
        """One served request (the spec as it was before the driver ran:
        ``spec_primitive_``, taken by ``capture``)."""
        try:
            event = {'kind': 'request', 't': time.time() if at is None
                     else at,
                     'spec': spec_primitive_ if spec_primitive_ is not None
                     else self.capture(spec_obj),
                     'instance_uuids': list(instance_uuids or []),
                     'answer': answer_of(selections, error, report),
                     'decision_s': round(decision_s, 6)}
        except Exception as e:  # never fail the request for the trace
            LOG.warning('Trace: could not record a request: %s', e)
            return
        self._write(event)

    def capture(self, spec_obj) -> dict:
        """The spec's primitive now, before the driver changes it."""
        return spec_primitive(spec_obj, self.clear, self.key)

    def release(self, host: str, instance_uuid: str) -> None:
        self._write({'kind': 'release', 't': time.time(), 'host': host,
                     'instance_uuid': instance_uuid})

    def _write(self, event: dict) -> None:
        if self.broken:
            return
        line = json.dumps(event, separators=(',', ':'), default=str) + '\n'
        with self._lock:
            try:
                if self._file is None:
                    self._open()
                if self._size and self._size + len(line) > self.max_bytes:
                    self._rotate()
                self._file.write(line)
                self._file.flush()
                self._size += len(line)
            except OSError as e:
                self.broken = True
                error = e
            else:
                return
        LOG.error('Trace: cannot write %s (%s); recording stops until the '
                  'next SIGHUP', self.path, error)

    def _open(self) -> None:
        directory = os.path.dirname(self.path)
        if directory:
            os.makedirs(directory, exist_ok=True)
        self._file = open(self.path, 'a', encoding='utf-8')
        self._size = self._file.tell()
        if not self._size:
            first = header(self.host, self.clear, time.time())
            self._file.write(first)
            self._size += len(first)

    def _rotate(self) -> None:
        self._file.close()
        self._file = None
        if self.backup_count:
            for n in range(self.backup_count - 1, 0, -1):
                older = '%s.%d' % (self.path, n)
                if os.path.exists(older):
                    os.replace(older, '%s.%d' % (self.path, n + 1))
            os.replace(self.path, self.path + '.1')
        else:
            os.unlink(self.path)
        self._open()

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None


_recorder: Recorder | None = None
_configured = False


def recorder() -> Recorder | None:
    """This process's recorder, or None when ``[trace] enabled`` is off."""
    global _recorder, _configured
    if not _configured:
        _configured = True
        if CONF.trace.enabled:
            _recorder = Recorder.from_config()
            LOG.info('Recording requests to %s (at most %d bytes, %d old '
                     'file(s) kept)', _recorder.path, _recorder.max_bytes,
                     _recorder.backup_count)
    return _recorder


def reset() -> None:
    """Read ``[trace]`` again at the next request (SIGHUP)."""
    global _recorder, _configured
    if _recorder is not None:
        _recorder.close()
    _recorder = None
    _configured = False


# -- reading ------------------------------------------------------------

def expand(paths: typing.Iterable[str]) -> list:
    """Files named by ``paths`` (shell patterns allowed), in order, once."""
    found: list = []
    for path in paths:
        matches = sorted(glob.glob(path)) if glob.has_magic(path) else [path]
        if not matches:
            raise TraceError('%s: no such trace file' % path)
        for match in matches:
            if match not in found:
                found.append(match)
    return found


def read(paths: typing.Iterable[str]) -> list:
    """Every request and release event of the files, in time order.

    Events of several files (workers, services, rotated files) are
    merged by time; events with the same time keep their file order.
    """
    events = []
    for path in expand(paths):
        try:
            with open(path, encoding='utf-8') as f:
                for number, line in enumerate(f, 1):
                    line = line.strip()
                    if not line:
                        continue
                    try:
                        event = json.loads(line)
                    except json.JSONDecodeError as e:
                        raise TraceError('%s:%d: not JSON: %s'
                                         % (path, number, e.msg))
                    kind = event.get('kind')
                    if kind == 'header':
                        if event.get('format') != FORMAT:
                            raise TraceError('%s:%d: not a scheduler trace'
                                             % (path, number))
                        continue
                    if kind not in ('request', 'release'):
                        raise TraceError('%s:%d: unknown event kind %r'
                                         % (path, number, kind))
                    events.append(event)
        except OSError as e:
            raise TraceError('%s: cannot read: %s' % (path,
                                                      e.strerror or e))
    events.sort(key=lambda e: e.get('t', 0))
    return events


def spec_of(event: dict):
    """The RequestSpec of a request event."""
    return objects.RequestSpec.obj_from_primitive(event['spec'])


def write(path: str, events: typing.Iterable[dict],
          host: str = 'generated') -> None:
    """A trace file of ``events`` (for the demo and tests)."""
    with open(path, 'w', encoding='utf-8') as f:
        f.write(header(host, True, 0))
        for event in events:
            f.write(json.dumps(event, separators=(',', ':'),
                               default=str) + '\n')


class _NotServed:
    """``serving``'s answer while recording is off: does nothing."""

    kwargs: dict = {}

    def answered(self, selections) -> None:
        pass

    def refused(self, error: BaseException) -> None:
        pass


class _Served:
    """One request being served while recording is on."""

    def __init__(self, rec: Recorder, driver, spec_obj, uuids: list):
        from scheduler import exception
        from scheduler import filters
        self._nvh = exception.NoValidHost
        self._rec = rec
        self._uuids = list(uuids or [])
        self._at = time.time()
        try:
            self._spec = rec.capture(spec_obj)
        except Exception as e:  # never fail the request for the trace
            LOG.warning('Trace: could not record a request: %s', e)
            self._spec = None
        self.report = filters.FilterReport()
        # The filter walk of a refusal, from drivers that keep one.
        self.kwargs = ({'report': self.report}
                       if _takes_report(driver) else {})
        self._started = time.perf_counter()

    def _record(self, selections=None, error=None) -> None:
        if self._spec is None:
            return
        self._rec.request(None, self._uuids, selections, error, self.report,
                          time.perf_counter() - self._started, self._spec,
                          at=self._at)

    def answered(self, selections) -> None:
        self._record(selections=selections)

    def refused(self, error: BaseException) -> None:
        # Only NoValidHost is an answer; other errors are not replayable.
        if isinstance(error, self._nvh):
            self._record(error=error)


_REPORT_TAKERS: dict = {}


def _takes_report(driver) -> bool:
    import inspect
    kind = type(driver)
    if kind not in _REPORT_TAKERS:
        try:
            params = inspect.signature(driver.select_destinations).parameters
            _REPORT_TAKERS[kind] = 'report' in params
        except (TypeError, ValueError):
            _REPORT_TAKERS[kind] = False
    return _REPORT_TAKERS[kind]


def serving(driver, spec_obj, uuids: list):
    """What the manager calls around one select_destinations: records it
    when ``[trace] enabled``, does nothing otherwise."""
    rec = recorder()
    if rec is None or rec.broken:
        return _NotServed()
    return _Served(rec, driver, spec_obj, uuids)


def released(host: str, instance_uuid: str) -> None:
    """An instance deletion the service takes: recorded when enabled."""
    rec = recorder()
    if rec is not None:
        rec.release(host, instance_uuid)
