"""Conductor-style callers: varied requests, builds and terminations.

Each caller is a thread of this process (one transport for them all)
that, until stopped, picks one of:

* ``select_destinations`` for 1-3 instances of a random flavor (root
  disks of several sizes), in a random zone or none, sometimes as an
  anti-affinity server group; on success it casts ``run_instance`` to
  each chosen host itself, as nova's conductor does (with the
  mandatory flag: a build no queue takes fails here, and its claim is
  given back with ``delete_instance_info``);
* ``schedule_run_instance`` (the scheduler builds them);
* ``terminate_instance`` of an instance the simulator's log says runs,
  more often as the fleet fills up.

Everything sent and every answer goes into the ``Evidence`` the
invariant checker reads.
"""

import random
import threading
import time
import uuid as uuid_lib

from oslo_log import log as logging
import oslo_messaging

from scheduler import compute_rpcapi
from scheduler import context
from scheduler import exception
from scheduler import objects
from scheduler import rpcapi
from tests.unit import fixtures
from tools.soak import invariants

LOG = logging.getLogger(__name__)

#: (memory_mb, vcpus, root_gb, weight): small flavors are the common ones.
FLAVORS = ((512, 1, 10, 4), (1024, 1, 20, 4), (2048, 2, 40, 3),
           (4096, 2, 80, 2), (8192, 4, 40, 1))
#: Zones asked for (None: any).
ZONES = (None, None, 'az1', 'az2')
#: Seconds a caller waits for a reply, as a conductor configures it.
CALL_TIMEOUT = 10
#: Outcomes of a call whose answer the caller never got: the service
#: may have claimed its instances (``invariants.Evidence.unanswered``).
UNANSWERED = ('MessagingTimeout', 'MessageBusUnreachable',
              'NoServerConsuming')
#: Seconds between two actions of one caller.
PAUSE = (0.2, 0.8)


def _error_name(error: Exception) -> str:
    if isinstance(error, oslo_messaging.RemoteError):
        return 'RemoteError(%s)' % error.exc_type
    return type(error).__name__


class Traffic:
    """``callers`` threads sending requests until ``stop()``."""

    def __init__(self, evidence: invariants.Evidence, sim_log,
                 callers: int = 5, target_running: int = 500,
                 seed: int = 0):
        self.evidence = evidence
        self.sim_log = sim_log
        self.target_running = target_running
        self.seed = seed
        #: Held while the evidence changes (the sampler copies it).
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._terminating: set = set()
        self._threads = [threading.Thread(target=self._run, args=(i,),
                                          name='soak-caller-%d' % i,
                                          daemon=True)
                         for i in range(callers)]
        #: Calls go with the user's context; builds and terminations
        #: with an elevated one, as a conductor's: the simulated
        #: compute tells the scheduler about the instance with the
        #: context of the cast, and the scheduler takes instance news
        #: from admins only.
        self.ctxt = context.RequestContext(user_id='soak',
                                           project_id='soak')
        self.elevated = self.ctxt.elevated()

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self, timeout: float = CALL_TIMEOUT + 30) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout)

    # -- one caller ---------------------------------------------------------

    def _run(self, index: int) -> None:
        rng = random.Random(self.seed * 100 + index)
        api = rpcapi.SchedulerAPI(timeout=CALL_TIMEOUT)
        computes = compute_rpcapi.ComputeAPI()
        while not self._stop.is_set():
            running = self.sim_log.running_now()
            share = len(running) / max(1, self.target_running)
            if running and rng.random() < min(0.9, 0.4 * share):
                self._terminate(computes, running, rng)
            elif rng.random() < 0.15:
                self._schedule(api, rng)
            else:
                self._select(api, computes, rng)
            self._stop.wait(rng.uniform(*PAUSE))

    def _spec(self, rng: random.Random, count: int):
        memory_mb, vcpus, root_gb, _w = rng.choices(
            FLAVORS, weights=[f[3] for f in FLAVORS])[0]
        fields = {'project_id': 'soak', 'user_id': 'soak'}
        zone = rng.choice(ZONES)
        if zone:
            fields['availability_zone'] = zone
        uuids = [str(uuid_lib.uuid4()) for _ in range(count)]
        if count > 1 and rng.random() < 0.3:
            fields['instance_group'] = objects.InstanceGroup(
                uuid=str(uuid_lib.uuid4()), policy='anti-affinity',
                members=list(uuids), hosts=[])
        spec = fixtures.request(memory_mb=memory_mb, vcpus=vcpus,
                                root_gb=root_gb, num_instances=count,
                                **fields)
        return spec, uuids

    def _select(self, api, computes, rng: random.Random) -> None:
        spec, uuids = self._spec(rng, rng.choice((1, 1, 1, 2, 3)))
        started = time.time()
        try:
            selections = api.select_destinations(self.ctxt, spec, uuids)
            outcome, detail = 'ok', ''
        except exception.NoValidHost:
            selections, outcome, detail = None, 'NoValidHost', ''
        except Exception as e:  # every other outcome is evidence
            selections, outcome, detail = None, _error_name(e), str(e)
        ended = time.time()
        with self.lock:
            self.evidence.calls.append(invariants.Call(
                started=started, ended=ended, timeout=CALL_TIMEOUT,
                outcome=outcome, detail=detail))
            if outcome in UNANSWERED:
                self.evidence.unanswered.update(uuids)
                LOG.warning('select_destinations ended unanswered (%s) '
                            'for instance(s) %s', outcome, ', '.join(uuids))
            for uuid, alts in zip(uuids, selections or ()):
                self.evidence.told[uuid] = (alts[0].service_host,
                                            alts[0].nodename, ended)
        for uuid, alts in zip(uuids, selections or ()):
            self._build(computes, spec, uuid, alts[0])

    def _build(self, computes, spec, uuid: str, chosen) -> None:
        sent = time.time()
        refused = None
        try:
            computes.run_instance(self.elevated, chosen.service_host,
                                  chosen.nodename, uuid, spec,
                                  limits=chosen.limits)
        except Exception as e:  # not delivered: give the claim back
            refused = _error_name(e)
        if refused is not None:
            try:
                rpcapi.SchedulerAPI().delete_instance_info(
                    self.elevated, chosen.service_host, uuid)
            except Exception:  # the claim then expires on its own
                pass
        with self.lock:
            self.evidence.casts.append(invariants.Cast(
                'run_instance', uuid, chosen.service_host, sent, refused))
            if refused is not None:
                self.evidence.released.add(uuid)

    def _schedule(self, api, rng: random.Random) -> None:
        spec, uuids = self._spec(rng, rng.choice((1, 2, 3)))
        sent = time.time()
        refused = None
        try:
            api.schedule_run_instance(self.elevated, spec, uuids)
        except Exception as e:  # the sender knows: visible
            refused = _error_name(e)
        with self.lock:
            for uuid in uuids:
                self.evidence.casts.append(invariants.Cast(
                    'schedule_run_instance', uuid, None, sent, refused))

    def _terminate(self, computes, running: dict,
                   rng: random.Random) -> None:
        with self.lock:
            choices = sorted(set(running) - self._terminating)
            if not choices:
                return
            uuid = rng.choice(choices)
            self._terminating.add(uuid)
        host = running[uuid]
        sent = time.time()
        refused = None
        try:
            computes.terminate_instance(self.elevated, host, uuid)
        except Exception as e:  # the sender knows: visible
            refused = _error_name(e)
        with self.lock:
            self.evidence.casts.append(invariants.Cast(
                'terminate_instance', uuid, host, sent, refused))
