#!/usr/bin/env python3
"""Plot select_destinations latency against fleet size, as an SVG.

    python tools/bench/plot_latency.py            # or: tox -e benchplot

Times the in-process filter scheduler (the configured default filters
and every weigher) at several fleet sizes and writes
``doc/images/latency-vs-hosts.svg`` with the median and p95 lines, plus
the numbers as a Markdown table in ``doc/images/latency-vs-hosts.md``.
Drawn with plain SVG so that no plotting library is needed.
"""

import argparse
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
WIDTH, HEIGHT, MARGIN = 640, 400, 60


def measure(sizes: list, requests: int) -> list:
    rows = []
    for hosts in sizes:
        driver, _load = bench_select.inprocess_driver(hosts)
        samples, _wall = bench_select.time_inprocess(driver, requests)
        ms = sorted(x * 1000 for x in samples)
        rows.append({'hosts': hosts, 'median': statistics.median(ms),
                     'p95': ms[min(len(ms) - 1,
                                   int(round(0.95 * len(ms))) - 1)]})
        print('%6d hosts: median %.2f ms, p95 %.2f ms'
              % (hosts, rows[-1]['median'], rows[-1]['p95']))
    return rows


def nice_ticks(top: float, count: int = 5) -> list:
    """Round tick values from 0 up to ``top`` (1, 2 or 5 times 10^n)."""
    raw = top / count
    magnitude = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    step = next(m * magnitude for m in (1, 2, 5, 10)
                if m * magnitude >= raw)
    return [i * step for i in range(int(top // step) + 1)]


def svg(rows: list, title: str) -> str:
    max_x = max(r['hosts'] for r in rows)
    max_y = max(r['p95'] for r in rows) * 1.1
    plot_w, plot_h = WIDTH - 2 * MARGIN, HEIGHT - 2 * MARGIN

    def x(v):
        return MARGIN + plot_w * v / max_x

    def y(v):
        return HEIGHT - MARGIN - plot_h * v / max_y

    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
           'font-family="sans-serif" font-size="12">' % (WIDTH, HEIGHT),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="24" font-size="14">%s</text>' % (MARGIN, title)]
    out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>'
               % (MARGIN, HEIGHT - MARGIN, WIDTH - MARGIN, HEIGHT - MARGIN))
    out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>'
               % (MARGIN, MARGIN, MARGIN, HEIGHT - MARGIN))
    for value in nice_ticks(max_y):
        out.append('<text x="%d" y="%.1f" text-anchor="end">%g</text>'
                   % (MARGIN - 6, y(value) + 4, value))
        out.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" '
                   'stroke="#ddd"/>' % (MARGIN, y(value), WIDTH - MARGIN,
                                        y(value)))
    for value in nice_ticks(max_x):
        out.append('<text x="%.1f" y="%d" text-anchor="middle">%g</text>'
                   % (x(value), HEIGHT - MARGIN + 18, value))
    out.append('<text x="%d" y="%d" text-anchor="middle">hosts</text>'
               % (WIDTH // 2, HEIGHT - 16))
    out.append('<text x="16" y="%d" transform="rotate(-90 16 %d)" '
               'text-anchor="middle">ms per request</text>'
               % (HEIGHT // 2, HEIGHT // 2))
    for key, colour in (('median', '#1f77b4'), ('p95', '#d62728')):
        points = ' '.join('%.1f,%.1f' % (x(r['hosts']), y(r[key]))
                          for r in rows)
        out.append('<polyline points="%s" fill="none" stroke="%s" '
                   'stroke-width="2"/>' % (points, colour))
        for r in rows:
            out.append('<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>'
                       % (x(r['hosts']), y(r[key]), colour))
    out.append('<text x="%d" y="%d" fill="#1f77b4">median</text>'
               % (WIDTH - MARGIN - 90, MARGIN + 10))
    out.append('<text x="%d" y="%d" fill="#d62728">p95</text>'
               % (WIDTH - MARGIN - 90, MARGIN + 26))
    out.append('</svg>')
    return '\n'.join(out) + '\n'


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--requests', type=int, default=100)
    parser.add_argument('--hosts', type=int, action='append')
    parser.add_argument('--output-dir',
                        default=os.path.join(REPO, 'doc', 'images'))
    args = parser.parse_args()
    config.parse_args([], default_config_files=[], setup_logging=False)
    rows = measure(args.hosts or SIZES, args.requests)
    os.makedirs(args.output_dir, exist_ok=True)
    where = '%s, Python %s, %d cores' % (platform.machine(),
                                         platform.python_version(),
                                         os.cpu_count() or 0)
    title = 'select_destinations in process (%s)' % where
    with open(os.path.join(args.output_dir, 'latency-vs-hosts.svg'),
              'w') as f:
        f.write(svg(rows, title))
    with open(os.path.join(args.output_dir, 'latency-vs-hosts.md'),
              'w') as f:
        f.write('Generated by tools/bench/plot_latency.py (%s, %d requests '
                'per size).\n\n| hosts | median ms | p95 ms |\n'
                '| ---: | ---: | ---: |\n' % (where, args.requests))
        for r in rows:
            f.write('| %d | %.2f | %.2f |\n' % (r['hosts'], r['median'],
                                                r['p95']))


if __name__ == '__main__':
    main()
