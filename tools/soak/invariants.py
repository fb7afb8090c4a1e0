"""What must hold whatever fails: checked on inventory samples and at the end.

The checker judges evidence, it gathers none: the inventory snapshots
(``read_snapshot``), what callers were told and sent (``Call``,
``Cast``), what the simulated computes did (``Event``, from their
log), when faults were active (``Fault``) and the services' logs.
Each invariant keeps its violations, and ``results()`` turns them into
one line each: ``HELD`` or ``BROKEN`` with a few examples.

Timing slack is stated once, here: a placement the compute no longer
runs may outlive it by one report interval (``grace``), counted from
the end of any fault in between that holds the news back
(``HOLD_NEWS_BACK``), and a usage row may lag its placement rows for
as long.  Everything else is exact.
"""

import collections
import dataclasses
import re
import time

import sqlalchemy as sa

#: Examples kept per invariant.
EXAMPLES = 3

#: What a call may end with when no fault is active.
NORMAL_OUTCOMES = ('ok', 'NoValidHost')

#: Compute events that mean the instance no longer runs there.
GONE = ('terminated', 'refused')

#: Faults that keep a compute's news from the inventory: no bus, no
#: database, or a worker killed with a message in hand (the next report
#: makes up for it).  A SIGHUP reloads in place and a SIGTERM hands
#: back what the stopping service took, so neither delays the news.
HOLD_NEWS_BACK = ('broker', 'dbcut', 'kill9')

#: ERROR lines a fault the soak injects makes the libraries write:
#: fault kind -> (label, patterns of the normalised message).  Such a
#: line is counted apart, under its label, only when written while a
#: fault of that kind was active or within the checker's ``settle``
#: after it; the same line at any other time, any other ERROR line and
#: every traceback break the ``logs`` invariant.
EXPECTED_ERRORS = {
    'broker': ('expected: broker down', (
        # oslo.messaging's rabbit driver, each time it fails to
        # (re)connect; it retries on its own.
        re.compile(r'^\[\S+\] AMQP server on \S+ is unreachable: '),
        re.compile(r'^Connection failed: .*\(retrying in [N.]+ seconds\)'),
        # The scheduler's own word for a schedule_run_instance build
        # the broker routed to no compute: their queues are gone with
        # the broker until the computes reconnect.  The build is
        # refused visibly (the casts invariant counts it so); set apart
        # only within the fault's window, like the rest.
        re.compile(r'^Build of instance <uuid> lost: no compute took it '),
    )),
}


#: ERROR lines that name a build a fault lost, written only once its
#: claim expires: ``service_down_time`` after the claim, at a worker's
#: next periodic check (the checker's ``expiry_window``).  The broker
#: loses a ``run_instance`` cast it held in a compute's transient queue;
#: a worker killed between its claim and the cast never sends it.  Each
#: names its instance (the ``casts`` invariant counts it refused
#: visibly): fault kind -> (label, pattern of the normalised message).
CLAIM_EXPIRED = re.compile(r'^Claim of instance <uuid> on \S+ expired ')
LATE_ERRORS = {
    'broker': ('expected: build lost with the broker, its claim expired',
               CLAIM_EXPIRED),
    'kill9': ('expected: build lost with a killed worker, its claim '
              'expired', CLAIM_EXPIRED),
}
UNANSWERED = 'expected: claim of a call never answered, expired'


def clock(when: float) -> str:
    """Wall-clock time of day, to match examples with the logs."""
    return time.strftime('%H:%M:%S', time.localtime(when))


@dataclasses.dataclass(frozen=True)
class Capacity:
    """The most one node may hold: totals x ratios; real disk or None."""

    memory_mb: float
    vcpus: float
    disk_gb: float
    real_disk_gb: int | None = None


@dataclasses.dataclass
class Snapshot:
    """The inventory at one instant (one consistent read)."""

    at: float
    placements: list
    usage: list


@dataclasses.dataclass
class Call:
    """One ``select_destinations`` call as its caller saw it."""

    started: float
    ended: float
    timeout: float
    outcome: str
    detail: str = ''


