"""Group commit: the writes callers ask for at once, in one statement.

Many requests' news arrive together (a build's confirmation per
placement, from every compute at once) and each used to take a pooled
connection for a one-row statement of its own.  Under load they queued
for the worker's few connections in front of the requests' claims and
freshness reads.  ``GroupCommit`` makes one write of what waits: the
caller that finds no write under way leads and writes every item
waiting, including its own; the others wait for the write that carries
theirs, and then the next of them leads.  Every caller returns only
once its own item is written (or raises the write's error), so a caller
sees exactly what it would have seen writing alone, one statement
later at most.

The lock guards only the waiting items and is never held across a
write (``concurrency.native_lock``); callers wait on the runtime's
event (green under eventlet, native under the threading executor).
"""

import threading
import typing

from scheduler import concurrency


class _Ticket:
    """One caller's item, and what its write said."""

    __slots__ = ('item', 'done', 'lead', 'result', 'error')

    def __init__(self, item: typing.Any):
        self.item = item
        self.done = threading.Event()
        #: Set with ``done`` when this caller is to write the next batch.
        self.lead = False
        self.result: typing.Any = None
        self.error: BaseException | None = None


class GroupCommit:
    """Items written in batches, each caller waiting for its own."""

    def __init__(self, write: typing.Callable[[list], list]):
        """``write(items)`` writes a batch and returns one result per
        item, in order; what it raises, every caller of the batch
        raises."""
        self._write = write
        self._lock = concurrency.native_lock()
        self._waiting: list = []
        #: Whether a caller is writing (or was handed the lead).
        self._writing = False

    def run(self, item: typing.Any) -> typing.Any:
        """Have ``item`` written; its result once it is."""
        ticket = _Ticket(item)
        with self._lock:
            self._waiting.append(ticket)
            lead = not self._writing
            self._writing = True
        if not lead:
            ticket.done.wait()
            if not ticket.lead:
                return self._outcome(ticket)
        self._lead()
        return self._outcome(ticket)

    @staticmethod
    def _outcome(ticket: _Ticket) -> typing.Any:
        if ticket.error is not None:
            raise ticket.error
        return ticket.result

    def _lead(self) -> None:
        """Write what waits (this caller's item with it), then hand the
        lead to the first caller still waiting."""
        with self._lock:
            batch, self._waiting = self._waiting, []
        try:
            results = self._write([t.item for t in batch])
            if len(results) != len(batch):
                raise RuntimeError('group commit: %d results for %d items'
                                   % (len(results), len(batch)))
            for ticket, result in zip(batch, results):
                ticket.result = result
        except BaseException as e:
            # A kill too: the callers of the batch must not wait forever.
            for ticket in batch:
                ticket.error = e
            raise
        finally:
            with self._lock:
                following = self._waiting[0] if self._waiting else None
                self._writing = following is not None
                if following is not None:
                    following.lead = True
            for ticket in batch:
                ticket.done.set()
            if following is not None:
                following.done.set()

    def waiting(self) -> int:
        with self._lock:
            return len(self._waiting)
