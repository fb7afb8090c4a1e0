"""A hypothesis state machine over the claim protocol's inventory API.

Claims, computes that build, refuse and terminate instances, reports
(taken at one time, written at another, in any order: every worker
writes every report when it flushes), ``update_instance_info``,
``sync_instance_info``, expiries, and ``delete_instance_info`` casts
that arrive late or never (a database cut, a worker killed, a
connection refused), interleaved.  After every step, on every node:

* ``claimed_*`` is the sum of the node's pending placement rows;
* ``reported_* + claimed_*`` is at least the sum of all its placement
  rows, pending and active (the claim's check never sees the node
  emptier than its placements);
* its placement rows fit under its limits;
* a placement that no compute runs is gone once its node reported
  twice more without it (a claim never confirmed nor listed excepted:
  expiry drops those);
* ``reported_* + claimed_*`` is at least what its compute runs (an
  expired claim built after all excepted, until a report counts it):
  no claim is given the room of a running instance.

``tests/unit/db/test_usage_invariant.py`` runs it on SQLite,
``tests/functional/db/test_usage_invariant.py`` on PostgreSQL.
"""

import datetime
from unittest import mock

from hypothesis import stateful
from hypothesis import strategies as st
from oslo_utils import timeutils
import sqlalchemy as sa

from scheduler.db import engine
from scheduler.db import models
from scheduler.db import usage

NODES = ('n1', 'n2')
LIMIT_MB = 4096
LIMIT_VCPU = 6
SIZES = (512, 1024, 2048)


def uuid_of(number: int) -> str:
    return '00000000-0000-4000-8000-%012d' % number


