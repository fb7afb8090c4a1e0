#!/usr/bin/env python3
"""The production-shaped benchmark's figures, as SVG plots and tables.

    tox -e benchplot                       # measure, then draw
    tox -e benchplot -- --quick            # small sizes, a few minutes
    python tools/bench/plot_latency.py --hosts 1000 --hosts 10000 \\
        --callers 1 --callers 8 --rabbit-hosts 5000
    python tools/bench/plot_latency.py --redraw   # from the JSON only

Every figure comes from the mixed workload of ``bench_mixed.py`` (the
varied fleet and the skewed request mix of ``mixed_workload.py``,
seeded), never from one repeated request shape:

* ``doc/images/latency-vs-hosts.svg``: ``select_destinations`` in
  process, one instance a request, median and p95, against the fleet
  size (``bench_mixed.time_mixed_inprocess``: claims in a SQLite file,
  host reports taken between requests), beside nova 34's
  filter-and-weigh on the same fleet and the same requests
  (``bench_nova.nova_mixed``; nova in its own virtualenv, see
  ``bench_nova.py``; how each request feature reaches nova is written
  under the table).  Each fleet size: nova's copy of the fleet is taken
  when it is loaded, then ours runs, then nova's.
* ``doc/images/placements-vs-callers.svg`` and
  ``latency-vs-callers.svg``: over RabbitMQ, one fleet loaded once,
  placements/s and select latency against the number of concurrent
  callers, with the no-op call's rate and latency measured in the same
  run (``sweep_callers.py``).  This project's only: nova cannot be
  called over this bus.

The numbers go to ``doc/images/mixed-figures.json`` with the date, the
machine's load average, the commit and the command; ``--redraw``
draws from it without measuring, and ``--no-nova`` / ``--no-rabbit``
keep that part of the previous JSON.  Plain SVG: no plotting library.
"""

import argparse
import datetime
import gc
import json
import os
import platform
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, REPO)
sys.path.insert(0, HERE)

import svgplot  # noqa: E402

IMAGES = os.path.join(REPO, 'doc', 'images')
FIGURES = 'mixed-figures.json'
SIZES = [1000, 2500, 5000, 10000]
QUICK_SIZES = [1000, 2500]
CALLERS = [1, 4, 16, 32]
QUICK_CALLERS = [1, 4]
OURS, NOVA = '#1f77b4', '#d62728'


def _load() -> str:
    with open('/proc/loadavg') as f:
        return ' '.join(f.read().split()[:3])


def _commit() -> str:
    def git(*args):
        return subprocess.run(['git', '-C', REPO] + list(args),
                              capture_output=True, text=True).stdout.strip()
    commit = git('rev-parse', '--short', 'HEAD') or 'unknown'
    # The bench's own files being edited counts: the figures are then
    # not quite the commit's.
    return commit + ('+changes' if git('status', '--porcelain',
                                       '--untracked-files=no') else '')


def _stamp(args) -> dict:
    now = datetime.datetime.now(datetime.timezone.utc)
    return {'date': now.strftime('%Y-%m-%d %H:%M UTC'),
            'load_start': _load(), 'commit': _commit(),
            'machine': '%s, Python %s, %d cores' % (
                platform.machine(), platform.python_version(),
                os.cpu_count() or 0),
            'command': 'python tools/bench/plot_latency.py ' +
                       ' '.join(args.argv)}


# --- measuring --------------------------------------------------------------