@dataclasses.dataclass
class Cast:
    """One cast a caller sent: ``run_instance``, ``terminate_instance``
    or ``schedule_run_instance`` (one per instance); ``refused`` is the
    error the sender got, if any."""

    method: str
    uuid: str
    host: str | None
    sent: float
    refused: str | None = None


@dataclasses.dataclass
class Event:
    """What a simulated compute did with an instance (its log line):
    ``started``, ``refused``, ``terminated``, ``not_here`` (asked to
    terminate an instance it does not run)."""

    kind: str
    uuid: str
    host: str | None
    at: float


@dataclasses.dataclass
class Fault:
    kind: str
    target: str
    start: float
    end: float


@dataclasses.dataclass(frozen=True)
class LogLine:
    """One ERROR line or traceback (``kind``: ``ERROR``, ``traceback``)
    of a service log, with the time and normalised message of the
    record it belongs to (``at`` None when the file had no time yet)."""

    file: str
    at: float | None
    kind: str
    message: str
    #: The instance uuids the line names (its message has them blanked).
    uuids: tuple = ()


@dataclasses.dataclass
class Evidence:
    """Everything the soak knows besides the inventory."""

    #: uuid -> (host, node, when the caller was told)
    told: dict = dataclasses.field(default_factory=dict)
    calls: list = dataclasses.field(default_factory=list)
    casts: list = dataclasses.field(default_factory=list)
    events: list = dataclasses.field(default_factory=list)
    faults: list = dataclasses.field(default_factory=list)
    #: uuids a scheduler log names in a WARNING or ERROR line.
    logged_uuids: set = dataclasses.field(default_factory=set)
    #: uuids whose claim the caller gave back (build not delivered).
    released: set = dataclasses.field(default_factory=set)
    #: uuids of calls that ended without an answer (a timeout): a claim
    #: may have been made that the caller, never told, will not build.
    unanswered: set = dataclasses.field(default_factory=set)
    #: (service, exit code or None if it did not stop) at each SIGTERM.
    exits: list = dataclasses.field(default_factory=list)
    #: (service, worker pids before, after) at each SIGHUP.
    reloads: list = dataclasses.field(default_factory=list)
    #: The services' ERROR lines and tracebacks (``LogLine``).
    log_lines: list = dataclasses.field(default_factory=list)

    def by_uuid(self) -> dict:
        """uuid -> the compute events about it, oldest first."""
        out = collections.defaultdict(list)
        for event in sorted(self.events, key=lambda e: e.at):
            out[event.uuid].append(event)
        return out


def read_snapshot(engine: sa.Engine, at: float) -> Snapshot:
    """Placements and usage rows in one transaction, one snapshot:
    REPEATABLE READ, which is PostgreSQL's snapshot of the transaction
    (its default isolation would read each at its own instant) and
    InnoDB's consistent read from the first SELECT on."""
    conn_opts = {}
    if engine.dialect.name in ('postgresql', 'mysql'):
        conn_opts['isolation_level'] = 'REPEATABLE READ'
    with engine.connect().execution_options(**conn_opts) as conn:
        with conn.begin():
            placements = [dict(r._mapping) for r in conn.execute(sa.text(
                'SELECT instance_uuid, host, nodename, memory_mb, vcpus, '
                'disk_gb, status, pending FROM instances'))]
            usage = [dict(r._mapping) for r in conn.execute(sa.text(
                'SELECT * FROM node_usage'))]
    return Snapshot(at=at, placements=placements, usage=usage)


class _Violations:
    """One invariant's breaks: distinct keys, how often, a few examples."""

    def __init__(self):
        self.count = 0
        self.keys: set = set()
        self.examples: list = []
        #: One example per distinct key, for the soak's evidence file.
        self.every: list = []

    def add(self, key, example: str, times: int = 1) -> None:
        self.count += times
        if key not in self.keys:
            self.keys.add(key)
            self.every.append(example)
            if len(self.examples) < EXAMPLES:
                self.examples.append(example)


