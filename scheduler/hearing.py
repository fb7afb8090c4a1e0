"""Whether compute reports can reach this worker at all.

A host is down when the deployment has not heard from it for
``service_down_time``.  While the broker is unreachable no compute can
report, and no caller can ask for a placement either; when it comes
back, the first requests would find every host silent for the whole
outage and get NoValidHost until each host reported again.  So the
time no report could arrive is not counted (``liveness.deaf``).

A worker that starts after every scheduler of the deployment was
stopped, or could not hear the computes, finds the newest report in the
inventory old (``silent_before_start``): that stretch is not counted
either.

``Hearing.check`` runs at every periodic task: a worker that took a
report since the last check was heard.  A worker without a report turn
(``[scheduler] report_workers``) takes the word of the workers that
hold one: they publish when they last heard (``heard_at``: a report
taken, or the broker answering), and while that is recent
(``vouch_window``) it opens no connection of its own.  One that has
neither (quiet fleet, the holders' word is old because they died or
are stuck, or the broker is gone) asks the broker for a connection.
Computes that all stop while the broker stays reachable are judged
down as before.
"""

import logging
import typing

from oslo_config import cfg

from scheduler.resources import liveness

LOG = logging.getLogger(__name__)
CONF = cfg.CONF

#: Seconds a probe of the broker may take.
PROBE_TIMEOUT = 1.0

#: Seconds beyond a periodic interval for which the word of the
#: workers that take the reports stays good: their hearing time moves
#: with every report they take, or at each of their periodic checks in
#: a silent fleet, and reaches the others within the turn step
#: (``report_consumers.RETRY_EVERY``).
VOUCH_SLACK = 5.0


def vouch_window() -> float:
    """Seconds the report workers' word that they heard stays good."""
    return CONF.scheduler.periodic_task_interval + VOUCH_SLACK


class Hearing:
    """Tells the liveness clock when no report can reach this worker.

    ``probe()``: whether the broker takes a connection now.
    ``last_report()``: the liveness time this worker last took a report
    at, or None.
    ``vouched()``: when the workers that take this service's reports
    last heard the computes, as they published it, or None.
    """

    def __init__(self, probe: typing.Callable[[], bool],
                 last_report: typing.Callable[[], float | None],
                 vouched: typing.Callable[[], float | None] | None = None):
        self._probe = probe
        self._last_report = last_report
        self._vouched = vouched or (lambda: None)
        #: The last time reports could reach this worker.
        self._heard_at = liveness.now()

    @property
    def heard_at(self) -> float:
        """The last time reports reached this worker as far as it knows:
        a report it took, or its last check that heard (what a report
        worker publishes for the others)."""
        taken = self._last_report()
        if taken is not None and taken > self._heard_at:
            return taken
        return self._heard_at

    def check(self) -> None:
        """Note whether reports can reach this worker now."""
        now = liveness.now()
        taken = self._last_report()
        if taken is not None and taken > self._heard_at:
            self._heard(taken)
            return
        vouched = self._vouched()
        # Once deaf, only a word newer than what this worker last heard
        # says the broker is back.
        if (vouched is not None and now - vouched <= vouch_window()
                and (vouched > self._heard_at or not liveness.is_deaf())):
            self._heard(max(vouched, self._heard_at))
            return
        if self._probe():
            self._heard(now)
            return
        if not liveness.is_deaf():
            liveness.deaf(self._heard_at)
            LOG.warning('The message bus is unreachable: no compute report '
                        'can reach the schedulers, so hosts are not judged '
                        'down for the time it lasts')

    def _heard(self, at: float) -> None:
        if liveness.is_deaf():
            LOG.warning('The message bus is reachable again after %.0f s: '
                        'hosts are judged down only once they have had '
                        'service_down_time to report since',
                        at - self._heard_at)
            liveness.heard_again(at)
        self._heard_at = at


def silent_before_start(newest: float | None) -> None:
    """The newest report of the inventory is from ``newest`` (liveness
    time; None: the inventory has none) when this worker loads it.

    Older than a report interval and a flush allow, no worker of the
    deployment heard any compute meanwhile: not counted in the hosts'
    ages (``liveness.deaf``), so that a deployment started again after
    an outage does not judge its whole fleet down until each host has
    reported again.
    """
    if newest is None:
        return
    now = liveness.now()
    usual = (CONF.scheduler.report_interval
             + CONF.scheduler.periodic_task_interval)
    if now - newest <= usual:
        return
    liveness.deaf(newest, now)
    LOG.warning('The newest host report in the inventory is %.0f s old: '
                'no scheduler heard the computes meanwhile, so hosts are '
                'judged down only once they have had service_down_time to '
                'report again', now - newest)