def measure_hosts(args) -> dict:
    """Ours and nova's k=1 latency on the mixed workload per size."""
    import bench_nova
    from tools.bench import bench_mixed
    from tools.bench import mixed_workload as mix
    part = _stamp(args)
    worker = None
    if not args.no_nova:
        worker = bench_nova.NovaWorker(
            bench_nova.ensure_nova_venv(args.nova_venv), 'placement')
    rows = []
    try:
        for hosts in args.hosts:
            driver, computes, load_s, tmp = bench_mixed.inprocess_driver(
                hosts, args.seed, args.inventory_dir)
            row = {'hosts': hosts, 'load_s': load_s, 'nova': None}
            nova_here = worker is not None and hosts <= args.nova_max_hosts
            if nova_here:
                zones, info = bench_nova.load_mixed(
                    worker, driver, mix.ENABLED_FILTERS)
                part['nova'] = info['nova']
                part['nova_filters'] = info['filters']
            got = bench_mixed.time_mixed_inprocess(
                driver, computes, args.requests, args.duration, 1,
                args.seed)
            samples, cpu, refused = got[0], got[1], got[3]
            row['ours'] = dict(bench_nova._stats(samples), refused=refused,
                               cpu_median=bench_nova._stats(cpu)['median'])
            print('%6d hosts, ours: median %.2f ms, p95 %.2f ms (n=%d, %d '
                  'refused)' % (hosts, row['ours']['median'],
                                row['ours']['p95'], row['ours']['n'],
                                refused), flush=True)
            if nova_here:
                row['nova'] = bench_nova.nova_mixed(
                    worker, zones, mix, args.requests, args.duration,
                    args.seed)
                print('%6d hosts, nova: median %.2f ms, p95 %.2f ms (n=%d, '
                      '%d refused, %d outside the zone)'
                      % (hosts, row['nova']['median'], row['nova']['p95'],
                         row['nova']['n'], row['nova']['refused'],
                         row['nova']['outside_zone']), flush=True)
            rows.append(row)
            shutil.rmtree(tmp, ignore_errors=True)
            del driver, computes
            gc.collect()
    finally:
        if worker is not None:
            worker.close()
    part.update(load_end=_load(), rows=rows, seed=args.seed,
                requests=args.requests, duration_s=args.duration,
                translation=list(bench_nova.MIXED_TRANSLATION))
    return part


def measure_callers(args) -> dict:
    from tools.bench import sweep_callers
    part = _stamp(args)
    part.update(sweep_callers.sweep(
        args.rabbit_hosts, args.callers, args.rabbit_duration,
        args.rabbit_requests, seed=args.seed, db=args.db,
        inventory_dir=args.inventory_dir))
    part['load_end'] = _load()
    return part


# --- drawing (pure) ----------------------------------------------------------

def _notes(part: dict) -> list:
    """Where and when: lines short enough for the plot's width."""
    return ['%s, %s, commit %s' % (part['date'], part['machine'],
                                   part['commit']),
            'load average %s at the start, %s at the end (the machine is '
            'shared: a quiet one gives lower figures)'
            % (part['load_start'], part['load_end'])]


def _cell(stats: dict | None, key: str) -> str | None:
    if not stats or stats.get(key) is None:
        return None
    return '%.2f' % stats[key]


def hosts_figure(part: dict) -> tuple:
    """``(svg, markdown)`` of latency against hosts."""
    rows = part['rows']
    xs = [r['hosts'] for r in rows]
    nova = 'nova %s' % part.get('nova', '34')

    def ys(side, key):
        return [r[side][key] if r.get(side) else None for r in rows]
    series = [svgplot.Series('ours: select_destinations, median', xs,
                             ys('ours', 'median'), OURS),
              svgplot.Series('ours: p95', xs, ys('ours', 'p95'), OURS,
                             dashed=True)]
    if any(r.get('nova') for r in rows):
        series += [svgplot.Series('%s: filter and weigh, median' % nova,
                                  xs, ys('nova', 'median'), NOVA),
                   svgplot.Series('%s: p95' % nova, xs, ys('nova', 'p95'),
                                  NOVA, dashed=True)]
    notes = ['mixed workload (varied fleet, skewed requests, seed %d), '
             'one instance a request, in process' % part['seed']] + \
        _notes(part)
    svg = svgplot.line_chart(series, 'Scheduling one instance: latency '
                             'against fleet size', notes, 'hosts',
                             'ms per request')
    table = svgplot.markdown_table(
        ['hosts', 'ours median ms', 'ours p95 ms', 'ours CPU median ms',
         'ours n', '%s median ms' % nova, '%s p95 ms' % nova,
         '%s CPU median ms' % nova, '%s n' % nova, 'nova / ours (median)'],
        [[r['hosts'], _cell(r['ours'], 'median'), _cell(r['ours'], 'p95'),
          _cell(r['ours'], 'cpu_median'), r['ours']['n'],
          _cell(r.get('nova'), 'median'), _cell(r.get('nova'), 'p95'),
          _cell(r.get('nova'), 'cpu_median'),
          r['nova']['n'] if r.get('nova') else None,
          '%.0fx' % (r['nova']['median'] / r['ours']['median'])
          if r.get('nova') else None] for r in rows])
    text = [
        'Generated by `%s` (tools/bench/plot_latency.py), %s.' % (
            part['command'].strip(), '; '.join(_notes(part))),
        '',
        'Median and p95 milliseconds of one request of one instance, in '
        'process, on the mixed workload of tools/bench/bench_mixed.py '
        '(tools/bench/mixed_workload.py, seed %d; at most %d requests or '
        '%.0f s a side and size). Ours: `select_destinations` with claims '
        'in a SQLite file, host reports taken between requests. %s: '
        'filters and weighers (`_get_sorted_hosts` and '
        '`_consume_selected_host`) on the same fleet and the same '
        'requests, in its own virtualenv (tools/bench/bench_nova.py). '
        'Wall-clock figures, plotted; the CPU columns are the thread\'s '
        'CPU time per request, which a loaded machine inflates less.'
        % (part['seed'], part['requests'], part['duration_s'], nova),
        '', table]
    if part.get('translation') and any(r.get('nova') for r in rows):
        text += ['How the requests reach nova:', '']
        text += ['- %s' % line for line in part['translation']]
    refused = ['%d: ours %d, nova %s' % (
        r['hosts'], r['ours']['refused'],
        r['nova']['refused'] if r.get('nova') else '-') for r in rows]
    text += ['', 'Requests answered NoValidHost (in the figures): %s.'
             % '; '.join(refused)]
    return svg, '\n'.join(text) + '\n'


