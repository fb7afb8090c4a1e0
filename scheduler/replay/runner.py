"""One configuration's replay: the trace, in order, on a copy of the fleet.

The configured driver (the filter scheduler, its filters, weighers and
``host_subset_size``) runs with a real ``HostManager`` and real claims,
on an inventory of its own (a SQLite file in a temporary directory on a
memory-backed file system where there is one), with no bus.  Each
request of the trace is placed with the instance uuids it had; each
release frees the instance where this replay put it (or, for an
instance already in the snapshot, as its compute would report it
gone).  Nothing of the live inventory is read or written.
"""

import atexit
import contextlib
import dataclasses
import os
import random
import shutil
import sys
import tempfile
import time
import typing

from oslo_config import cfg
from oslo_utils import timeutils

from scheduler import context as ctx_mod
from scheduler import exception
from scheduler import filters
from scheduler.replay import limits
from scheduler.replay import metrics as replay_metrics
from scheduler.replay import trace as trace_mod

CONF = cfg.CONF

#: Service options a replay always overrides: its own inventory, no
#: host ageing out while a long trace runs, no recording of itself.
_OVERRIDES = (('service_down_time', 10 ** 7, 'scheduler'),
              ('enabled', False, 'trace'))

#: Hosts listed per explained request (rejected and ranked, each).
EXPLAIN_HOSTS = 8
#: Points of the timeline the plots draw.
TIMELINE_POINTS = 120


@dataclasses.dataclass
class Progress:
    """Prints ``label: done/total`` to a stream now and then."""

    label: str
    total: int
    stream: typing.TextIO | None = sys.stderr
    every: float = 2.0
    _started: float = dataclasses.field(default_factory=time.monotonic)
    _last: float = 0.0

    def __call__(self, done: int, force: bool = False) -> None:
        if self.stream is None:
            return
        now = time.monotonic()
        if not force and now - self._last < self.every:
            return
        self._last = now
        elapsed = now - self._started
        rate = done / elapsed if elapsed > 0 else 0.0
        left = (self.total - done) / rate if rate > 0 else 0.0
        self.stream.write('%s: %d/%d events (%d%%), %.0f/s, %s left\n' % (
            self.label, done, self.total,
            100 * done // max(1, self.total), rate,
            _duration(left) if done < self.total else 'none'))
        self.stream.flush()


