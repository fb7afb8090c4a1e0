"""HostManager: the scheduler's view of every compute node.

It keeps the newest report of each (host, nodename), adds the
aggregates the inventory knows, and tracks *claims*: instances this
scheduler placed that the compute has not reported yet.  A new report
replaces the old state, then the claims it does not include yet are
applied again, so that a report sent before a placement does not make
the scheduler forget that placement.

Writes to the inventory are batched: reports and claims are flushed by
the periodic task (and at shutdown), which keeps the request path free
of database round trips.  A restarted scheduler loads the last reports,
aggregates and claims from the inventory and schedules from them.
"""

import collections
import dataclasses
import datetime
import time

from oslo_config import cfg
from oslo_log import log as logging
from oslo_utils import timeutils

from scheduler import exception
from scheduler import host_view
from scheduler import objects
from scheduler.resources import compute
from scheduler.resources import liveness
from scheduler.resources import numa
from scheduler.resources import pci

LOG = logging.getLogger(__name__)
CONF = cfg.CONF


@dataclasses.dataclass
class Claim:
    """Resources of one placed instance not yet seen in a compute report."""

    instance_uuid: str
    host: str
    nodename: str
    memory_mb: int
    vcpus: int
    disk_gb: int
    project_id: str | None = None
    user_id: str | None = None
    claimed_at: float = dataclasses.field(default_factory=time.time)
    #: NUMA cells and PCI devices taken, as the filters' claim_* return.
    numa: list = dataclasses.field(default_factory=list)
    pci: list = dataclasses.field(default_factory=list)


def _inventory():
    from scheduler.db import api as db_api
    return db_api