def callers_figures(part: dict) -> tuple:
    """``(placements svg, latency svg, markdown)`` against callers."""
    rows = part['rows']
    xs = [r['callers'] for r in rows]
    where = '%d hosts, %s, %s services x workers' % (
        part['hosts'], part['db'], part['layout'])
    notes = ['over RabbitMQ, mixed workload, %s; nova cannot be called '
             'over this bus: ours only' % where] + _notes(part)
    noop = [(r['noop_before_per_s'] + r['noop_after_per_s']) / 2
            for r in rows]
    rates = svgplot.line_chart(
        [svgplot.Series('placements/s (claims on)', xs,
                        [r['select_per_s'] for r in rows], OURS),
         svgplot.Series('no-op calls/s, same run (mean of', xs, noop,
                        '#7f7f7f', dashed=True),
         svgplot.Series('the phases before and after)', [], [],
                        '#7f7f7f', dashed=True)],
        'Placements per second against concurrent callers', notes,
        'concurrent callers', 'per second')
    latency = svgplot.line_chart(
        [svgplot.Series('select_destinations, median', xs,
                        [r['select_ms']['median'] for r in rows], OURS),
         svgplot.Series('select_destinations, p95', xs,
                        [r['select_ms']['p95'] for r in rows], OURS,
                        dashed=True),
         svgplot.Series('no-op call, median', xs,
                        [r['noop_before_ms']['median'] for r in rows],
                        '#7f7f7f')],
        'Latency against concurrent callers', notes, 'concurrent callers',
        'ms per call')
    table = svgplot.markdown_table(
        ['callers', 'placements/s', 'no-op calls/s before / after',
         'placements / no-op', 'select median / p95 ms',
         'no-op median ms', 'failed selects'],
        [[r['callers'], '%.1f' % r['select_per_s'],
          '%.0f / %.0f' % (r['noop_before_per_s'], r['noop_after_per_s']),
          '%.2f' % (r['select_per_s'] / n) if n else None,
          '%.1f / %.1f' % (r['select_ms']['median'] or 0,
                           r['select_ms']['p95'] or 0),
          '%.2f' % (r['noop_before_ms']['median'] or 0),
          r['select_failed']] for r, n in zip(rows, noop)])
    text = [
        'Generated by `%s` (tools/bench/plot_latency.py), %s.' % (
            part['command'].strip(), '; '.join(_notes(part))),
        '',
        'Over RabbitMQ (tools/bench/sweep_callers.py): %s, the fleet of '
        'tools/bench/mixed_workload.py loaded once through '
        '`scheduler-compute-sim`, then for each number of callers no-op '
        'calls (`get_version_info`), placements of one instance each '
        '(the mixed requests, claims on, each placement built by the '
        'simulator) and no-op calls again, each phase at most %d calls or '
        '%.0f s. The ratio is against the mean of the two no-op rates. '
        'nova cannot be called over this bus: these curves are ours only.'
        % (where, part['requests'], part['duration_s']), '', table]
    if part.get('errors'):
        text += ['Errors other than NoValidHost: %s.' % ', '.join(
            '%s x%d' % kv for kv in sorted(part['errors'].items()))]
    return rates, latency, '\n'.join(text) + '\n'


