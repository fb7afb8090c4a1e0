#!/usr/bin/env python3
"""Plot decision latency against fleet size, as an SVG.

    python tools/bench/plot_latency.py            # or: tox -e benchplot
    python tools/bench/plot_latency.py --nova-json /tmp/nova.json

Writes ``doc/images/latency-vs-hosts.svg`` (median milliseconds per
request, log scale) and the same numbers as a Markdown table in
``doc/images/latency-vs-hosts.md``.  The curves:

* this code's ``select_destinations`` in process, k=1, on the columnar
  path and host by host (``[filter_scheduler] columnar`` on and off),
  claims included: measured here, or taken from ``--nova-json``;
* with ``--nova-json`` (what ``tox -e bench-nova -- --json PATH``
  writes): nova 34's filter-and-weigh and ours on the same fleet, from
  that interleaved run;
* earlier curves, from ``doc/images/latency-previous.json`` (figures
  recorded when they were current, kept so that each plot shows where
  the code came from): the first release's, host by host, and the
  columnar path's before decisions were kept across requests.

Drawn with plain SVG so that no plotting library is needed.
"""

import argparse
import json
import math
import os
import platform
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import bench_select  # noqa: E402

from scheduler import config  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))
SIZES = [250, 500, 1000, 2500, 5000, 10000]
WIDTH, HEIGHT, MARGIN = 780, 440, 60
COLOURS = ['#1f77b4', '#2ca02c', '#d62728', '#9467bd', '#8c564b',
           '#7f7f7f', '#ff7f0e']


def measure(sizes: list, requests: int) -> dict:
    """Our k=1 medians, columnar and host by host: ``{name: curve}``."""
    curves: dict = {}
    for hosts in sizes:
        driver, _load = bench_select.inprocess_driver(hosts)
        for columnar, name in ((True, 'select_destinations, columnar'),
                               (False, 'select_destinations, host by '
                                       'host')):
            samples, _wall = bench_select.time_inprocess(
                driver, requests, 1, columnar)
            median = statistics.median(x * 1000 for x in samples)
            curve = curves.setdefault(name, {'hosts': [], 'median': []})
            curve['hosts'].append(hosts)
            curve['median'].append(median)
            print('%6d hosts, %s: median %.2f ms' % (hosts, name, median))
    return curves


def from_nova_json(path: str) -> dict:
    """The k=1 curves of a ``bench_nova.py --json`` file."""
    with open(path) as f:
        data = json.load(f)
    curves: dict = {}
    for key, curve in sorted(data['curves'].items()):
        if not key.startswith('k=1,'):
            continue
        path_name = 'columnar' if key.endswith('columnar') else \
            'host by host'
        curves['nova %s filter and weigh' % data.get('nova', '')] = {
            'hosts': curve['hosts'], 'median': curve['nova_median_ms']}
        curves['select_destinations, %s' % path_name] = {
            'hosts': curve['hosts'],
            'median': curve['ours_select_median_ms']}
        curves['filter and weigh, %s' % path_name] = {
            'hosts': curve['hosts'],
            'median': curve['ours_filter_weigh_median_ms']}
    return curves


def previous(path: str) -> dict:
    """The earlier curves kept in ``path``: one object, or a list."""
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        data = json.load(f)
    return {curve['name']: {'hosts': curve['hosts'],
                            'median': curve['median']}
            for curve in (data if isinstance(data, list) else [data])}


