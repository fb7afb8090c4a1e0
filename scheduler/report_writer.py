"""Reports from the intake queue that must reach the inventory first.

With the intake (API 1.5) the broker hands each report to one worker of
the deployment; every other worker learns it from the inventory, which
it reads before every request (``HostManager.refresh_changed_reports``).
So a report that says something new (a new host, a new capacity, new
usage) is written at once by the worker that took it, and becomes that
worker's view only once written: no worker then answers with a host or
a capacity another worker cannot see yet.  A quiet report (only a new
time) is not written here: its time waits for the periodic flush.

``ReportWriter`` owns the reports waiting for that write and batches
them (a group commit): the thread that leaves a report when no write is
under way writes what waits, then goes on while more came meanwhile;
the others leave theirs and return at once, so that the queue is not
held.  Writes start at least ``WINDOW`` seconds apart: a lone report is
written at once, while a stream of changed reports is written in a few
transactions a second, not one per report.

The lock guards only the waiting reports and is never held across a
write (a native lock under eventlet, see ``concurrency.native_lock``);
the writing thread is one of the RPC server's, green or native like
the rest of the runtime.
"""

import dataclasses
import time
import typing

from scheduler import concurrency

#: Least seconds between the starts of two writes: bounds how long a
#: changed report waits (with the write's own time) while bounding the
#: transactions a stream of changed reports costs.
WINDOW = 0.1


@dataclasses.dataclass
class Taken:
    """One report to write: node ``key``'s new view and, when it says
    more than the node's usage row, the usage it carries."""

    key: tuple
    view: typing.Any
    usage: typing.Any = None


class ReportWriter:
    """The reports taken but not written yet, written in batches."""

    def __init__(self, write: typing.Callable[[list], None],
                 newer: typing.Callable[[typing.Any, typing.Any], bool],
                 window: float = WINDOW):
        """``write(taken)`` writes a batch (a list of ``Taken``) and makes
        the views current; it does not raise (what it cannot write it
        keeps for the periodic flush).  ``newer(a, b)``: whether view
        ``a`` was made after view ``b`` (of the same node)."""
        self._write = write
        self._newer = newer
        self.window = window
        self._lock = concurrency.native_lock()
        #: key -> Taken, the newest report of each node still waiting.
        self._waiting: dict = {}
        #: Whether a thread is writing (or about to).
        self._writing = False
        #: When the last write started (monotonic seconds).
        self._last_start = float('-inf')

    def submit(self, taken: Taken) -> None:
        """Have ``taken`` written; write what waits if no one is."""
        with self._lock:
            held = self._waiting.get(taken.key)
            if held is None or not self._newer(held.view, taken.view):
                self._waiting[taken.key] = taken
            if self._writing:
                return
            self._writing = True
        try:
            self._write_while_waiting()
        except BaseException:
            # Killed between two batches (a stop): what waits is the
            # periodic flush's and the stop's (``take_all``).
            with self._lock:
                self._writing = False
            raise

    def _write_while_waiting(self) -> None:
        while True:
            with self._lock:
                if not self._waiting:
                    # In the same section as the last look: a report
                    # left after it finds no one writing and writes.
                    self._writing = False
                    return
            pause = self._last_start + self.window - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            with self._lock:
                batch = list(self._waiting.values())
                self._waiting = {}
            if batch:
                self._last_start = time.monotonic()
                self._write(batch)

    def take_all(self) -> list:
        """The reports still waiting, now the caller's to write (the
        periodic flush and the stop write what a writing thread left)."""
        with self._lock:
            batch = list(self._waiting.values())
            self._waiting = {}
        return batch

    def waiting(self) -> int:
        with self._lock:
            return len(self._waiting)