def write(figures: dict, out: str) -> None:
    """Every figure that ``figures`` has numbers for, into ``out``."""
    os.makedirs(out, exist_ok=True)
    files = {}
    if figures.get('hosts'):
        svg, md = hosts_figure(figures['hosts'])
        files.update({'latency-vs-hosts.svg': svg,
                      'latency-vs-hosts.md': md})
    if figures.get('callers'):
        rates, latency, md = callers_figures(figures['callers'])
        files.update({'placements-vs-callers.svg': rates,
                      'latency-vs-callers.svg': latency,
                      'placements-vs-callers.md': md})
    for name, text in files.items():
        with open(os.path.join(out, name), 'w') as f:
            f.write(text)
        print('wrote', os.path.join(out, name))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--quick', action='store_true',
                        help='small sizes: %s hosts, %s callers at 1,000 '
                             'hosts, short phases' % (QUICK_SIZES,
                                                      QUICK_CALLERS))
    parser.add_argument('--hosts', type=int, action='append',
                        help='in process fleet size (repeatable; default '
                             '%s)' % SIZES)
    parser.add_argument('--requests', type=int, default=300,
                        help='in process: requests a side and size, at '
                             'most')
    parser.add_argument('--duration', type=float, default=60.0,
                        help='in process: seconds a side and size, at '
                             'most')
    parser.add_argument('--nova-max-hosts', type=int, default=10000,
                        help='nova is run up to this fleet size')
    parser.add_argument('--no-nova', action='store_true')
    parser.add_argument('--nova-venv',
                        default=os.path.join(REPO, '.tox', 'nova34'))
    parser.add_argument('--callers', type=int, action='append',
                        help='over RabbitMQ: concurrent callers '
                             '(repeatable; default %s)' % CALLERS)
    parser.add_argument('--rabbit-hosts', type=int, default=None,
                        help='over RabbitMQ: fleet size (default 5000)')
    parser.add_argument('--rabbit-requests', type=int, default=1000)
    parser.add_argument('--rabbit-duration', type=float, default=None,
                        help='over RabbitMQ: seconds a phase (default 20)')
    parser.add_argument('--db', choices=['sqlite', 'postgresql'],
                        default='sqlite')
    parser.add_argument('--no-rabbit', action='store_true',
                        help='keep the previous callers figures')
    parser.add_argument('--no-inprocess', action='store_true',
                        help='keep the previous fleet-size figures')
    parser.add_argument('--redraw', action='store_true',
                        help='draw from the JSON only, measure nothing')
    parser.add_argument('--seed', type=int, default=25)
    parser.add_argument('--inventory-dir', default=None)
    parser.add_argument('--report-interval', type=int, default=10)
    parser.add_argument('--output-dir', default=IMAGES)
    args = parser.parse_args()
    args.argv = sys.argv[1:]
    if args.quick:
        args.hosts = args.hosts or QUICK_SIZES
        args.callers = args.callers or QUICK_CALLERS
        args.rabbit_hosts = args.rabbit_hosts or 1000
        args.rabbit_duration = args.rabbit_duration or 10.0
        args.requests = min(args.requests, 100)
        args.duration = min(args.duration, 20.0)
        args.rabbit_requests = min(args.rabbit_requests, 300)
    args.hosts = args.hosts or SIZES
    args.callers = args.callers or CALLERS
    args.rabbit_hosts = args.rabbit_hosts or 5000
    args.rabbit_duration = args.rabbit_duration or 20.0
    path = os.path.join(args.output_dir, FIGURES)
    figures = {}
    if os.path.exists(path):
        with open(path) as f:
            figures = json.load(f)
    if not args.redraw:
        from oslo_config import cfg
        from tools.bench import bench_select
        bench_select.load_config([])
        cfg.CONF.set_override('report_interval', args.report_interval,
                              group='scheduler')
        if not args.no_inprocess:
            figures['hosts'] = measure_hosts(args)
        if not args.no_rabbit:
            figures['callers'] = measure_callers(args)
        os.makedirs(args.output_dir, exist_ok=True)
        with open(path, 'w') as f:
            json.dump(figures, f, indent=1)
            f.write('\n')
    write(figures, args.output_dir)


if __name__ == '__main__':
    main()
