"""How long compute reports wait on the bus before a worker takes them.

Each report carries the time its compute made it (``updated_at``).
``ReportLag`` keeps the lag of the last reports this worker took and
gives the least of them: every report waits in the intake queue at
least as long as the queue is behind, while a compute whose clock runs
late makes one report look late, not the least of many.  With the
intake queue (API 1.5) every worker that consumes it takes its share
of the same queue, so each such worker's figure is the deployment's;
a worker that consumes no report queue (``[scheduler] report_workers``)
hears the figure of those that do (``hear``,
``report_consumers.Turns.heard``).

The lag feeds the ``scheduler_report_lag_seconds`` gauge, a warning
when it exceeds ``[scheduler] report_interval``, and the liveness
clock (``liveness.set_intake_lag``): a host is not judged down for the
time its reports waited in the queue, only for reports it did not send.
"""

import collections
import datetime

from scheduler import concurrency
from scheduler.resources import liveness

#: Reports the least lag is taken over.
WINDOW = 64


class ReportLag:
    """The lag of the last ``WINDOW`` reports taken by this worker."""

    def __init__(self):
        self._lock = concurrency.native_lock()
        self._lags: collections.deque = collections.deque(maxlen=WINDOW)
        #: When the last report was noted (liveness clock), or None.
        self.noted_at: float | None = None
        #: The lag the workers that take the reports published, and
        #: when this worker heard it (``hear``), or None.
        self._heard: tuple | None = None
        #: When the workers that take the reports last heard the
        #: computes, as they said (``hear``; liveness clock), or None.
        self.holders_heard_at: float | None = None

    def note(self, sent: datetime.datetime | None) -> None:
        """A report made by its compute at ``sent`` was taken now."""
        if sent is None:
            return
        if sent.tzinfo is None:
            sent = sent.replace(tzinfo=datetime.timezone.utc)
        now = liveness.now()
        lag = max(0.0, now - sent.timestamp())
        with self._lock:
            self._lags.append(lag)
            self.noted_at = now

    def hear(self, lag: float, heard_at: float | None = None) -> None:
        """The workers of this service that take the reports measure
        ``lag`` now, and last heard the computes at ``heard_at`` (None:
        they did not say); this worker takes none."""
        with self._lock:
            self._heard = (max(0.0, lag), liveness.now())
            if heard_at is not None:
                self.holders_heard_at = heard_at

    def current(self, stale_after: float) -> float:
        """The least lag of the last reports; else the lag heard from
        the workers that take them; 0 when neither came in the last
        ``stale_after`` seconds (the figure would be old)."""
        now = liveness.now()
        with self._lock:
            if (self.noted_at is not None and self._lags
                    and now - self.noted_at <= stale_after):
                return min(self._lags)
            if self._heard is not None and now - self._heard[1] \
                    <= stale_after:
                return self._heard[0]
            return 0.0