class HostManager:
    """Host states, claims and aggregates for one scheduler process."""

    def __init__(self, inventory=None):
        self._db = inventory
        self._states: dict = {}
        self._claims: dict = collections.defaultdict(dict)
        self._aggregates: list = []
        self._host_aggregates: dict = {}
        self._dirty_reports: dict = {}
        self._new_claims: list = []
        self._released: list = []
        self._fulfilled: list = []
        self._syncs: dict = {}
        self._down: set = set()
        self._aggregates_stamp: tuple | None = None

    @property
    def db(self):
        if self._db is None:
            self._db = _inventory()
        return self._db

    # -- loading and saving ---------------------------------------------

    def load_from_inventory(self) -> None:
        """Load reports, aggregates and open claims saved by a previous run."""
        self.refresh_aggregates()
        for row in self.db.host_reports_get_all():
            try:
                state = objects.HostState.obj_from_primitive(row['report'])
            except Exception as e:
                LOG.warning('Ignoring unreadable saved report of %s/%s: %s',
                            row['host'], row['nodename'], e)
                continue
            updated = row.get('updated_at')
            state = host_view.HostView(
                state, _timestamp(updated) if updated else None)
            state.disabled = bool(row.get('disabled', state.disabled))
            self._attach_aggregates(state)
            self._states[state.key()] = state
        for inst in self.db.instance_get_all():
            if inst.get('status') != 'claimed':
                continue
            claim = Claim(inst['instance_uuid'], inst['host'],
                          inst['nodename'], inst['memory_mb'], inst['vcpus'],
                          inst['disk_gb'], inst.get('project_id'),
                          inst.get('user_id'))
            state = self._states.get((claim.host, claim.nodename))
            if state is None or claim.instance_uuid in state.instance_uuids:
                continue
            self._claims[(claim.host, claim.nodename)][
                claim.instance_uuid] = claim
            state.apply_claim(claim.memory_mb, claim.vcpus, claim.disk_gb,
                              claim.instance_uuid)
        LOG.info('Loaded %d host state(s) and %d aggregate(s) from the '
                 'inventory', len(self._states), len(self._aggregates))

    def flush(self) -> None:
        """Write new reports and claims to the inventory (periodic task)."""
        reports, self._dirty_reports = self._dirty_reports, {}
        claims, self._new_claims = self._new_claims, []
        released, self._released = self._released, []
        fulfilled, self._fulfilled = self._fulfilled, []
        syncs, self._syncs = self._syncs, {}
        try:
            if reports:
                self.db.host_reports_save([
                    {'host': s.host, 'nodename': s.nodename,
                     'uuid': s.obj_get('uuid'), 'disabled': s.disabled,
                     'updated_at': timeutils.utcnow(),
                     'report': s.report.obj_to_primitive()}
                    for s in reports.values()])
            if claims:
                self.db.instances_claim([
                    dataclasses.asdict(c) for c in claims])
            if released:
                self.db.instances_delete(released)
            if fulfilled:
                self.db.instance_set_active(fulfilled)
            for host, uuids in syncs.items():
                self.db.instances_sync_host(host, uuids)
        except Exception:
            # Keep what was not written for the next flush.
            LOG.exception('Could not write to the inventory; will retry')
            for key, state in reports.items():
                self._dirty_reports.setdefault(key, state)
            self._new_claims[:0] = claims
            self._released[:0] = released
            self._fulfilled[:0] = fulfilled
            for host, uuids in syncs.items():
                self._syncs.setdefault(host, uuids)

    # -- reports from computes ------------------------------------------

    def update_from_report(self, report) -> None:
        """Take a compute's report as the new state of its node."""
        state = host_view.HostView(report)
        key = state.key()
        self._attach_aggregates(state)
        reported = set(state.instance_uuids)
        pending = self._claims.get(key, {})
        expiry = CONF.scheduler.service_down_time
        for uuid, claim in list(pending.items()):
            if uuid in reported:
                del pending[uuid]
                self._fulfilled.append(uuid)
            elif state.received_at - claim.claimed_at > expiry:
                LOG.info('Claim of instance %(uuid)s on %(host)s expired: '
                         'the compute never reported it',
                         {'uuid': uuid, 'host': state.host})
                del pending[uuid]
                self._released.append(uuid)
            else:
                _apply(state, claim)
        if key in self._down:
            self._down.discard(key)
            LOG.info('Host %s/%s is reporting again; scheduling to it',
                     *key)
        elif key not in self._states:
            LOG.info('New host %s/%s reported', *key)
        self._states[key] = state
        self._dirty_reports[key] = state

    def check_down_hosts(self) -> list:
        """Log, once, each host that stopped reporting; return their keys."""
        newly_down = []
        now = liveness.now()
        cutoff = liveness.cutoff(now)
        for key, state in self._states.items():
            if state.received_at >= cutoff or key in self._down:
                continue
            self._down.add(key)
            newly_down.append(key)
            LOG.warning('Host %(host)s/%(node)s has not reported for %(age)d '
                        's (service_down_time %(limit)d s): no longer '
                        'scheduling to it',
                        {'host': key[0], 'node': key[1],
                         'age': state.seconds_since_report(now),
                         'limit': CONF.scheduler.service_down_time})
        return newly_down

    # -- what the drivers read ------------------------------------------

    def get_all_host_states(self) -> list:
        """Every known node, up or down (ComputeFilter drops the down)."""
        return list(self._states.values())

    def get_up_host_states(self) -> list:
        cutoff = liveness.cutoff()
        return [s for s in self._states.values()
                if s.received_at >= cutoff and not s.disabled
                and not s.forced_down]

    def get_host_state(self, host: str, nodename: str | None = None):
        for state in self._states.values():
            if state.host == host and (nodename is None
                                       or state.nodename == nodename):
                return state
        raise exception.HostNotFound(host=host)

    def claim(self, host_state, spec_obj, instance_uuid: str | None) -> Claim:
        """Consume one instance's resources on ``host_state``."""
        memory_mb, vcpus, disk_gb = compute.resources_of(spec_obj)
        claim = Claim(instance_uuid or '', host_state.host,
                      host_state.nodename, memory_mb, vcpus, disk_gb,
                      spec_obj.obj_get('project_id'),
                      spec_obj.obj_get('user_id'))
        host_state.apply_claim(memory_mb, vcpus, disk_gb, instance_uuid)
        claim.numa = numa.claim_numa(host_state, spec_obj)
        claim.pci = pci.claim_pci(host_state, spec_obj)
        if instance_uuid:
            self._claims[host_state.key()][instance_uuid] = claim
            self._new_claims.append(claim)
        return claim

    def release(self, claim: Claim) -> None:
        """Give back a claim (e.g. a later instance of the request failed)."""
        key = (claim.host, claim.nodename)
        state = self._states.get(key)
        if state is not None:
            _apply(state, claim, sign=-1)
        if claim.instance_uuid:
            self._claims.get(key, {}).pop(claim.instance_uuid, None)
            if claim in self._new_claims:
                self._new_claims.remove(claim)
            else:
                self._released.append(claim.instance_uuid)

    # -- aggregates -----------------------------------------------------

    def refresh_aggregates(self) -> None:
        """Re-read aggregates from the inventory (other workers change them).

        Host views are re-attached only when something changed: with ten
        thousand hosts that is the expensive part, and aggregates rarely
        change.
        """
        stamp = self.db.aggregates_stamp()
        if stamp == self._aggregates_stamp:
            return
        self._set_aggregates([_aggregate_obj(a)
                              for a in self.db.aggregate_get_all()])
        self._aggregates_stamp = stamp

    def update_aggregates(self, aggregates: list) -> None:
        """Aggregates another service changed: apply, then save.

        Applied in memory first, so this worker schedules with them even
        if saving fails (every worker gets the same cast and saves the
        same rows; the inventory ends up right either way).
        """
        changed = {agg.name: agg for agg in aggregates}
        uuids = {agg.obj_get('uuid') for agg in aggregates} - {None}
        kept = [a for a in self._aggregates
                if a.name not in changed and a.uuid not in uuids]
        self._set_aggregates(kept + list(aggregates))
        for agg in aggregates:
            self.db.aggregate_upsert({
                'uuid': agg.obj_get('uuid'), 'name': agg.name,
                'hosts': list(agg.obj_get('hosts') or []),
                'metadata': dict(agg.obj_get('metadata') or {})})

    def delete_aggregate(self, aggregate) -> None:
        self._set_aggregates([a for a in self._aggregates
                              if a.name != aggregate.name])
        try:
            self.db.aggregate_delete(aggregate.obj_get('uuid')
                                     or aggregate.name)
        except exception.AggregateNotFound:
            pass

    def aggregates(self) -> list:
        return list(self._aggregates)

    def _set_aggregates(self, aggregates: list) -> None:
        self._aggregates_stamp = None
        by_host = collections.defaultdict(list)
        for agg in aggregates:
            for host in agg.hosts:
                by_host[host].append(agg)
        self._aggregates = aggregates
        self._host_aggregates = dict(by_host)
        for state in self._states.values():
            self._attach_aggregates(state)

    def _attach_aggregates(self, state) -> None:
        state.set_aggregates(self._host_aggregates.get(state.host, []))

    # -- instance info from computes ------------------------------------

    def update_instance_info(self, host: str, instance_uuids: list) -> None:
        """A compute reports new instances on ``host``."""
        for key, pending in self._claims.items():
            if key[0] != host:
                continue
            for uuid in instance_uuids:
                if pending.pop(uuid, None) is not None:
                    self._fulfilled.append(uuid)

    def sync_instance_info(self, host: str, instance_uuids: list) -> None:
        """A compute's complete list of its instances, sent now and then.

        Fulfils the claims it lists; the inventory drops placements on
        that host the compute no longer has (at the next flush).
        """
        self.update_instance_info(host, instance_uuids)
        self._syncs[host] = list(instance_uuids)

    def delete_instance_info(self, host: str, instance_uuid: str) -> None:
        """An instance was deleted on ``host``: its resources are free."""
        for key, state in self._states.items():
            if key[0] != host:
                continue
            claim = self._claims.get(key, {}).pop(instance_uuid, None)
            if claim is not None:
                _apply(state, claim, sign=-1)
        self._released.append(instance_uuid)

    def host_names(self, states: list | None = None) -> list:
        states = self.get_up_host_states() if states is None else states
        return sorted({s.host for s in states})


def _apply(state, claim: Claim, sign: int = 1) -> None:
    """Lay a claim over a host state (``sign=-1`` takes it off)."""
    state.apply_claim(claim.memory_mb, claim.vcpus, claim.disk_gb,
                      claim.instance_uuid or None, sign=sign)
    numa.apply_numa_usage(state, claim.numa, sign=sign)
    pci.apply_pci_usage(state, claim.pci, sign=sign)


def _aggregate_obj(row: dict):
    return objects.Aggregate(id=row.get('id'), uuid=row.get('uuid'),
                             name=row['name'], hosts=list(row['hosts']),
                             metadata=dict(row['metadata']))


def _timestamp(value: datetime.datetime) -> float:
    """Seconds since the epoch of a (naive UTC or aware) datetime."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=datetime.timezone.utc)
    return value.timestamp()