#: (name, what it says when held) in the order they are printed.
INVARIANTS = (
    ('capacity', 'no node over RAM, vCPU or disk (pending + active)'),
    ('real-disk', 'no node over its real disk (disk_available_least)'),
    ('usage-rows', 'usage rows equal their placement rows'),
    ('told', 'every success is in the inventory where the caller was told'),
    ('unique', 'no instance placed or started twice'),
    ('orphans', 'no placement outlives its instance by a report interval'),
    ('call-timeout', 'no call past its timeout + 1 s'),
    ('calls-no-fault', 'calls sent with no fault active: placed or '
                       'NoValidHost'),
    ('casts', 'every cast served or refused visibly'),
    ('clean-stop', 'services stop on SIGTERM with status 0'),
    ('reload', 'SIGHUP reloads in place (same worker processes)'),
    ('logs', 'no traceback in the service logs, no ERROR line but those '
             'an active fault explains'),
)


class Checker:
    """Holds every invariant's violations over the whole soak."""

    def __init__(self, capacities: dict, grace: float, settle: float = 0.0,
                 expiry_window: tuple = (0.0, 0.0)):
        """``grace``: one report interval; ``settle``: seconds after a
        fault ends during which it still counts as active for calls;
        ``expiry_window``: (earliest, latest) seconds after a fault at
        which the expiry of a claim it lost is logged (``LATE_ERRORS``)."""
        self.capacities = capacities
        self.grace = grace
        self.settle = settle
        self.expiry_window = expiry_window
        self.samples = 0
        self.broken = {name: _Violations() for name, _ in INVARIANTS}
        #: name -> what its line adds, held or broken (counts set apart).
        self.notes: dict = {}
        #: node -> when its usage row was first seen short.
        self._short_since: dict = {}
        #: uuid -> example: told a host, later missing from a sample with
        #: no compute event to explain it; judged at the end, once the
        #: service logs say which builds a fault lost (``finish``).
        self._unplaced: dict = {}
        #: Placements outliving their instance in the latest sample, and
        #: how many of those instances ended while a fault was active.
        self.orphans_now = 0
        self.orphans_now_in_fault = 0

    # -- helpers ------------------------------------------------------------

    def _faults_over(self, evidence: Evidence, start: float,
                     end: float, kinds: tuple | None = None) -> list:
        return [f for f in evidence.faults
                if f.start <= end and f.end + self.settle >= start
                and (kinds is None or f.kind in kinds)]

    def _quiet_since(self, evidence: Evidence, since: float,
                     now: float) -> float:
        """``since``, or the end of the last fault holding the news back
        over [since, now] if later."""
        ends = [f.end for f in self._faults_over(evidence, since, now,
                                                 HOLD_NEWS_BACK)]
        return max([since] + ends)

    # -- inventory samples --------------------------------------------------

    def sample(self, snap: Snapshot, evidence: Evidence) -> None:
        """Check one inventory snapshot against the evidence so far."""
        self.samples += 1
        per_node = collections.defaultdict(lambda: [0, 0, 0, 0, 0, 0, 0])
        for p in snap.placements:
            sums = per_node[(p['host'], p['nodename'])]
            sums[0] += p['memory_mb']
            sums[1] += p['vcpus']
            sums[2] += p['disk_gb']
            if p['pending']:
                sums[3] += p['memory_mb']
                sums[4] += p['vcpus']
                sums[5] += p['disk_gb']
                sums[6] += 1
        self._check_capacity(snap, per_node, self._ended(snap, evidence))
        self._check_usage(snap, per_node)
        self._check_told(snap, evidence)
        self._check_orphans(snap, evidence)

    @staticmethod
    def _ended(snap: Snapshot, evidence: Evidence) -> dict:
        """node -> [MB, vCPUs, GB] of its rows whose instance the compute
        has already terminated or refused: said in the examples, so
        that an over-full node of stale rows reads as such."""
        events = evidence.by_uuid()
        out = collections.defaultdict(lambda: [0, 0, 0])
        for p in snap.placements:
            seen = events.get(p['instance_uuid'])
            if seen and seen[-1].kind in GONE and seen[-1].at <= snap.at:
                sums = out[(p['host'], p['nodename'])]
                sums[0] += p['memory_mb']
                sums[1] += p['vcpus']
                sums[2] += p['disk_gb']
        return out

    def _check_capacity(self, snap: Snapshot, per_node: dict,
                        ended: dict) -> None:
        for key, sums in per_node.items():
            cap = self.capacities.get(key)
            if cap is None:
                continue
            stale = ended.get(key, (0, 0, 0))
            for i, what, limit in ((0, 'RAM', cap.memory_mb),
                                   (1, 'vCPU', cap.vcpus),
                                   (2, 'disk', cap.disk_gb)):
                if sums[i] > limit:
                    self.broken['capacity'].add(
                        (key, what), '%s %s %g > %g at %s (%g of it for '
                        'ended instances)' % (key[1], what, sums[i], limit,
                                              clock(snap.at), stale[i]))
            if cap.real_disk_gb is not None and sums[2] > cap.real_disk_gb:
                self.broken['real-disk'].add(
                    key, '%s %d GB placed on %d GB real at %s (%d GB for '
                    'ended instances)' % (key[1], sums[2], cap.real_disk_gb,
                                          clock(snap.at), stale[2]))

    def _check_usage(self, snap: Snapshot, per_node: dict) -> None:
        rows = {(r['host'], r['nodename']): r for r in snap.usage}
        short_now = set()
        for key in set(rows) | set(per_node):
            row = rows.get(key) or collections.defaultdict(int)
            sums = per_node.get(key, [0] * 7)
            claimed = (row['claimed_memory_mb'], row['claimed_vcpus'],
                       row['claimed_disk_gb'], row['claimed_instances'])
            if claimed != tuple(sums[3:7]):
                self.broken['usage-rows'].add(
                    (key, 'claimed'),
                    '%s claimed %s != pending rows %s' % (
                        key[1], claimed, tuple(sums[3:7])))
            counted = (row['reported_memory_mb'] + row['claimed_memory_mb'],
                       row['reported_vcpus'] + row['claimed_vcpus'],
                       row['reported_disk_gb'] + row['claimed_disk_gb'])
            if any(c < s for c, s in zip(counted, sums[0:3])):
                short_now.add(key)
                first = self._short_since.setdefault(key, snap.at)
                if snap.at - first > self.grace:
                    self.broken['usage-rows'].add(
                        (key, 'short'),
                        '%s usage %s below its placements %s for %.0f s '
                        'at %s' % (key[1], counted, tuple(sums[0:3]),
                                   snap.at - first, clock(snap.at)))
        for key in list(self._short_since):
            if key not in short_now:
                del self._short_since[key]

    def _check_told(self, snap: Snapshot, evidence: Evidence) -> None:
        where = {p['instance_uuid']: (p['host'], p['nodename'])
                 for p in snap.placements}
        events = evidence.by_uuid()
        for uuid, (host, node, when) in list(evidence.told.items()):
            if when > snap.at:
                continue
            placed = where.get(uuid)
            if placed is not None:
                if placed != (host, node):
                    self.broken['told'].add(
                        uuid, '%s told %s, inventory %s' % (uuid, host,
                                                            placed[0]))
                continue
            gone = any(e.kind in GONE for e in events.get(uuid, ()))
            if not gone and uuid not in evidence.released:
                self._unplaced.setdefault(
                    uuid, '%s told %s, not in the inventory' % (uuid, host))

    def _check_orphans(self, snap: Snapshot, evidence: Evidence) -> None:
        placed = {p['instance_uuid']: p for p in snap.placements}
        self.orphans_now = self.orphans_now_in_fault = 0
        for uuid, events in evidence.by_uuid().items():
            if uuid not in placed or not events:
                continue
            last = events[-1]
            if last.kind not in GONE or last.at > snap.at:
                continue
            quiet = self._quiet_since(evidence, last.at, snap.at)
            if snap.at - quiet > self.grace:
                self.orphans_now += 1
                if self._faults_over(evidence, last.at, last.at):
                    self.orphans_now_in_fault += 1
                self.broken['orphans'].add(
                    uuid, '%s %s on %s at %s, row still %s %.0f s later' % (
                        uuid, last.kind, last.host, clock(last.at),
                        placed[uuid]['status'], snap.at - last.at))

    # -- at the end ---------------------------------------------------------

    def finish(self, evidence: Evidence, drained_before: float) -> None:
        """The checks on the whole run; casts sent before
        ``drained_before`` must have been handled by now."""
        lost = self._named_lost(evidence)
        self._settle_told(lost)
        self._check_unique(evidence)
        self._check_calls(evidence)
        self._check_casts(evidence, drained_before, lost)
        for service, code in evidence.exits:
            if code != 0:
                self.broken['clean-stop'].add(
                    (service, len(self.broken['clean-stop'].keys)),
                    '%s exited %s on SIGTERM' % (
                        service, 'never' if code is None else code))
        for service, before, after in evidence.reloads:
            # A worker replaced meanwhile for another reason (one that
            # had died) adds a pid; a restart on SIGHUP removes them all.
            if set(before) - set(after):
                self.broken['reload'].add(
                    (service, len(self.broken['reload'].keys)),
                    '%s workers %s became %s' % (service, before, after))
        self._check_logs(evidence)

    def _expected(self, line: LogLine, evidence: Evidence) -> str | None:
        """The label of the active fault that explains an ERROR line."""
        if line.kind != 'ERROR' or line.at is None:
            return None
        if (CLAIM_EXPIRED.search(line.message)
                and evidence.unanswered.intersection(line.uuids)):
            # Expired whenever the faults after it let the service see
            # it: no time window, the call's own uuids.
            return UNANSWERED
        earliest, latest = self.expiry_window
        for fault in evidence.faults:
            label, patterns = EXPECTED_ERRORS.get(fault.kind, (None, ()))
            if (fault.start <= line.at <= fault.end + self.settle
                    and any(p.search(line.message) for p in patterns)):
                return label
            label, pattern = LATE_ERRORS.get(fault.kind, (None, None))
            if (pattern is not None and fault.start + earliest <= line.at
                    <= fault.end + self.settle + latest
                    and pattern.search(line.message)):
                return label
        return None

    def _check_logs(self, evidence: Evidence) -> None:
        expected: collections.Counter = collections.Counter()
        unexplained = []
        for line in evidence.log_lines:
            label = self._expected(line, evidence)
            if label is None:
                unexplained.append(line)
            else:
                expected[label] += 1
        if expected:
            self.notes['logs'] = 'set apart: %s' % ', '.join(
                '%d ERROR lines %s' % (n, label)
                for label, n in sorted(expected.items()))
        if not unexplained:
            return
        tracebacks = sum(1 for x in unexplained if x.kind == 'traceback')
        broken = self.broken['logs']
        broken.add('total', '%d tracebacks and %d ERROR lines no fault '
                   'explains, in %d files' % (
                       tracebacks, len(unexplained) - tracebacks,
                       len({x.file for x in unexplained})),
                   times=len(unexplained))
        first: dict = {}
        records: collections.Counter = collections.Counter()
        for x in unexplained:
            records[x.message] += 1
            first.setdefault(x.message, x)
        for message, count in records.most_common(EXAMPLES - 1):
            x = first[message]
            broken.add(message, '%dx %r (first %s in %s)' % (
                count, message, clock(x.at) if x.at else 'untimed',
                x.file), times=0)

    def _check_unique(self, evidence: Evidence) -> None:
        for uuid, events in evidence.by_uuid().items():
            hosts = {e.host for e in events if e.kind == 'started'}
            told = evidence.told.get(uuid)
            if told is not None:
                hosts |= {told[0]}
            if len(hosts) > 1:
                self.broken['unique'].add(
                    uuid, '%s on %s' % (uuid, ', '.join(sorted(hosts))))

    def _check_calls(self, evidence: Evidence) -> None:
        for call in evidence.calls:
            took = call.ended - call.started
            if took > call.timeout + 1:
                self.broken['call-timeout'].add(
                    id(call), '%.2f s for a %g s timeout (%s, sent %s)' % (
                        took, call.timeout, call.outcome,
                        clock(call.started)))
            if call.outcome in NORMAL_OUTCOMES:
                continue
            if not self._faults_over(evidence, call.started, call.ended):
                before = [f for f in evidence.faults
                          if f.end <= call.started]
                last = max(before, key=lambda f: f.end) if before else None
                self.broken['calls-no-fault'].add(
                    id(call), '%s after %.1f s, sent %s%s: %s' % (
                        call.outcome, took, clock(call.started),
                        ' (%.0f s after a %s ended)' % (
                            call.started - last.end, last.kind)
                        if last else '', call.detail[:120]))

    def _named_lost(self, evidence: Evidence) -> set:
        """Instances whose claim expired with the ERROR line a fault
        explains (``LATE_ERRORS``): builds that fault lost, which the
        service named."""
        labels = {label for label, _pattern in LATE_ERRORS.values()}
        return {uuid for line in evidence.log_lines
                if self._expected(line, evidence) in labels
                for uuid in line.uuids}

    def _settle_told(self, lost: set) -> None:
        """Told a host, missing from the inventory: set apart only when
        the service named the build lost with a fault (``lost``)."""
        apart = 0
        for uuid, example in self._unplaced.items():
            if uuid in lost:
                apart += 1
            else:
                self.broken['told'].add(uuid, example)
        if apart:
            self.notes['told'] = ('set apart: %d build lost with a fault, '
                                  'named when its claim expired' % apart
                                  if apart == 1 else
                                  'set apart: %d builds lost with a fault, '
                                  'named when their claims expired' % apart)

    def _check_casts(self, evidence: Evidence, drained_before: float,
                     lost: set = frozenset()) -> None:
        """Every cast served, refused to its sender, or named lost by the
        service (``lost``).  A ``terminate_instance`` sent while the
        broker was stopping is set apart when it never arrived: the
        broker drops a compute's transient queue with what it holds, and
        no scheduler is on that path to see it (doc/admin-guide.md,
        "Transient queues")."""
        events = evidence.by_uuid()
        into_stop = named = 0
        for cast in evidence.casts:
            if cast.refused or cast.sent > drained_before:
                continue
            after = [e for e in events.get(cast.uuid, ())
                     if e.at >= cast.sent - 1]
            if cast.method == 'terminate_instance':
                served = any(e.kind in ('terminated', 'not_here')
                             for e in after)
            else:
                served = any(e.kind in ('started', 'refused')
                             for e in after)
                if cast.method == 'schedule_run_instance':
                    served = served or cast.uuid in evidence.logged_uuids
                elif not served and cast.uuid in lost:
                    named += 1
                    continue
            if (not served and cast.method == 'terminate_instance'
                    and self._faults_over(evidence, cast.sent, cast.sent,
                                          ('broker',))):
                into_stop += 1
                continue
            if not served:
                self.broken['casts'].add(
                    (cast.method, cast.uuid),
                    '%s %s%s sent %s lost' % (
                        cast.method, cast.uuid,
                        ' to %s' % cast.host if cast.host else '',
                        clock(cast.sent)))
        apart = []
        if into_stop:
            apart.append('%d terminate cast(s) sent into a broker stop, '
                         'lost with a transient queue' % into_stop)
        if named:
            apart.append('%d run_instance cast(s) lost with a fault, named '
                         'when the claim expired' % named)
        if apart:
            self.notes['casts'] = 'set apart: %s' % '; '.join(apart)

    # -- the verdict --------------------------------------------------------

    def write_violations(self, path: str) -> None:
        """Every distinct violation (the printed lines show a few)."""
        with open(path, 'w') as f:
            for name, _statement in INVARIANTS:
                for example in self.broken[name].every:
                    f.write('%s\t%s\n' % (name, example))

    def results(self) -> list:
        """``[(name, held, line)]`` in the order of ``INVARIANTS``."""
        out = []
        for name, statement in INVARIANTS:
            broken = self.broken[name]
            note = ' (%s)' % self.notes[name] if name in self.notes else ''
            if not broken.count:
                out.append((name, True, 'HELD   %-15s %s%s' % (
                    name, statement, note)))
                continue
            out.append((name, False, 'BROKEN %-15s %s: %d violation(s), '
                        '%d distinct; e.g. %s%s' % (
                            name, statement, broken.count,
                            len(broken.keys), '; '.join(broken.examples),
                            note)))
        return out
