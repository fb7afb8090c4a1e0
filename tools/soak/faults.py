"""The fault schedule: every kind of fault, each at least twice.

Kinds, in the order they first come (then again, on the other
service where there is a choice):

* ``broker``: the soak's own RabbitMQ node stops its application for
  ``BROKER_OUTAGE`` seconds and starts it again;
* ``kill9``: SIGKILL to one worker of a service, until its parent has
  started a new one;
* ``dbcut``: the TCP proxy in front of PostgreSQL stops for
  ``DB_CUT`` seconds (every connection cut, new ones refused);
* ``sighup``: SIGHUP to a service's parent (a configuration reload);
* ``sigterm``: SIGTERM to a whole service, then the same service
  started again (same host name).

Each fault is recorded as an ``invariants.Fault`` from its first act to
the moment things are back (broker answering, worker replaced, proxy
up, service ready again), so that the checker knows which calls ran
with no fault active.  Faults run one after the other in one thread:
one that overruns delays the next.
"""

import os
import signal
import threading
import time

from tools.soak import invariants

KINDS = ('broker', 'kill9', 'dbcut', 'sighup', 'sigterm')
ROUNDS = 2
BROKER_OUTAGE = 10
DB_CUT = 10
#: Seconds a SIGHUP counts as active (a reload has no end marker).
SIGHUP_ACTIVE = 5
#: Seconds a service may take to have all its workers again after a
#: kill -9.
KILL9_RECOVERY = 60
#: Seconds a service may take to stop on SIGTERM before it is killed.
STOP_TIMEOUT = 90


def plan(start: float, end: float) -> list:
    """``[(monotonic time, kind, round)]`` spread evenly over [start, end]."""
    faults = [(kind, rnd) for rnd in range(ROUNDS) for kind in KINDS]
    step = (end - start) / len(faults)
    return [(start + i * step, kind, rnd)
            for i, (kind, rnd) in enumerate(faults)]


class Faults:
    """Runs the plan on ``cluster``; records into ``evidence``."""

    def __init__(self, cluster, evidence: invariants.Evidence, lock,
                 schedule: list, say):
        self.cluster = cluster
        self.evidence = evidence
        self.lock = lock
        self.schedule = schedule
        self.say = say
        self.errors: list = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name='soak-faults',
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 300) -> None:
        self._stop.set()
        self._thread.join(timeout)

    def done(self) -> bool:
        return not self._thread.is_alive()

    def _run(self) -> None:
        for when, kind, rnd in self.schedule:
            while time.monotonic() < when:
                if self._stop.wait(min(1.0, when - time.monotonic())):
                    return
            if self._stop.is_set():
                return
            service = self.cluster.services[rnd % len(
                self.cluster.services)]
            # Recorded as active from its first act, open-ended until
            # things are back: samples and calls meanwhile see it.
            fault = invariants.Fault(kind, service.name, time.time(),
                                     float('inf'))
            with self.lock:
                self.evidence.faults.append(fault)
            try:
                target = getattr(self, '_' + kind)(service)
            except Exception as e:  # the soak goes on; the report says it
                target = 'failed: %r' % e
                self.errors.append('%s: %r' % (kind, e))
            with self.lock:
                fault.target, fault.end = target, time.time()
            self.say('fault %-8s %-28s from %s, %.1f s' % (
                kind, target, invariants.clock(fault.start),
                fault.end - fault.start))

    def _broker(self, _service) -> str:
        self.cluster.broker.stop_app()
        try:
            self._stop.wait(BROKER_OUTAGE)
        finally:
            self.cluster.broker.start_app()
        return self.cluster.broker.nodename

    def _kill9(self, service) -> str:
        before = service.started_workers()
        workers = service.workers()
        if not workers:
            raise RuntimeError('%s has no worker' % service.name)
        os.kill(workers[0], signal.SIGKILL)
        service.wait_ready(workers=before + 1, timeout=60)
        # A replacement may die at once (the database is down, say) and
        # be replaced again: over only when a full set of workers lives
        # for a while.
        stable = 0
        deadline = time.monotonic() + KILL9_RECOVERY
        while stable < 3 and time.monotonic() < deadline:
            now = service.workers()
            full = (len(now) == self.cluster.workers
                    and workers[0] not in now)
            stable = stable + 1 if full else 0
            self._stop.wait(1)
        return '%s worker %d%s' % (service.name, workers[0],
                                   '' if stable >= 3 else
                                   ' (workers not back)')

    def _dbcut(self, _service) -> str:
        self.cluster.db_proxy.stop()
        try:
            self._stop.wait(DB_CUT)
        finally:
            self.cluster.db_proxy.start()
        return 'proxy :%d' % self.cluster.db_proxy.port

    def _sighup(self, service) -> str:
        before = sorted(service.workers())
        os.kill(service.pid, signal.SIGHUP)
        self._stop.wait(SIGHUP_ACTIVE)
        if not service.daemon.alive():
            raise RuntimeError('%s died on SIGHUP' % service.name)
        after = sorted(service.workers())
        with self.lock:
            self.evidence.reloads.append((service.name, before, after))
        return service.name

    def _sigterm(self, service) -> str:
        daemon = service.daemon
        daemon.terminate()
        try:
            code = daemon.proc.wait(STOP_TIMEOUT)
        except Exception:  # did not stop: killed below
            code = None
        daemon.stop(1)
        with self.lock:
            self.evidence.exits.append(('%s.g%d' % (service.name,
                                                    service.generation),
                                        code))
        service.start()
        service.wait_ready()
        return '%s (exit %s)' % (service.name, code)