def _duration(seconds: float) -> str:
    if seconds >= 60:
        return '%dm%02ds' % (seconds // 60, seconds % 60)
    return '%ds' % seconds


#: An empty inventory with the schema, made once per process and copied
#: for each replay (the migrations take longer than a small replay).
_EMPTY_INVENTORY: str | None = None


def _empty_inventory(where: str | None) -> str:
    global _EMPTY_INVENTORY
    if _EMPTY_INVENTORY is None or not os.path.exists(_EMPTY_INVENTORY):
        from scheduler.db import api as db_api
        from scheduler.db import migration
        tmp = tempfile.mkdtemp(prefix='scheduler-replay-schema-', dir=where)
        atexit.register(shutil.rmtree, tmp, ignore_errors=True)
        path = os.path.join(tmp, 'empty.sqlite')
        db_api.reset_engine()
        with overridden('connection', 'sqlite:///%s' % path, 'database'):
            try:
                migration.db_sync()
            finally:
                db_api.reset_engine()
        _EMPTY_INVENTORY = path
    return _EMPTY_INVENTORY


@contextlib.contextmanager
def private_inventory():
    """A fresh, empty inventory of this process's own, removed after."""
    from scheduler.db import api as db_api
    where = '/dev/shm' if os.path.isdir('/dev/shm') else None
    empty = _empty_inventory(where)
    tmp = tempfile.mkdtemp(prefix='scheduler-replay-', dir=where)
    path = os.path.join(tmp, 'inventory.sqlite')
    shutil.copyfile(empty, path)
    db_api.reset_engine()
    try:
        with overridden('connection', 'sqlite:///%s' % path, 'database'):
            try:
                yield tmp
            finally:
                db_api.reset_engine()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def overridden(name: str, value, group: str):
    """``[group] name`` set to ``value`` for a while, then set back to
    the value it had (whether a file, a default or an override gave it).
    """
    before = getattr(getattr(CONF, group), name)
    CONF.set_override(name, value, group=group)
    try:
        yield
    finally:
        CONF.set_override(name, before, group=group)


@contextlib.contextmanager
def configured(path: str | None):
    """``CONF`` read from ``path`` alone (None: as it is), with the
    replay's overrides, for the time of one replay."""
    if path is not None:
        from scheduler import config
        config.parse_args(['--config-file', path], default_config_files=[],
                          setup_logging=False, prog='scheduler-manage',
                          command_line_tool=True)
    with contextlib.ExitStack() as stack:
        for name, value, group in _OVERRIDES:
            stack.enter_context(overridden(name, value, group))
        yield


class Replay:
    """The simulated cloud of one replay: scheduler, inventory, computes."""

    def __init__(self, fleet):
        from scheduler import host_manager
        from scheduler import loader
        self.fleet = fleet
        self.manager = host_manager.HostManager()
        self.manager.update_aggregates(list(fleet.aggregates))
        now = timeutils.utcnow(with_timezone=True)
        #: key -> the compute's current report (changed by releases of
        #: the snapshot's instances).
        self.reports = {}
        for report in fleet.reports:
            report = report.obj_clone()
            report.updated_at = now
            self.reports[report.key()] = report
            self.manager.update_from_report(report)
        self.manager.flush()
        cls = loader.load_class(loader.DRIVER_NAMESPACE,
                                CONF.scheduler.driver)
        self.driver = cls(host_manager=self.manager)
        self.context = ctx_mod.get_admin_context()
        #: uuid -> (host, nodename, memory_mb, vcpus, disk_gb) of every
        #: instance on the fleet now.
        self.instances = dict(fleet.instances)
        #: Instances this replay placed (their claims are pending).
        self.placed_here: set = set()

    def place(self, spec, uuids: list, report) -> list:
        """The first choices ``[(host, nodename)]``; NoValidHost raised."""
        from scheduler.resources import compute
        chosen = self.driver.select_destinations(
            self.context, spec, uuids, return_alternates=False,
            **({'report': report} if trace_mod._takes_report(self.driver)
               else {}))
        sizes = compute.resources_of(spec)
        hosts = []
        for uuid, alts in zip(uuids or [None] * len(chosen), chosen):
            first = alts[0]
            hosts.append((first.service_host, first.nodename))
            if uuid:
                self.instances[uuid] = (first.service_host,
                                        first.nodename) + tuple(sizes)
                self.placed_here.add(uuid)
        return hosts

    def release(self, uuid: str) -> bool:
        """Free ``uuid`` where it is in this replay; False if unknown."""
        where = self.instances.pop(uuid, None)
        if where is None:
            return False
        host, nodename, mb, vcpus, gb = where
        if uuid in self.placed_here:
            self.placed_here.discard(uuid)
            self.manager.delete_instance_info(host, uuid)
            return True
        # An instance of the snapshot: its compute reports it gone.
        report = self.reports.get((host, nodename))
        if report is None:
            return False
        report = report.obj_clone()
        report.apply_claim(mb, vcpus, gb, uuid, sign=-1)
        report.updated_at = timeutils.utcnow(with_timezone=True)
        self.reports[(host, nodename)] = report
        self.manager.update_from_report(report)
        self.manager.flush()
        return True

    def explain(self, spec) -> dict:
        """The driver's explain, cut to ``EXPLAIN_HOSTS`` hosts a list."""
        try:
            result = self.driver.explain(self.context, spec,
                                         max_ranked=EXPLAIN_HOSTS)
        except TypeError:
            result = self.driver.explain(self.context, spec)
        except exception.SchedulerException as e:
            return {'error': str(e)}
        rejected = result.get('rejected') or {}
        shown = sorted(rejected.items())[:EXPLAIN_HOSTS]
        return {
            'candidates': result.get('candidates'),
            'passed': result.get('passed'),
            'forced': result.get('forced'),
            'filters': result.get('filters', []),
            'rejected': [{'host': h, 'filter': r['filter'],
                          'reason': r['reason']} for h, r in shown],
            'rejected_total': len(rejected),
            # Per weigher: [raw, normalized, multiplier, contribution],
            # weighers with a zero multiplier left out (they add nothing).
            'ranking': [{'host': r['host'], 'weight': _round(r['weight']),
                         'weighers': {name: [_round(w['raw']),
                                             _round(w['normalized']),
                                             _round(w['multiplier']),
                                             _round(w['contribution'])]
                                      for name, w in r['weighers'].items()
                                      if w['multiplier']}}
                        for r in (result.get('ranking') or [])
                        [:EXPLAIN_HOSTS]],
        }


def _round(value):
    if isinstance(value, float):
        return round(value, 4)
    return value


def run(fleet, events: list, config_path: str | None, name: str,
        seed: int = 0, explained: int = limits.DEFAULT_EXPLAINED,
        progress: typing.TextIO | None = sys.stderr) -> dict:
    """Replay ``events`` under one configuration; its results.

    Returns ``{'summary': ..., 'requests': [per request], 'timeline':
    [...]}`` (``scheduler.replay.metrics`` computes the figures).
    """
    with configured(config_path), private_inventory():
        random.seed(seed)
        sim = Replay(fleet)
        requests = sum(1 for e in events if e['kind'] == 'request')
        every = max(1, requests // explained) if explained else 0
        common = replay_metrics.most_common_flavor(events)
        tally = replay_metrics.Tally(sim, common)
        step = max(1, len(events) // TIMELINE_POINTS)
        show = Progress('replay %s' % name, len(events), progress)
        index = refused_explained = 0
        tally.sample(0, 0)
        for number, event in enumerate(events, 1):
            if event['kind'] == 'release':
                tally.released(sim.release(event['instance_uuid']))
            else:
                spec = trace_mod.spec_of(event)
                uuids = list(event.get('instance_uuids') or [])
                detail = None
                if every and index % every == 0:
                    detail = sim.explain(spec)
                report = filters.FilterReport()
                started = time.perf_counter()
                cpu = time.thread_time()
                try:
                    hosts = sim.place(spec, uuids, report)
                    error = None
                except exception.NoValidHost as e:
                    hosts, error = None, e
                seconds = time.perf_counter() - started
                cpu = time.thread_time() - cpu
                if (error is not None and detail is None
                        and refused_explained < limits.MAX_EXPLAINED_REFUSALS):
                    refused_explained += 1
                    # Nothing was claimed: the state is the one refused.
                    detail = sim.explain(spec)
                tally.request(index, event, spec, hosts, report, seconds,
                              cpu, detail)
                index += 1
            if number % step == 0:
                tally.sample(number, index)
            show(number)
        tally.sample(len(events), index)
        show(len(events), force=True)
        return tally.result(name)
