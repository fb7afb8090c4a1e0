"""Evidence from log files: what the computes did, what the services said.

The simulator logs one line per build, refusal and termination
(``scheduler.simulator.agent``); ``SimLog`` follows its log file as it
grows and turns those lines into ``invariants.Event``s.  ``scan_service_logs``
lists the tracebacks and ERROR lines of the services' logs, each with
its time and message (the checker tells those a fault of the soak
explains from the rest), and notes every instance uuid a WARNING or
ERROR line names (a refusal the operator can see).
"""

import glob
import os
import re
import threading
import time

from tools.soak import invariants

_UUID = r'([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})'
_STAMP = re.compile(r'^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\.(\d{3}) \d+ (\w+) ')

#: (event kind, pattern): group 1 the host (None when not logged),
#: group 2 the uuid.
_PATTERNS = (
    ('started', re.compile(r' (\S+) started instance ' + _UUID)),
    ('started', re.compile(r' (\S+) already runs instance ' + _UUID)),
    ('refused', re.compile(r' (\S+) refused instance ' + _UUID)),
    ('terminated', re.compile(r' (\S+) terminated instance ' + _UUID)),
    ('not_here', re.compile(r' (\S+) has no instance ' + _UUID)),
    ('not_here', re.compile(r'()terminate_instance for instance ' + _UUID
                            + ', which no simulated host runs')),
    ('refused', re.compile(r'()run_instance for instance ' + _UUID
                           + ' names node')),
)


def stamp(line: str) -> tuple:
    """(epoch seconds, level) of an oslo.log line, or (None, None)."""
    match = _STAMP.match(line)
    if not match:
        return None, None
    when = time.mktime(time.strptime(match.group(1), '%Y-%m-%d %H:%M:%S'))
    return when + int(match.group(2)) / 1000.0, match.group(3)


def parse_sim_line(line: str) -> invariants.Event | None:
    when, _level = stamp(line)
    if when is None:
        return None
    for kind, pattern in _PATTERNS:
        match = pattern.search(line)
        if match:
            return invariants.Event(kind=kind, uuid=match.group(2),
                                    host=match.group(1) or None, at=when)
    return None


class SimLog:
    """The simulator's log, read as it grows; thread safe."""

    def __init__(self, path: str):
        self.path = path
        self.events: list = []
        #: uuid -> host of the instances running now, by the log.
        self.running: dict = {}
        self._offset = 0
        self._partial = ''
        self._lock = threading.Lock()

    def refresh(self) -> None:
        with self._lock:
            if not os.path.exists(self.path):
                return
            with open(self.path, errors='replace') as f:
                f.seek(self._offset)
                data = f.read()
                self._offset = f.tell()
            lines = (self._partial + data).split('\n')
            self._partial = lines.pop()
            for line in lines:
                event = parse_sim_line(line)
                if event is None:
                    continue
                self.events.append(event)
                if event.kind == 'started':
                    self.running[event.uuid] = event.host
                elif event.kind in ('terminated', 'refused'):
                    self.running.pop(event.uuid, None)

    def running_now(self) -> dict:
        with self._lock:
            return dict(self.running)


#: The first line of an ERROR record (its continuation lines, such as
#: a traceback's, carry no ``[context]``).
_RECORD = re.compile(r'^\S+ \S+ \d+ ERROR \S+ \[[^\]]*\] (.*)')


def _normalised(message: str) -> str:
    """An ERROR message with its numbers and uuids blanked, to group."""
    message = re.sub(_UUID, '<uuid>', message)
    return re.sub(r'\d+', 'N', message).strip()[:160]


def scan_service_logs(directory: str, prefix: str) -> tuple:
    """``([invariants.LogLine], {uuids})`` over the logs of the services
    (files ``<prefix>*.log`` and ``<prefix>*.out``): one ``LogLine`` per
    ERROR line and per traceback, each with the time and message of the
    record it belongs to (a continuation line has neither of its own);
    the uuids are those WARNING and ERROR lines name."""
    lines = []
    uuids: set = set()
    paths = sorted(glob.glob(os.path.join(directory, prefix + '*.log'))
                   + glob.glob(os.path.join(directory, prefix + '*.out')))
    for path in paths:
        name = os.path.basename(path)
        at, message = None, ''
        with open(path, errors='replace') as f:
            for line in f:
                when, level = stamp(line)
                record = _RECORD.match(line)
                if record or (when is not None and level != 'ERROR'):
                    at, message = when, (_normalised(record.group(1))
                                         if record else '')
                if at is None:
                    at = when
                if 'Traceback (most recent call last)' in line:
                    lines.append(invariants.LogLine(name, at, 'traceback',
                                                    message))
                elif level == 'ERROR':
                    lines.append(invariants.LogLine(
                        name, at, 'ERROR', message,
                        tuple(re.findall(_UUID, line))))
                if level in ('WARNING', 'ERROR'):
                    uuids.update(re.findall(_UUID, line))
    return lines, uuids
