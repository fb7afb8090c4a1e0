"""Which workers of a service consume the host report queues.

Every report on the intake and liveness queues is taken by one
consumer, whichever it is, and the workers that did not take it read
it from the inventory (``HostManager.refresh_changed_reports``,
``refresh_reports``).  So a service needs only a few consumers there;
each one more costs CPU on the bus's per-message path for nothing
(each message wakes a process of its own).  ``[scheduler]
report_workers`` turns are shared among a service's workers: a turn is
an exclusive ``flock`` on a file of its own under ``[DEFAULT]
state_path``, and the worker that holds one consumes the report
queues.  The others try again every ``RETRY_EVERY`` seconds: the
kernel lets a turn go when its holder's process ends (even by
SIGKILL), another worker takes it and starts consuming, and what the
dead one had not acknowledged goes back to the queue for it.

The lock file of a turn also carries the report lag its holder
measures (``publish_lag``): the workers without a turn take no report
and measure none, yet must not judge a host down for the time its
reports wait in the queue (``heard``, ``report_lag.ReportLag``).  It
carries too when its holder last heard the computes (a report taken,
or the broker answering its probe): a worker without a turn does not
probe the broker itself while the holders hear (``hearing.Hearing``).
"""

import errno
import fcntl
import os
import re

from scheduler import concurrency
from scheduler.resources import liveness

#: Seconds between two tries of a worker without a turn (and between
#: two lag figures its holder publishes).
RETRY_EVERY = 1.0

#: Directory under ``[DEFAULT] state_path`` that holds the turns.
DIRECTORY = 'report-workers'

#: One record: the lag, when it was measured, and when the holder last
#: heard the computes (0: not said; liveness clock), fixed width,
#: written in one call at the start of the file, so that a reader never
#: sees a shorter record over a longer one.  A record of two fields
#: (an older holder) says no hearing time.
_RECORD = '%20.3f %20.3f %20.3f\n'
_RECORD_SIZE = len(_RECORD % (0.0, 0.0, 0.0))

_BUSY = (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES)


def directory_of(state_path: str) -> str:
    """Where the turns of the services under ``state_path`` are."""
    return os.path.join(state_path, DIRECTORY)


def service_name(topic: str, host: str) -> str:
    """The name of a service's turns: its topic and ``[DEFAULT] host``
    (unique on a bus), so that services sharing a state directory each
    have their own turns."""
    return re.sub(r'[^A-Za-z0-9_.:@-]', '_', '%s@%s' % (topic, host))


class Turns:
    """This worker's turn, if any, among a service's ``slots`` turns.

    Only non-blocking calls of the kernel are made, under a native
    lock that is never held across anything that yields: safe from a
    green thread and a native one alike.
    """

    def __init__(self, directory: str, name: str, slots: int):
        if slots < 1:
            raise ValueError('a service needs at least one report turn')
        self.directory = directory
        self.name = name
        self.slots = slots
        self._lock = concurrency.native_lock()
        self._fd: int | None = None
        #: The turn held (0 to ``slots - 1``), or None.
        self.slot: int | None = None

    def path(self, slot: int) -> str:
        return os.path.join(self.directory, '%s.%d' % (self.name, slot))

    @property
    def held(self) -> bool:
        return self._fd is not None

    def prepare(self) -> None:
        """Create the directory; ``OSError`` when it cannot be."""
        os.makedirs(self.directory, exist_ok=True)

    def take(self) -> bool:
        """Take a free turn if there is one; whether this worker holds
        one.  ``OSError`` when the files cannot be opened."""
        with self._lock:
            if self._fd is not None:
                return True
            for slot in range(self.slots):
                fd = os.open(self.path(slot),
                             os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError as e:
                    os.close(fd)
                    if e.errno in _BUSY:
                        continue
                    raise
                self._fd, self.slot = fd, slot
                return True
            return False

    def release(self) -> None:
        """Let the turn go (closing the file releases the lock)."""
        with self._lock:
            fd, self._fd, self.slot = self._fd, None, None
        if fd is not None:
            os.close(fd)

    def publish_lag(self, lag: float, heard_at: float | None = None) -> None:
        """The holder: the report lag it measures now, and when it last
        heard the computes (``hearing.Hearing.heard_at``), for the
        others."""
        record = (_RECORD % (max(0.0, lag), liveness.now(),
                             max(0.0, heard_at or 0.0))).encode()
        with self._lock:
            if self._fd is not None:
                os.pwrite(self._fd, record, 0)

    def heard(self, stale_after: float) -> tuple:
        """``(lag, heard_at)``: the largest report lag the holders
        published in the last ``stale_after`` seconds, and the latest
        time they said they heard the computes; each None when none
        said it."""
        now = liveness.now()
        lag = heard_at = None
        for slot in range(self.slots):
            try:
                with open(self.path(slot), 'rb') as f:
                    record = f.read(_RECORD_SIZE)
                fields = [float(part) for part in record.split()]
                slot_lag, at = fields[:2]
            except (OSError, ValueError):
                continue
            if now - at > stale_after:
                continue
            lag = slot_lag if lag is None else max(lag, slot_lag)
            if len(fields) > 2 and fields[2] > 0:
                heard_at = fields[2] if heard_at is None \
                    else max(heard_at, fields[2])
        return lag, heard_at