def svg(curves: dict, title: str) -> str:
    max_x = max(max(c['hosts']) for c in curves.values())
    values = [v for c in curves.values() for v in c['median'] if v > 0]
    low = 10 ** math.floor(math.log10(min(values)))
    high = 10 ** math.ceil(math.log10(max(values)))
    plot_w, plot_h = WIDTH - 2 * MARGIN - 200, HEIGHT - 2 * MARGIN

    def x(v):
        return MARGIN + plot_w * v / max_x

    def y(v):
        span = math.log10(high) - math.log10(low)
        return HEIGHT - MARGIN - plot_h * (
            math.log10(max(v, low)) - math.log10(low)) / span

    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
           'font-family="sans-serif" font-size="12">' % (WIDTH, HEIGHT),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="24" font-size="14">%s</text>' % (MARGIN, title)]
    right = MARGIN + plot_w
    out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>'
               % (MARGIN, HEIGHT - MARGIN, right, HEIGHT - MARGIN))
    out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>'
               % (MARGIN, MARGIN, MARGIN, HEIGHT - MARGIN))
    decade = low
    while decade <= high:
        out.append('<text x="%d" y="%.1f" text-anchor="end">%g</text>'
                   % (MARGIN - 6, y(decade) + 4, decade))
        out.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" '
                   'stroke="#ddd"/>' % (MARGIN, y(decade), right,
                                        y(decade)))
        decade *= 10
    step = 10 ** math.floor(math.log10(max_x))
    step = step // 2 if max_x / step < 4 else step
    for value in range(0, int(max_x) + 1, max(1, int(step))):
        out.append('<text x="%.1f" y="%d" text-anchor="middle">%g</text>'
                   % (x(value), HEIGHT - MARGIN + 18, value))
    out.append('<text x="%d" y="%d" text-anchor="middle">hosts</text>'
               % (MARGIN + plot_w // 2, HEIGHT - 16))
    out.append('<text x="16" y="%d" transform="rotate(-90 16 %d)" '
               'text-anchor="middle">median ms per request (log)</text>'
               % (HEIGHT // 2, HEIGHT // 2))
    for n, (name, curve) in enumerate(curves.items()):
        colour = COLOURS[n % len(COLOURS)]
        points = ' '.join('%.1f,%.1f' % (x(h), y(m))
                          for h, m in zip(curve['hosts'], curve['median']))
        out.append('<polyline points="%s" fill="none" stroke="%s" '
                   'stroke-width="2"/>' % (points, colour))
        for h, m in zip(curve['hosts'], curve['median']):
            out.append('<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>'
                       % (x(h), y(m), colour))
        out.append('<text x="%d" y="%d" fill="%s" font-size="11">%s</text>'
                   % (right + 10, MARGIN + 14 + 16 * n, colour, name))
    out.append('</svg>')
    return '\n'.join(out) + '\n'


def markdown(curves: dict, where: str, source: str) -> str:
    sizes = sorted({h for c in curves.values() for h in c['hosts']})
    names = list(curves)
    lines = ['Generated by tools/bench/plot_latency.py (%s; %s). Median '
             'milliseconds per request, one instance.' % (where, source),
             '', '| hosts | ' + ' | '.join(names) + ' |',
             '| ---: |' + ' ---: |' * len(names)]
    for hosts in sizes:
        cells = []
        for name in names:
            curve = curves[name]
            cells.append('%.2f' % curve['median'][curve['hosts'].index(hosts)]
                         if hosts in curve['hosts'] else '')
        lines.append('| %d | %s |' % (hosts, ' | '.join(cells)))
    return '\n'.join(lines) + '\n'


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--requests', type=int, default=100)
    parser.add_argument('--hosts', type=int, action='append')
    parser.add_argument('--nova-json', metavar='PATH',
                        help='curves from a bench_nova.py --json run '
                             'instead of measuring here')
    parser.add_argument('--output-dir',
                        default=os.path.join(REPO, 'doc', 'images'))
    args = parser.parse_args()
    config.parse_args([], default_config_files=[], setup_logging=False)
    curves = previous(os.path.join(args.output_dir,
                                   'latency-previous.json'))
    if args.nova_json:
        curves.update(from_nova_json(args.nova_json))
        source = 'figures of tools/bench/bench_nova.py, interleaved'
    else:
        curves.update(measure(args.hosts or SIZES, args.requests))
        source = '%d requests per size' % args.requests
    os.makedirs(args.output_dir, exist_ok=True)
    where = '%s, Python %s, %d cores' % (platform.machine(),
                                         platform.python_version(),
                                         os.cpu_count() or 0)
    title = 'Scheduling one instance, in process (%s)' % where
    with open(os.path.join(args.output_dir, 'latency-vs-hosts.svg'),
              'w') as f:
        f.write(svg(curves, title))
    with open(os.path.join(args.output_dir, 'latency-vs-hosts.md'),
              'w') as f:
        f.write(markdown(curves, where, source))


if __name__ == '__main__':
    main()
