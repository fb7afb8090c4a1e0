#!/usr/bin/env python3
"""nova 34's filter-and-weigh beside ours, on the same fleet, in one run.

    tox -e bench-nova                                   # 1,000 and 10,000
    tox -e bench-nova -- --hosts 1000 --json /tmp/nova.json
    python tools/bench/bench_nova.py --nova-venv .tox/nova34 --hosts 1000

Not part of the test suite.  nova 34.0.0 is installed from PyPI into a
virtualenv of its own (``--nova-venv``, by default ``.tox/nova34``;
created and filled with ``pip install nova==34.0.0`` on first use):
nova and this project both register options such as
``[filter_scheduler] enabled_filters`` on oslo.config's global
``CONF``, so nova runs in a child process of that virtualenv
(``nova_worker.py``) and ours in this one.

For each fleet size (``--hosts``, default 1,000 and 10,000) the fleet
of ``bench_select.make_fleet`` is loaded into our filter scheduler
(``bench_select.inprocess_driver``) and the very host records our host
manager then holds, with its aggregates, are written to a temporary
JSON file from which the worker builds nova ``HostState`` objects with
nova's own ``HostState.update`` (a ``ComputeNode``, a service record,
the aggregates with their availability zones).  Requests are
``bench_select.make_spec(i, k)`` for k = 1 and 10 (``--instances``),
each translated to a nova ``RequestSpec`` with
``RequestSpec.from_components``.  Three things are timed, interleaved
in blocks of ``--block`` requests (the order rotating each block) so
that the machine's load weighs on all of them alike:

* nova: for each instance ``SchedulerManager._get_sorted_hosts``
  (nova's default ``enabled_filters`` through ``HostFilterHandler``,
  every weigher through ``HostWeightHandler``), then
  ``_consume_selected_host`` on the chosen host, as nova's scheduler
  does when it places several instances;
* ours, filter-and-weigh only: for each instance the driver's
  ``filter_and_weigh`` over ``column_candidates`` (or the per-host
  candidates with ``--columnar off``), then the chosen host's usage
  taken on a copy for the next instance; no claim, like nova's side;
* ours, whole: ``FilterScheduler.select_destinations`` with claims in
  the in-memory SQLite inventory (``bench_select.time_inprocess``).

Each fleet size and k gets ``--requests`` requests (100), or fewer when
``--budget`` seconds (120) have passed and ``--min-requests`` (10) ran:
at 10,000 hosts one nova request of 10 instances takes seconds.  The
table gives median and p95 ms and nova's median over ours.  nova 34
has no availability-zone or RAM/disk/vCPU host filter: placement
answers those before nova's filters run.  So with ``--nova-candidates
placement`` (the default) nova's filters start from the hosts
placement would return (the requested zone, with room for the flavor;
at most ``--max-placement-results``, nova's own default being 1000,
when that is not 0), computed outside the timing; ours start from every
host and do the zone and resource checks themselves.  With ``all``
nova's filters get every host (and ignore the zone).  Not timed on
either side: placement's call and nova's per-request reload of its
hosts from the database; our usage refresh; nova's extra
filter-and-weigh pass for alternates when k > 1.  The generated fleet
has no NUMA topology, PCI pools or metrics, and none are translated.

Before timing, a sanity check per fleet: nova's filter walk for the
first request (hosts kept by each filter), a probe with an image for
an architecture no host has (nova's and our filters must then pass no
host), and during the run every chosen host of both sides is checked to
be in the requested zone.  ``--json PATH`` writes every figure
(``rows``, and ``curves`` with the per-size medians for a plot).

The plot (``plot_latency.py``, ``tox -e benchplot``) uses the mixed
workload instead of ``make_spec``: ``load_mixed`` hands nova the fleet
of ``bench_mixed`` with the equivalent of its filters
(``nova_filters``), ``nova_mixed`` sends it the same requests
``bench_mixed`` draws, server groups and boots from volume included
(``spec_record``), and nova's hosts keep what it placed.
``MIXED_TRANSLATION`` says what reaches nova and how.
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import bench_select  # noqa: E402

from oslo_config import cfg  # noqa: E402

from scheduler import columns  # noqa: E402
from scheduler import filters  # noqa: E402
from scheduler import request_limits  # noqa: E402

CONF = cfg.CONF
REPO = os.path.dirname(os.path.dirname(HERE))
NOVA_VERSION = '34.0.0'
WORKER = os.path.join(HERE, 'nova_worker.py')


def ensure_nova_venv(venv: str) -> str:
    """The python of a virtualenv holding nova ``NOVA_VERSION``; the
    virtualenv is created and nova installed when missing."""
    python = os.path.join(venv, 'bin', 'python')
    if not os.path.exists(python):
        print('creating %s for nova %s' % (venv, NOVA_VERSION),
              file=sys.stderr, flush=True)
        subprocess.check_call([sys.executable, '-m', 'venv', venv])
    found = subprocess.run(
        [python, '-c', 'from importlib import metadata; '
         'print(metadata.version("nova"))'],
        capture_output=True, text=True).stdout.strip()
    if found != NOVA_VERSION:
        print('installing nova==%s into %s (a few minutes)'
              % (NOVA_VERSION, venv), file=sys.stderr, flush=True)
        subprocess.check_call([python, '-m', 'pip', 'install', '--quiet',
                               'nova==%s' % NOVA_VERSION])
    return python


class NovaWorker:
    """``nova_worker.py`` in nova's virtualenv, one JSON line each way."""

    def __init__(self, python: str, candidates: str):
        #: Which hosts nova's filters start from (see the docstring).
        self.candidates = candidates
        self.proc = subprocess.Popen(
            [python, WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            text=True, bufsize=1)

    def call(self, **msg) -> dict:
        self.proc.stdin.write(json.dumps(msg) + '\n')
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit('the nova worker stopped (exit code %s)'
                             % self.proc.wait())
        answer = json.loads(line)
        if 'error' in answer and msg['op'] != 'select':
            raise SystemExit('nova worker: %s\n%s'
                             % (answer['error'], answer.get('trace', '')))
        return answer

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.write(json.dumps({'op': 'quit'}) + '\n')
            self.proc.stdin.close()
            self.proc.wait(60)


def host_record(view) -> dict:
    """What nova's ComputeNode and service record need of one host."""
    if view.numa_topology is not None or view.pci_pools or view.metrics:
        raise SystemExit('%s has NUMA, PCI or metrics: not translated to '
                         'nova' % view.host)
    return {
        'host': view.host, 'nodename': view.nodename, 'uuid': view.uuid,
        'memory_mb': view.memory_mb, 'memory_mb_used': view.memory_mb_used,
        'local_gb': view.local_gb, 'local_gb_used': view.local_gb_used,
        'disk_available_least': view.disk_available_least,
        'vcpus': view.vcpus, 'vcpus_used': view.vcpus_used,
        'cpu_allocation_ratio': view.cpu_allocation_ratio,
        'ram_allocation_ratio': view.ram_allocation_ratio,
        'disk_allocation_ratio': view.disk_allocation_ratio,
        'hypervisor_type': view.hypervisor_type,
        'hypervisor_version': view.hypervisor_version,
        'host_ip': None if view.host_ip is None else str(view.host_ip),
        'cpu_info': dict(view.cpu_info),
        'supported_instances': [list(s) for s in view.supported_instances],
        'num_instances': view.num_instances, 'num_io_ops': view.num_io_ops,
        'failed_builds': view.failed_builds, 'stats': dict(view.stats),
        'disabled': view.disabled, 'disabled_reason': view.disabled_reason,
        'forced_down': view.forced_down,
        'updated_at': view.updated_at.isoformat(),
        'zones': sorted(view.availability_zones)}


def write_fleet(driver, path: str) -> dict:
    """The hosts our host manager holds, as JSON for the worker; the
    zones of each host name."""
    views = driver.host_manager.get_all_host_states()
    data = {'hosts': [host_record(v) for v in views],
            # A fleet file's aggregates have no database id nor uuid;
            # nova's Aggregate needs both.
            'aggregates': [{'id': a.obj_get('id') or n + 1,
                            'uuid': a.obj_get('uuid') or str(uuid.uuid5(
                                uuid.NAMESPACE_DNS, 'aggregate-%s' % a.name)),
                            'name': a.name, 'hosts': list(a.hosts),
                            'metadata': dict(a.metadata)}
                           for n, a in enumerate(
                               driver.host_manager.aggregates())]}
    with open(path, 'w') as f:
        json.dump(data, f)
    return {v.host: set(v.availability_zones) for v in views}


def spec_record(spec_obj, uuids: list) -> dict:
    """Our RequestSpec as the fields nova's ``from_components`` takes.

    A server group goes as nova's ``InstanceGroup`` fields (policy,
    members, the hosts its members are on), a boot from volume as
    ``is_bfv`` with no image (``image_properties`` None)."""
    flavor = spec_obj.flavor
    image = spec_obj.obj_get('image')
    group = spec_obj.obj_get('instance_group')
    return {
        'instance_group': None if group is None else {
            'uuid': group.uuid, 'name': group.obj_get('name'),
            'policy': group.policy,
            'members': list(group.obj_get('members') or []),
            'hosts': list(group.obj_get('hosts') or [])},
        'is_bfv': bool(spec_obj.obj_get('is_bfv')),
        'uuid': uuids[0], 'num_instances': spec_obj.num_instances,
        'memory_mb': flavor.memory_mb, 'vcpus': flavor.vcpus,
        'root_gb': flavor.root_gb,
        'ephemeral_gb': flavor.obj_get('ephemeral_gb') or 0,
        'swap': flavor.obj_get('swap') or 0,
        'extra_specs': dict(flavor.obj_get('extra_specs') or {}),
        'image_properties': dict(image.obj_get('properties') or {})
        if image is not None else None,
        'availability_zone': spec_obj.obj_get('availability_zone'),
        'project_id': spec_obj.obj_get('project_id'),
        'user_id': spec_obj.obj_get('user_id'),
        'ignore_hosts': spec_obj.obj_get('ignore_hosts'),
        'force_hosts': spec_obj.obj_get('force_hosts'),
        'force_nodes': spec_obj.obj_get('force_nodes'),
        'scheduler_hints': spec_obj.obj_get('scheduler_hints')}


def _consumed(view, spec_obj):
    fresh = view.copy()
    fresh.consume_from_request(spec_obj)
    return fresh


def ours_filter_and_weigh(driver, spec_obj, uuids: list) -> dict:
    """Our filter-and-weigh for each instance, the chosen host's usage
    taken on a copy in between (no claim); timed like nova's side."""
    report = filters.FilterReport()
    chosen, passed = [], None
    with request_limits.scope():
        t0 = time.perf_counter()
        hosts = driver.column_candidates(spec_obj, report)
        if hosts is None:
            hosts = driver.candidate_hosts(spec_obj)
        for index, instance_uuid in enumerate(uuids):
            spec_obj.instance_uuid = instance_uuid
            weighed = driver.filter_and_weigh(spec_obj, hosts, index, report)
            if passed is None:
                passed = len(weighed)
            if not weighed:
                break
            best = weighed[0].obj
            key = best.key()
            if isinstance(weighed, columns.Ranked):
                hosts = weighed.after_claim(
                    key, lambda view: _consumed(view, spec_obj))
            else:
                hosts = [_consumed(w.obj, spec_obj) if w.obj.key() == key
                         else w.obj for w in weighed]
            chosen.append(best.host)
        seconds = time.perf_counter() - t0
    return {'seconds': seconds, 'passed': passed or 0, 'chosen': chosen}


def _uuids(k: int) -> list:
    return [str(uuid.uuid4()) for _ in range(k)]


def nova_select(worker, spec_obj, uuids: list) -> dict:
    return worker.call(op='select', spec=spec_record(spec_obj, uuids),
                       uuids=uuids)


def sanity(worker, driver, zones: dict, columnar: bool) -> None:
    """Show that nova's filters and weighers really run, and ours."""
    CONF.set_override('columnar', columnar, group='filter_scheduler')
    spec = bench_select.make_spec(0, 1)
    uuids = _uuids(1)
    walk = worker.call(op='walk', spec=spec_record(spec, uuids))['steps']
    print('  sanity, nova filter walk for request 0 (zone %s): %s'
          % (spec.availability_zone,
             ', '.join('%s %d->%d' % tuple(s) for s in walk)))
    nova = nova_select(worker, spec, uuids)
    ours = ours_filter_and_weigh(driver, spec, uuids)
    wrong = []
    for name, got in (('nova', nova), ('ours', ours)):
        host = got['chosen'][0] if got['chosen'] else None
        print('  sanity, %s: %d host(s) passed the filters, chose %s in %s'
              % (name, got['passed'], host,
                 ', '.join(sorted(zones.get(host, ()))) or '-'))
        if spec.availability_zone not in zones.get(host, ()):
            wrong.append(name)
    print('  sanity, the same host on both sides (before any claim): %s'
          % ('yes' if nova['chosen'] == ours['chosen'] else 'no'))
    if wrong and (wrong != ['nova'] or
                  worker.candidates == 'placement'):
        raise SystemExit('sanity check failed: %s chose a host outside '
                         'the requested zone' % ' and '.join(wrong))
    probe = bench_select.make_spec(0, 1)
    probe.image.properties = {'hw_architecture': 'aarch64'}
    nova = nova_select(worker, probe, uuids)
    ours = ours_filter_and_weigh(driver, probe, uuids)
    print('  sanity, an aarch64 image (no such host): nova passed %d, '
          'ours passed %d' % (nova['passed'], ours['passed']))
    if nova['passed'] or ours['passed'] or not walk:
        raise SystemExit('sanity check failed: the filters do not run')


#: How the mixed workload's requests reach nova (for the figures' notes).
MIXED_TRANSLATION = (
    'zones and room for the flavor (our AvailabilityZone, Ram, Disk and '
    'VCPU filters): nova 34 has no such filters, placement answers them; '
    'the worker hands nova\'s filters the hosts placement would return, '
    'worked out untimed, and the placement call is not timed',
    'server groups (every policy), different_host and same_host hints, '
    'aggregate extra specs, image properties: taken by nova\'s own '
    'filters (ServerGroup(Anti)Affinity, DifferentHost, SameHost, '
    'AggregateInstanceExtraSpecs, ImageProperties) and weighers (soft '
    'affinity); they name nova\'s own earlier placements',
    'boot from volume: is_bfv, no image, no root disk asked of placement',
    'claims: ours are in the timed figure (a SQLite file); nova\'s '
    'allocation in placement is not; nova\'s reload of its hosts from '
    'the database for each request is not timed either',
    'host reports: ours takes them between requests (untimed), nova\'s '
    'hosts change only by its own placements',
    'the edge aggregate\'s max_instances_per_host: neither side runs '
    'a filter reading it')

#: Filters of the mixed workload that nova 34 no longer has: placement
#: answers them (the requested zone, room for the flavor) before nova's
#: filters run, which the worker's placement answer stands for.
PLACEMENT_ANSWERS = ('AvailabilityZoneFilter', 'RamFilter', 'DiskFilter',
                     'VCPUFilter')


def nova_filters(ours: list) -> list:
    """nova's ``enabled_filters`` for our ``ours``: the same filters,
    less those placement answers in nova 34."""
    return [name for name in ours if name not in PLACEMENT_ANSWERS]


def load_mixed(worker, driver, filters_: list,
               max_placement_results: int = 0) -> tuple:
    """The hosts ``driver`` holds now, loaded into nova's worker with
    nova's equivalent of ``filters_``: ``(zones of each host, the
    worker's answer)``."""
    with tempfile.TemporaryDirectory(prefix='bench-nova-') as tmp:
        fleet = os.path.join(tmp, 'fleet.json')
        zones = write_fleet(driver, fleet)
        info = worker.call(op='load', fleet=fleet,
                           candidates=worker.candidates,
                           max_placement_results=max_placement_results,
                           filters=nova_filters(filters_))
    return zones, info


def nova_mixed(worker, zones: dict, mix, requests: int, budget: float,
               seed: int) -> dict:
    """nova's filter-and-weigh on the requests ``bench_mixed`` draws for
    k=1 with ``seed`` (the same flavors, images, zones, hints and server
    groups, the same instance uuids), the fleet keeping what nova placed.
    Server groups and hints refer to nova's own earlier placements.
    ``requests`` at most, for at most ``budget`` seconds; five untimed
    first, as ``bench_mixed`` does."""
    draws = mix.RequestMix(seed, instances=1).draws(requests + 5)
    # That nova's filters really run: how many hosts each kept for the
    # first request (on a state of its own, not to shift the groups).
    first = mix.MixState(seed).spec(draws[0], _uuids(1))
    walk = worker.call(op='walk', spec=spec_record(first, _uuids(1)))
    print('  nova filter walk, first request (%s, zone %s): %s'
          % (draws[0].flavor.name, draws[0].zone,
             ', '.join('%s %d->%d' % tuple(s) for s in walk['steps'])))
    state = mix.MixState(seed * 1000 + 1)
    samples, cpu, refused, outside = [], [], 0, 0
    start = time.perf_counter()
    for n, draw in enumerate(draws):
        if n >= 5 and time.perf_counter() - start > budget:
            break
        uuids = state.new_uuids(draw.instances)
        spec = state.spec(draw, uuids)
        got = worker.call(op='select', spec=spec_record(spec, uuids),
                          uuids=uuids, keep=True)
        if 'error' in got:
            raise SystemExit('nova worker: %s\n%s'
                             % (got['error'], got.get('trace', '')))
        if n < 5:
            start = time.perf_counter()
            continue
        samples.append(got['seconds'])
        cpu.append(got['cpu_seconds'])
        if len(got['chosen']) != len(uuids):
            refused += 1
            continue
        state.placed(draw, uuids, got['chosen'])
        if draw.zone and any(draw.zone not in zones[h]
                             for h in got['chosen']):
            outside += 1
    stats = _stats(samples)
    # The CPU time of the worker's thread: what a loaded machine does
    # not inflate, unlike the wall clock.
    stats.update(refused=refused, outside_zone=outside,
                 cpu_median=_stats(cpu)['median'])
    return stats


def _stats(samples: list) -> dict:
    ms = sorted(s * 1000 for s in samples)
    p95 = ms[min(len(ms) - 1, int(round(0.95 * len(ms))) - 1)]
    return {'n': len(ms), 'median': statistics.median(ms), 'p95': p95}


def measure(worker, driver, zones: dict, hosts: int, k: int, paths: list,
            args) -> list:
    """Interleaved samples of nova and of ours for ``k`` instances."""
    samples: dict = {'nova': []}
    for columnar in paths:
        samples['fw', columnar] = []
        samples['select', columnar] = []
    stray = {'nova': 0, 'ours': 0}
    given, passed = [], {'nova': [], 'ours': []}

    def check(side: str, chosen: list, spec_obj) -> None:
        zone = spec_obj.availability_zone
        # A request left short (no valid host) counts too.
        if len(chosen) != k or any(zone not in zones[h] for h in chosen):
            stray[side] += 1

    def run_nova(first: int, count: int) -> None:
        for i in range(first, first + count):
            spec = bench_select.make_spec(i, k)
            got = nova_select(worker, spec, _uuids(k))
            samples['nova'].append(got['seconds'])
            given.append(got['given'])
            passed['nova'].append(got['passed'])
            if args.nova_candidates == 'placement':
                check('nova', got['chosen'], spec)

    def run_fw(columnar: bool, first: int, count: int) -> None:
        CONF.set_override('columnar', columnar, group='filter_scheduler')
        for i in range(first, first + count):
            spec = bench_select.make_spec(i, k)
            got = ours_filter_and_weigh(driver, spec, _uuids(k))
            samples['fw', columnar].append(got['seconds'])
            passed['ours'].append(got['passed'])
            check('ours', got['chosen'], spec)

    def run_select(columnar: bool, first: int, count: int) -> None:
        got, _wall = bench_select.time_inprocess(driver, count, k, columnar)
        samples['select', columnar].extend(got)

    # One untimed request each: imports, caches and columns are warm.
    run_nova(0, 1)
    for columnar in paths:
        run_fw(columnar, 0, 1)
    for key in samples:
        del samples[key][:]
    del given[:], passed['nova'][:], passed['ours'][:]
    stray.update(nova=0, ours=0)
    tasks = [run_nova] + [
        (lambda first, count, c=c, f=f: f(c, first, count))
        for c in paths for f in (run_fw, run_select)]
    done, block_no, start = 0, 0, time.perf_counter()
    while done < args.requests and (
            done < args.min_requests
            or time.perf_counter() - start < args.budget):
        count = min(args.block, args.requests - done)
        shift = block_no % len(tasks)
        for task in tasks[shift:] + tasks[:shift]:
            task(done, count)
        done += count
        block_no += 1
    wall = time.perf_counter() - start
    rows = []
    nova = _stats(samples['nova'])
    for columnar in paths:
        fw = _stats(samples['fw', columnar])
        sel = _stats(samples['select', columnar])
        rows.append({
            'hosts': hosts, 'k': k,
            'path': 'columnar' if columnar else 'per host',
            'requests': done, 'wall_s': wall, 'nova': nova,
            'ours_filter_weigh': fw, 'ours_select': sel,
            'ratio_filter_weigh': nova['median'] / fw['median'],
            'ratio_select': nova['median'] / sel['median'],
            'nova_hosts_given': statistics.median(given),
            'nova_hosts_passed': statistics.median(passed['nova']),
            'ours_hosts_passed': statistics.median(passed['ours']),
            'outside_zone': dict(stray)})
    return rows


def print_rows(rows: list) -> None:
    for r in rows:
        head = '%d hosts, k=%d, %s, n=%d' % (r['hosts'], r['k'], r['path'],
                                             r['nova']['n'])
        print('%-38s nova %9.2f ms median %9.2f ms p95  (filters got %d '
              'hosts, %d passed)'
              % (head, r['nova']['median'], r['nova']['p95'],
                 r['nova_hosts_given'], r['nova_hosts_passed']))
        print('%-38s ours %9.2f ms median %9.2f ms p95  filter+weigh '
              '(%d passed): nova/ours %.1fx'
              % ('', r['ours_filter_weigh']['median'],
                 r['ours_filter_weigh']['p95'], r['ours_hosts_passed'],
                 r['ratio_filter_weigh']))
        print('%-38s ours %9.2f ms median %9.2f ms p95  select_destinations'
              ' with claims: nova/ours %.1fx'
              % ('', r['ours_select']['median'], r['ours_select']['p95'],
                 r['ratio_select']))
        if any(r['outside_zone'].values()):
            print('%-38s requests answered outside the requested zone: %s'
                  % ('', r['outside_zone']))
        sys.stdout.flush()


def markdown(rows: list) -> str:
    out = ['| hosts | k | path | nova median / p95 ms | ours filter+weigh '
           'median / p95 ms | nova/ours | ours select_destinations '
           'median / p95 ms | nova/ours |',
           '| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |']
    for r in rows:
        out.append('| %d | %d | %s | %.1f / %.1f | %.2f / %.2f | %.0fx | '
                   '%.2f / %.2f | %.0fx |'
                   % (r['hosts'], r['k'], r['path'], r['nova']['median'],
                      r['nova']['p95'], r['ours_filter_weigh']['median'],
                      r['ours_filter_weigh']['p95'], r['ratio_filter_weigh'],
                      r['ours_select']['median'], r['ours_select']['p95'],
                      r['ratio_select']))
    return '\n'.join(out)


def curves(rows: list) -> dict:
    """Per k and path: fleet sizes with nova's and our medians."""
    out: dict = {}
    for r in rows:
        c = out.setdefault('k=%d, %s' % (r['k'], r['path']), {
            'hosts': [], 'nova_median_ms': [],
            'ours_filter_weigh_median_ms': [], 'ours_select_median_ms': []})
        c['hosts'].append(r['hosts'])
        c['nova_median_ms'].append(r['nova']['median'])
        c['ours_filter_weigh_median_ms'].append(
            r['ours_filter_weigh']['median'])
        c['ours_select_median_ms'].append(r['ours_select']['median'])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--hosts', type=int, action='append',
                        help='fleet size (repeatable; default 1000, 10000)')
    parser.add_argument('--instances', type=int, action='append',
                        help='instances per request (repeatable; default '
                             '1 and 10)')
    parser.add_argument('--requests', type=int, default=100,
                        help='requests per fleet size and k, at most')
    parser.add_argument('--budget', type=float, default=120.0,
                        help='seconds per fleet size and k after which no '
                             'new block starts (once --min-requests ran)')
    parser.add_argument('--min-requests', type=int, default=10)
    parser.add_argument('--block', type=int, default=4,
                        help='requests in a row for one side before the '
                             'next side takes its turn')
    parser.add_argument('--columnar', choices=['on', 'off', 'both'],
                        default='on', help='our path: [filter_scheduler] '
                                           'columnar')
    parser.add_argument('--nova-candidates', choices=['placement', 'all'],
                        default='placement',
                        help="hosts nova's filters start from")
    parser.add_argument('--max-placement-results', type=int, default=0,
                        help='cap on the placement answer (nova defaults '
                             'to 1000); 0: none')
    parser.add_argument('--nova-venv',
                        default=os.path.join(REPO, '.tox', 'nova34'))
    parser.add_argument('--json', metavar='PATH',
                        help='also write the figures here as JSON')
    parser.add_argument('--config-file', action='append', default=[])
    args = parser.parse_args()
    bench_select.load_config(args.config_file)
    paths = {'on': [True], 'off': [False],
             'both': [True, False]}[args.columnar]
    worker = NovaWorker(ensure_nova_venv(args.nova_venv),
                        args.nova_candidates)
    rows, info, ours = [], {}, {}
    try:
        for hosts in args.hosts or [1000, 10000]:
            driver, load_s = bench_select.inprocess_driver(hosts)
            with tempfile.TemporaryDirectory(prefix='bench-nova-') as tmp:
                fleet = os.path.join(tmp, 'fleet.json')
                zones = write_fleet(driver, fleet)
                info = worker.call(
                    op='load', fleet=fleet, candidates=worker.candidates,
                    max_placement_results=args.max_placement_results)
            ours = {'filters': [f.name() for f in driver.enabled_filters],
                    'weighers': [w.name() for w in driver.weighers]}
            for name, side, took in (('ours', ours, load_s),
                                     ('nova ' + info['nova'], info,
                                      info['load_s'])):
                print('%d hosts, %s: loaded in %.1f s; filters %s; %d '
                      'weighers' % (hosts, name, took,
                                    ', '.join(side['filters']),
                                    len(side['weighers'])))
            sanity(worker, driver, zones, paths[0])
            for k in args.instances or [1, 10]:
                got = measure(worker, driver, zones, hosts, k, paths, args)
                print_rows(got)
                rows.extend(got)
            del driver
    finally:
        worker.close()
    print()
    print(markdown(rows))
    if args.json:
        with open(args.json, 'w') as f:
            machine = '%s, Python %s, %d cores' % (
                platform.machine(), platform.python_version(),
                os.cpu_count() or 0)
            json.dump({
                'tool': 'tools/bench/bench_nova.py', 'machine': machine,
                'nova': info.get('nova'), 'nova_filters': info.get('filters'),
                'nova_weighers': info.get('weighers'),
                'ours_filters': ours.get('filters'),
                'ours_weighers': ours.get('weighers'),
                'nova_candidates': args.nova_candidates,
                'max_placement_results': args.max_placement_results,
                'rows': rows, 'curves': curves(rows)},
                f, indent=1)
            f.write('\n')


if __name__ == '__main__':
    main()
