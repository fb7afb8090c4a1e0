"""The clock every up/down decision reads, in one place.

A host is up when its last report is no older than ``[scheduler]
service_down_time`` and nobody forced it down.  The age of a report is
``now() - received_at``, less the time reports currently wait on the
bus (``set_intake_lag``) and any recent stretch during which no report
could reach the schedulers (``deaf``: the broker down, or no scheduler
running), so that a host is judged by the time it could be heard.
``now`` reads ``clock``, which a test or a replay may replace
(``set_clock``) to state a host's report age without sleeping.
"""

import time
import typing

from oslo_config import cfg

CONF = cfg.CONF

#: Seconds since the epoch; replace with ``set_clock``.
clock: typing.Callable[[], float] = time.time


def now() -> float:
    """The current time as the scheduler sees it."""
    return clock()


def set_clock(func: typing.Callable[[], float] | None) -> None:
    """Make ``func`` the scheduler's clock (``None``: the real one)."""
    global clock
    clock = time.time if func is None else func


def forget_deafness() -> None:
    """Forget every stretch without reports (tests, replays)."""
    global _deafness
    _deafness = None


#: Seconds reports currently wait on the bus before they are taken
#: (``set_intake_lag``).
intake_lag = 0.0


def set_intake_lag(seconds: float) -> None:
    """Reports currently wait ``seconds`` on the bus before a worker
    takes them: a host is not judged down for that wait."""
    global intake_lag
    intake_lag = max(0.0, seconds)


#: The last stretch during which this worker knows that no report could
#: reach the deployment: ``(since, until)``, ``until`` None while it
#: lasts; None when there was none (``deaf``, ``heard_again``).
_deafness: tuple[float, float | None] | None = None


def deaf(since: float, until: float | None = None) -> None:
    """No report could reach the schedulers from ``since`` (the broker
    was unreachable, or no scheduler ran) until ``until`` (None: still).

    A host is judged by the time the deployment could hear it: the
    stretch is not counted in any report's age until every host could
    have reported again (``service_down_time`` after it ended).  A
    stretch that begins while the last one still counts adds to it.
    """
    global _deafness
    if is_deaf():
        _deafness = (min(since, _deafness[0]), until)
        return
    _deafness = (since - _credit(since), until)


def heard_again(at: float | None = None) -> None:
    """Reports can reach the schedulers again since ``at`` (now)."""
    global _deafness
    if _deafness is not None and _deafness[1] is None:
        _deafness = (_deafness[0], now() if at is None else at)


def is_deaf() -> bool:
    """Whether a stretch without reports is under way (``deaf``)."""
    return _deafness is not None and _deafness[1] is None


def _credit(at: float) -> float:
    """Seconds of the deafness not counted in a report's age at ``at``."""
    if _deafness is None:
        return 0.0
    since, until = _deafness
    if until is None:
        return max(0.0, at - since)
    if at - until > CONF.scheduler.service_down_time + intake_lag:
        # Every host has had service_down_time to report since.
        return 0.0
    return max(0.0, until - since)


def cutoff(at: float | None = None) -> float:
    """Reports received before this time are stale (a report that
    waited on the bus counts from when it was sent, and a time no report
    could reach the schedulers does not count, ``deaf``)."""
    at = now() if at is None else at
    return (at - CONF.scheduler.service_down_time - intake_lag
            - _credit(at))


def is_up(host_state, at: float | None = None) -> bool:
    """Reported recently enough and not forced down by an operator."""
    if getattr(host_state, 'forced_down', False):
        return False
    return host_state.received_at >= cutoff(at)


def state_name(host_state, at: float | None = None) -> str:
    """``up``, ``down`` (stale report) or ``forced down`` (operator)."""
    if getattr(host_state, 'forced_down', False):
        return 'forced down'
    return 'up' if host_state.received_at >= cutoff(at) else 'down'


#: Fewer reports than this per ``service_down_time`` and one late or lost
#: report takes a host down.
REPORTS_PER_DOWN_TIME = 2


def interval_problem(report_interval: float, service_down_time: float
                     ) -> tuple[bool, str] | None:
    """Why hosts reporting every ``report_interval`` seconds would go
    down, or None when they keep up: ``(flaps, text)``.

    ``flaps`` is True when ``report_interval`` is not below
    ``service_down_time``: every host is then judged down before its
    next report and up again at it, over and over.  Otherwise the text
    says that the margin is thin (less than two reports per
    ``service_down_time``).
    """
    if report_interval >= service_down_time:
        return True, (
            '[scheduler] report_interval (%g s) is not below '
            'service_down_time (%g s): every host would be judged down '
            'before its next report and up again at it (flapping); keep '
            'service_down_time at least %d times report_interval'
            % (report_interval, service_down_time, REPORTS_PER_DOWN_TIME))
    if service_down_time < REPORTS_PER_DOWN_TIME * report_interval:
        return False, (
            '[scheduler] service_down_time (%g s) is less than %d times '
            'report_interval (%g s): one late or lost report marks a host '
            'down' % (service_down_time, REPORTS_PER_DOWN_TIME,
                      report_interval))
    return None
