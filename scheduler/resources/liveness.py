"""The clock every up/down decision reads, in one place.

A host is up when its last report is no older than ``[scheduler]
service_down_time`` and nobody forced it down.  The age of a report is
``now() - received_at``; ``now`` reads ``clock``, which a test or a
replay may replace (``set_clock``) to state a host's report age
without sleeping.
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


def cutoff(at: float | None = None) -> float:
    """Reports received before this time are stale."""
    return (now() if at is None else at) - CONF.scheduler.service_down_time


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