class UsageMachine(stateful.RuleBasedStateMachine):
    """Subclassed by each backend's test, which sets ``reset``."""

    #: ``reset()`` empties the inventory, as a fresh one, before a run.
    reset = None

    def __init__(self):
        super().__init__()
        type(self).reset()
        # The compute's clock and the scheduler's are one (confirmations
        # are stamped with the scheduler's).
        self.clock = datetime.datetime.utcnow()
        self._clock = mock.patch.object(
            timeutils, 'utcnow', lambda with_timezone=False: self.clock)
        self._clock.start()
        self.next_uuid = 0
        #: node -> {uuid: (memory_mb, vcpus)} the compute runs.
        self.runs = {node: {} for node in NODES}
        #: uuid -> node: run_instance casts not served yet.
        self.to_build = {}
        #: Snapshots of computes, not written yet: (node, time, runs).
        self.unsent = []
        #: delete_instance_info casts not delivered yet: (node, uuid).
        self.undelivered = []
        #: node -> reports written since each uuid stopped running there.
        self.gone_since = {node: {} for node in NODES}
        #: Claims expired, which a compute may build all the same.
        self.expired = set()
        #: uuid -> (node, new size): resizes on their own node claimed,
        #: not begun by the compute yet.
        self.to_resize = {}
        for node in NODES:
            usage.apply_reports([self._report(node, {})])

    # -- helpers ----------------------------------------------------------

    def teardown(self):
        self._clock.stop()

    def _tick(self) -> datetime.datetime:
        self.clock += datetime.timedelta(seconds=1)
        return self.clock

    def _report(self, node, runs, at=None):
        return usage.NodeReport(
            node, node, memory_mb_used=sum(m for m, _c in runs.values()),
            vcpus_used=sum(c for _m, c in runs.values()), local_gb_used=0,
            num_instances=len(runs), updated_at=at or self._tick(),
            instance_uuids=frozenset(runs))

    # -- rules ------------------------------------------------------------

    @stateful.rule(node=st.sampled_from(NODES),
                   memory_mb=st.sampled_from(SIZES),
                   vcpus=st.integers(1, 3))
    def claim(self, node, memory_mb, vcpus):
        self.next_uuid += 1
        uuid = uuid_of(self.next_uuid)
        try:
            usage.claim(usage.ClaimRequest(
                uuid, node, node, memory_mb, vcpus, 0,
                limits={'memory_mb': LIMIT_MB, 'vcpu': LIMIT_VCPU}))
        except usage.ClaimConflict:
            return
        self.to_build[uuid] = node

    @stateful.precondition(lambda self: self.to_build)
    @stateful.rule(data=st.data(), confirm=st.booleans())
    def build(self, data, confirm):
        """The compute serves run_instance: builds it if it fits."""
        uuid = data.draw(st.sampled_from(sorted(self.to_build)))
        node = self.to_build.pop(uuid)
        placed = usage.placements_get([uuid]).get(uuid)
        size = ((placed['memory_mb'], placed['vcpus']) if placed
                else (SIZES[0], 1))
        runs = self.runs[node]
        if (sum(m for m, _c in runs.values()) + size[0] > LIMIT_MB
                or sum(c for _m, c in runs.values()) + size[1]
                > LIMIT_VCPU):
            # Refused: the compute says so (delete_instance_info).
            usage.release([uuid], host=node)
            return
        runs[uuid] = size
        if confirm:
            usage.confirm(node, [uuid])

    @stateful.precondition(lambda self: any(self.runs.values()))
    @stateful.rule(data=st.data(), memory_mb=st.sampled_from(SIZES))
    def claim_resize(self, data, memory_mb):
        """A running instance claims a larger size on its own node
        (nova's allow_resize_to_same_host).  Not a smaller one: its
        claim would give back room the instance uses until resized."""
        node = data.draw(st.sampled_from(
            [n for n in NODES if self.runs[n]]))
        uuid = data.draw(st.sampled_from(sorted(self.runs[node])))
        old_mb, vcpus = self.runs[node][uuid]
        # Without a placement (its claim expired) it is a new claim.
        if memory_mb < old_mb or uuid not in usage.placements_get([uuid]):
            return
        try:
            usage.claim(usage.ClaimRequest(
                uuid, node, node, memory_mb, vcpus, 0,
                limits={'memory_mb': LIMIT_MB, 'vcpu': LIMIT_VCPU}),
                replace=True)
        except usage.ClaimConflict:
            return
        self.to_resize[uuid] = (node, (memory_mb, vcpus))

    @stateful.precondition(lambda self: self.to_resize)
    @stateful.rule(data=st.data(), confirm=st.booleans())
    def resize(self, data, confirm):
        """The compute resizes it (if it still runs and fits)."""
        uuid = data.draw(st.sampled_from(sorted(self.to_resize)))
        node, size = self.to_resize.pop(uuid)
        runs = dict(self.runs[node])
        if runs.pop(uuid, None) is None:
            return
        if (sum(m for m, _c in runs.values()) + size[0] > LIMIT_MB
                or sum(c for _m, c in runs.values()) + size[1]
                > LIMIT_VCPU):
            return
        self.runs[node][uuid] = size
        if confirm:
            usage.confirm(node, [uuid])

    @stateful.rule(node=st.sampled_from(NODES))
    def snapshot(self, node):
        """The compute takes a report; it is written later."""
        self.unsent.append((node, self._tick(), dict(self.runs[node])))

    @stateful.precondition(lambda self: self.unsent)
    @stateful.rule(data=st.data(), keep=st.booleans())
    def write_report(self, data, keep):
        """A worker writes a report it holds (any one: workers flush
        at their own pace); ``keep``: another worker writes it again
        later."""
        index = data.draw(st.integers(0, len(self.unsent) - 1))
        node, at, runs = self.unsent[index]
        if not keep:
            del self.unsent[index]
        usage.apply_reports([self._report(node, runs, at)])

    @stateful.rule(node=st.sampled_from(NODES))
    def report_now(self, node):
        """A report taken and written at once."""
        usage.apply_reports([self._report(node, self.runs[node])])
        for uuid in self.gone_since[node]:
            self.gone_since[node][uuid] += 1

    @stateful.precondition(lambda self: any(self.runs.values()))
    @stateful.rule(data=st.data(), told=st.sampled_from(
        ['now', 'later', 'never']))
    def terminate(self, data, told):
        """The compute deletes an instance; its delete_instance_info
        reaches the inventory now, later or never."""
        node = data.draw(st.sampled_from(
            [n for n in NODES if self.runs[n]]))
        uuid = data.draw(st.sampled_from(sorted(self.runs[node])))
        del self.runs[node][uuid]
        self.gone_since[node][uuid] = 0
        if told == 'now':
            usage.release([uuid], host=node)
        elif told == 'later':
            self.undelivered.append((node, uuid))

    @stateful.precondition(lambda self: self.undelivered)
    @stateful.rule(data=st.data())
    def deliver_delete(self, data):
        index = data.draw(st.integers(0, len(self.undelivered) - 1))
        node, uuid = self.undelivered.pop(index)
        usage.release([uuid], host=node)

    @stateful.rule(node=st.sampled_from(NODES))
    def sync(self, node):
        usage.sync_host(node, sorted(self.runs[node]))

    @stateful.precondition(lambda self: self.unsent)
    @stateful.rule(data=st.data())
    def sync_taken_earlier(self, data):
        """A compute's list of its instances, taken with a report not
        written yet, served now (a slower worker)."""
        node, _at, runs = data.draw(st.sampled_from(self.unsent))
        usage.sync_host(node, sorted(runs))

    @stateful.rule()
    def expire(self):
        """Claims never built (pending, ``claimed``) expire."""
        pending = [p['instance_uuid'] for p in usage.pending_claims()]
        for placement in usage.expire(
                pending, datetime.datetime.utcnow()
                + datetime.timedelta(days=1)):
            # The compute may still get run_instance: it builds it,
            # and its reports count it.
            assert placement['status'] in ('claimed', 'resize_claimed')
            self.expired.add(placement['instance_uuid'])

    # -- invariants -------------------------------------------------------

    @stateful.invariant()
    def usage_matches_the_placements(self):
        with engine.get_engine().connect() as conn:
            rows = {(r.host, r.nodename): r for r in conn.execute(
                sa.select(models.NodeUsage.__table__))}
            placements = list(conn.execute(
                sa.select(models.Instance.__table__)))
        for key, row in rows.items():
            mine = [p for p in placements
                    if (p.host, p.nodename) == key]
            pending = [p for p in mine if p.pending]
            assert (row.claimed_memory_mb, row.claimed_vcpus,
                    row.claimed_instances) == (
                sum(p.memory_mb for p in pending),
                sum(p.vcpus for p in pending), len(pending)), key
            placed_mb = sum(p.memory_mb for p in mine)
            placed_vcpus = sum(p.vcpus for p in mine)
            assert (row.reported_memory_mb + row.claimed_memory_mb
                    >= placed_mb), (key, row, mine)
            assert (row.reported_vcpus + row.claimed_vcpus
                    >= placed_vcpus), (key, row, mine)
            assert placed_mb <= LIMIT_MB, (key, mine)
            assert placed_vcpus <= LIMIT_VCPU, (key, mine)
            assert not [p for p in mine
                        if p.status not in ('claimed', 'active',
                                            'unlisted', 'resize_claimed',
                                            'resize_active')]

    @stateful.invariant()
    def running_instances_keep_their_room(self):
        rows = {(r['host'], r['nodename']): r for r in usage.usage_get_all()}
        for node in NODES:
            runs = [size for uuid, size in self.runs[node].items()
                    if uuid not in self.expired]
            row = rows[(node, node)]
            assert (row['reported_memory_mb'] + row['claimed_memory_mb']
                    >= sum(m for m, _c in runs)), (node, row, runs)
            assert (row['reported_vcpus'] + row['claimed_vcpus']
                    >= sum(c for _m, c in runs)), (node, row, runs)

    @stateful.invariant()
    def deleted_instances_do_not_stay(self):
        """Two reports written after an instance stopped running on its
        node, and its placement there is gone (whatever became of its
        delete_instance_info), unless it was never confirmed nor
        listed: a claim, which expiry drops."""
        stale = [uuid for node in NODES
                 for uuid, reports in self.gone_since[node].items()
                 if reports >= 2]
        if not stale:
            return
        left = usage.placements_get(stale)
        assert not [u for u, p in left.items()
                    if u not in self.runs[p['host']]
                    and p['status'] not in ('claimed', 'resize_claimed')
                    ], left


def reset_tables() -> None:
    """Empty the inventory's claim tables (a fresh run of the machine)."""
    with engine.get_engine().begin() as conn:
        conn.execute(sa.delete(models.Instance.__table__))
        conn.execute(sa.delete(models.NodeUsage.__table__))
