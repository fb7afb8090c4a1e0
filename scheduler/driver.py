"""The Scheduler base class that every driver implements.

A driver decides where instances go.  The manager loads exactly one,
from ``[scheduler] driver``: an entry point name in ``scheduler.drivers``
or a dotted class path.  Of the five methods below, a driver must
implement ``select_destinations`` and ``schedule_run_instance``; the
other three have working defaults built on the HostManager.
"""

import abc
import time

from oslo_config import cfg
from oslo_log import log as logging

from scheduler import compute_rpcapi
from scheduler.db import availability
from scheduler.db import taken_casts
from scheduler import exception
from scheduler import host_manager as host_manager_mod
from scheduler import objects
from scheduler.replay import trace
from scheduler import usage_cache

LOG = logging.getLogger(__name__)
CONF = cfg.CONF

#: Longest wait (seconds) before placing an undelivered build again.
MAX_REDELIVERY_WAIT = 5


class Scheduler(metaclass=abc.ABCMeta):
    """Base class of scheduler drivers."""

    def __init__(self,
                 host_manager: host_manager_mod.HostManager | None = None):
        self.host_manager = host_manager or host_manager_mod.HostManager()
        self.compute_rpcapi = compute_rpcapi.ComputeAPI()
        #: Set when the service begins to stop (``Service.stop``): the
        #: builds it still serves try their other hosts at once instead
        #: of waiting for computes to declare their queues again.
        self.stopping = False

    def update_service_capabilities(self, host_state,
                                    shared: bool = False) -> None:
        """Record a compute's report (``HostState``) of one of its nodes.

        ``shared``: from the intake queue, which no other worker hears
        (``HostManager.update_from_report``).
        """
        self.host_manager.update_from_report(host_state, shared=shared)

    def hosts_up(self, context, topic: str | None = None) -> list:
        """Names of the hosts that reported recently and are not disabled."""
        return self.host_manager.host_names()

    def group_hosts(self, context, group) -> list:
        """Hosts the members of server ``group`` run on.

        Combines what the group object says with the instances this
        scheduler knows about on every host.
        """
        hosts = set(group.obj_get('hosts') or [])
        members = set(group.obj_get('members') or [])
        if members:
            for state in self.host_manager.get_all_host_states():
                if members.intersection(state.instance_uuids):
                    hosts.add(state.host)
        return sorted(hosts)

    @abc.abstractmethod
    def select_destinations(self, context, spec_obj, instance_uuids: list,
                            return_alternates: bool = False) -> list:
        """Choose hosts for ``spec_obj.num_instances`` instances.

        Returns one list of ``Selection`` per instance: the first is the
        destination, the rest (when ``return_alternates``) alternates.
        Raises ``NoValidHost`` when an instance cannot be placed; nothing
        stays claimed then.
        """

    @abc.abstractmethod
    def schedule_run_instance(self, context, spec_obj,
                              instance_uuids: list) -> None:
        """Choose a host per instance and cast ``run_instance`` to it.

        A cast: errors are logged per instance, never raised to the
        caller, so that one failed instance does not stop the others.
        """

    # Helpers for drivers ---------------------------------------------------

    def hand_back_if_stopping(self) -> None:
        """Raise ``CastHandedBack`` when the service is stopping and
        this thread serves a cast whose row is written: before a claim,
        so that the stop waits for no build that has not claimed yet
        (what is left of the cast is another worker's to take over)."""
        taken = taken_casts.current()
        if self.stopping and taken is not None:
            raise exception.CastHandedBack(cast_id=taken.id)

    def run_on_selections(self, context, spec_obj, instance_uuids: list,
                          selections: list) -> list:
        """Cast ``run_instance`` for each instance to its first choice.

        Returns the first choices whose cast the broker did not take
        (``compute_rpcapi.UNDELIVERED``: no queue for that host, or the
        broker unreachable), each logged at WARNING; their claims are
        still held, for the caller to release or retry.
        """
        undelivered = []
        for uuid, alts in zip(instance_uuids, selections):
            chosen = alts[0]
            try:
                self.compute_rpcapi.run_instance(
                    context, host=chosen.service_host,
                    node=chosen.nodename, instance_uuid=uuid,
                    spec_obj=spec_obj, limits=chosen.limits)
            except compute_rpcapi.UNDELIVERED as e:
                LOG.warning('Build of instance %(uuid)s not delivered to '
                            '%(host)s: %(error)s',
                            {'uuid': uuid, 'host': chosen.service_host,
                             'error': type(e).__name__})
                undelivered.append(chosen)
        return undelivered

    def schedule_each(self, context, spec_obj, instance_uuids: list) -> None:
        """``schedule_run_instance`` done one instance at a time.

        A build the broker could not deliver is not left to expire: its
        claim is released and the instance is placed again without that
        host, up to ``[scheduler] max_attempts`` hosts in all, waiting a
        little longer before each new try (computes re-declare their
        queues a few seconds after a broker restart).  One that no host
        took is logged at ERROR.
        """
        for uuid in instance_uuids:
            self.hand_back_if_stopping()
            single = spec_obj.obj_clone()
            single.num_instances = 1
            single.instance_uuid = uuid
            try:
                # Start-up may have put the load off (a database outage).
                self.host_manager.ensure_loaded()
                self._build_one(context, single, uuid)
            except exception.NoValidHost as e:
                LOG.warning('Could not schedule instance %(uuid)s: %(err)s',
                            {'uuid': uuid, 'err': e})
            except (exception.CastTakenOver, exception.CastHandedBack):
                # Another worker serves the cast now (or will), this
                # instance included (nothing claimed here stayed).
                raise
            except Exception as e:
                if not availability.is_outage(e):
                    LOG.exception('Failed to schedule instance %s', uuid)
                    continue
                # The outage is logged once (with a count of these); the
                # instance is named, as the caller will not hear of it.
                availability.count('builds not scheduled')
                LOG.warning('Could not schedule instance %(uuid)s: the '
                            'inventory database is unavailable; nothing '
                            'was claimed or cast', {'uuid': uuid})

    def _build_one(self, context, spec_obj, uuid: str) -> None:
        ignored = list(spec_obj.obj_get('ignore_hosts') or [])
        tried: list = []
        for attempt in range(CONF.scheduler.max_attempts):
            if tried:
                if not self.stopping:
                    # Computes declare their queues again a few
                    # seconds after a broker restart; a stopping
                    # service has no seconds to give (its stop budget).
                    time.sleep(min(attempt, MAX_REDELIVERY_WAIT))
                spec_obj.ignore_hosts = ignored + tried
                try:
                    selections = self._recorded_select(context, spec_obj,
                                                       uuid)
                except exception.NoValidHost:
                    break
            else:
                selections = self._recorded_select(context, spec_obj, uuid)
            undelivered = self.run_on_selections(context, spec_obj, [uuid],
                                                 selections)
            if not undelivered:
                if tried:
                    LOG.info('Build of instance %(uuid)s delivered to '
                             '%(host)s after %(tried)s did not take it',
                             {'uuid': uuid,
                              'host': selections[0][0].service_host,
                              'tried': ', '.join(tried)})
                return
            self._release_undelivered(uuid, undelivered[0])
            # The trace frees it there too: a replay places it again.
            trace.released(undelivered[0].service_host, uuid)
            tried.append(undelivered[0].service_host)
        LOG.error('Build of instance %(uuid)s lost: no compute took it '
                  '(tried %(tried)s); its claim is released, the caller '
                  'must build it again', {'uuid': uuid,
                                          'tried': ', '.join(tried)})

    def _recorded_select(self, context, spec_obj, uuid: str) -> list:
        """One instance of a cast placed, and recorded in the request
        trace (``[trace] enabled``) as a request of its own, the way
        the manager records ``select_destinations`` calls."""
        served = trace.serving(self, spec_obj, [uuid])
        try:
            selections = self.select_destinations(
                context, spec_obj, [uuid], return_alternates=False,
                **served.kwargs)
        except Exception as e:
            served.refused(e)
            raise
        served.answered(selections)
        return selections

    def _release_undelivered(self, uuid: str, chosen) -> None:
        """Give back the claim of a build that reached no compute."""
        self.host_manager.release(usage_cache.Claim(
            uuid, chosen.service_host, chosen.nodename, 0, 0, 0))

    def explain(self, context, spec_obj) -> dict:
        """Say how this driver would place ``spec_obj``, claiming nothing.

        Drivers without filters describe the hosts they would choose
        among.
        """
        self.host_manager.refresh_changed_reports()
        hosts = self.host_manager.get_up_host_states()
        return {'driver': type(self).__name__,
                'hosts_known': len(self.host_manager.get_all_host_states()),
                'candidates': len(hosts), 'forced': False, 'filters': [],
                'rejected': {}, 'passed': len(hosts),
                'ranking': [{'host': h.host, 'nodename': h.nodename,
                             'weight': None, 'contributions': {}}
                            for h in hosts[:20]]}

    def reset(self) -> None:
        """Re-read driver options after a configuration reload (SIGHUP)."""


def selection_for(host_state, instance_uuid: str | None,
                  weight: float | None = None, limits: dict | None = None):
    return objects.Selection.from_host_state(host_state, instance_uuid,
                                             weight, limits)
