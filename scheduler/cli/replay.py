"""``snapshot``, ``replay`` and ``capacity``: try a change before making it.

* ``snapshot --output FILE``: the fleet as the inventory has it now;
* ``replay --fleet F --trace T --config A.conf [--config B.conf ...]
  --json OUT --html OUT``: the trace replayed offline under each
  configuration, compared; ``replay demo``: the same on a generated
  fleet and trace with the two shipped configurations;
* ``capacity [--flavor ...]``: how many more of each flavor fit now.

None of them needs the bus or a running service; ``snapshot`` and
``capacity`` read the inventory of ``--config-file``, ``replay``
touches no inventory but its own.  See ``scheduler.replay``.
"""

import argparse
import json
import os
import sys
import tempfile

from scheduler.cli import output


def _write_outputs(document: dict, args) -> None:
    from scheduler.replay import compare
    from scheduler.replay import html
    if args.json:
        with open(args.json, 'w', encoding='utf-8') as f:
            json.dump(document, f, indent=1, default=str)
        sys.stderr.write('JSON written to %s\n' % args.json)
    if args.html:
        with open(args.html, 'w', encoding='utf-8') as f:
            f.write(html.render(document))
        sys.stderr.write('HTML report written to %s (open it in a '
                         'browser; it needs no network)\n' % args.html)
    rows = compare.table(document)
    output.emit(rows, ['figure'] + [c['name'] for c in document['configs']],
                args.format)


def _config_pairs(paths: list) -> list:
    from scheduler.replay import runner
    pairs, seen = [], set()
    for path in paths:
        if not os.path.isfile(path):
            raise FileNotFoundError('--config %s: no such file' % path)
        name = runner.config_name(path)
        while name in seen:
            name += "'"
        seen.add(name)
        pairs.append((name, path))
    return pairs


def cmd_replay(args) -> int:
    from scheduler.replay import compare
    from scheduler.replay import snapshot
    from scheduler.replay import trace
    if args.mode == 'demo':
        return cmd_demo(args)
    missing = [opt for opt, value in (('--fleet', args.fleet),
                                      ('--trace', args.trace),
                                      ('--config', args.config))
               if not value]
    if missing:
        sys.stderr.write('replay: %s required (or "replay demo")\n'
                         % ', '.join(missing))
        return 2
    fleet = snapshot.load(args.fleet)
    events = trace.read(args.trace)
    document = compare.compare(fleet, events, _config_pairs(args.config),
                               seed=args.seed, explained=args.explain,
                               progress=None if args.quiet else sys.stderr)
    _write_outputs(document, args)
    return 0


def cmd_demo(args) -> int:
    from scheduler.replay import compare
    from scheduler.replay import demo
    from scheduler.replay import snapshot
    fleet = snapshot.parse(demo.fleet_document(args.hosts),
                           source='demo fleet (%d hosts)' % args.hosts)
    events = demo.trace_events(args.requests, seed=args.seed + 1)
    with tempfile.TemporaryDirectory(prefix='scheduler-replay-demo-') as d:
        configs = []
        for name, text in demo.CONFIGS.items():
            path = os.path.join(d, '%s.conf' % name)
            with open(path, 'w', encoding='utf-8') as f:
                f.write(text)
            configs.append((name, path))
        document = compare.compare(fleet, events, configs, seed=args.seed,
                                   explained=args.explain,
                                   progress=None if args.quiet
                                   else sys.stderr)
    _write_outputs(document, args)
    return 0


def cmd_snapshot(args) -> int:
    from scheduler.replay import snapshot
    document = snapshot.take()
    with open(args.output, 'w', encoding='utf-8') as f:
        json.dump(document, f, default=str)
    sys.stderr.write('Snapshot of %d node(s), %d aggregate(s), %d '
                     'instance(s) written to %s\n'
                     % (len(document['reports']),
                        len(document['aggregates']),
                        len(document['instances']), args.output))
    return 0


def _capacity_traces(args) -> list:
    """The traces ``capacity`` takes flavors from: ``--trace``, else the
    files this configuration's service records (``[trace] path``, its
    rotated and per-worker files) when there are any."""
    import glob
    import re
    from oslo_config import cfg
    if args.trace:
        return args.trace
    path = cfg.CONF.trace.path
    # path, path.1 (rotated), path.<pid> and path.<pid>.1 (workers).
    return sorted(f for f in glob.glob(glob.escape(path) + '*')
                  if re.fullmatch(r'(\.\d+)*', f[len(path):]))


def _flavors(args) -> list:
    """``(name, MB, vCPUs, GB, extra specs)`` of each flavor to count."""
    from scheduler.replay import metrics
    from scheduler.replay import trace
    seen: dict = {}
    for event in trace.read(_capacity_traces(args)):
        if event['kind'] == 'request':
            spec = trace.spec_of(event)
            name, mb, cpus, gb = metrics.flavor_key(spec)
            seen.setdefault(name, (name, mb, cpus, gb, dict(
                spec.flavor.obj_get('extra_specs') or {})))
    wanted = []
    for item in args.flavor or []:
        parts = item.split(':')
        if len(parts) == 4:
            name = parts[0]
            try:
                mb, cpus, gb = (int(p) for p in parts[1:])
            except ValueError:
                raise ValueError('--flavor %s: NAME:MB:VCPUS:DISK_GB with '
                                 'whole numbers' % item)
            wanted.append((name, mb, cpus, gb, {}))
        elif item in seen:
            wanted.append(seen[item])
        else:
            raise ValueError('--flavor %s: not in the trace; give it as '
                             'NAME:MB:VCPUS:DISK_GB' % item)
    return wanted or list(seen.values())


def cmd_capacity(args) -> int:
    from scheduler.replay import capacity
    from scheduler.replay import snapshot
    flavors = _flavors(args)
    if not flavors:
        sys.stderr.write('capacity: name flavors (--flavor NAME:MB:VCPUS:'
                         'DISK_GB) or give a --trace to take them from '
                         '(none recorded at [trace] path)\n')
        return 2
    fleet = snapshot.load(args.fleet) if args.fleet else snapshot.parse(
        snapshot.take(), source='inventory')
    rows = capacity.capacity(fleet, flavors, limit=args.limit,
                             progress=None if args.quiet else sys.stderr)
    for row in rows:
        row['fits'] = ('>= %d' % row['fits'] if row['at_least']
                       and args.format == 'table' else row['fits'])
    output.emit(rows, ['flavor', 'zone', 'fits'], args.format)
    return 0


def _explain_count(text: str) -> int:
    """``--explain``: a count, or ``all`` (every request)."""
    if text == 'all':
        return sys.maxsize
    try:
        count = int(text)
    except ValueError:
        count = -1
    if count < 0:
        raise argparse.ArgumentTypeError('a number of requests or "all", '
                                         'not %r' % text)
    return count


REPLAY_HELP = ('replay a recorded trace offline against a fleet snapshot '
               'under one or more configurations, and compare them '
               '("replay demo": on a generated fleet and trace)')


def register(subparsers, common: argparse.ArgumentParser) -> None:
    from scheduler.replay import capacity
    from scheduler.replay import runner
    snap = subparsers.add_parser(
        'snapshot', parents=[common],
        help='write the fleet as the inventory has it now (hosts, usage, '
             'aggregates, instances), for "replay --fleet"')
    snap.add_argument('--output', '-o', required=True, metavar='FILE')
    snap.set_defaults(func=cmd_snapshot)

    rep = subparsers.add_parser('replay', parents=[common],
                                help=REPLAY_HELP, description=REPLAY_HELP)
    rep.add_argument('mode', nargs='?', choices=['demo'],
                     help='"demo": a generated fleet and trace against the '
                          'shipped spread and pack configurations')
    rep.add_argument('--fleet', metavar='FILE',
                     help='a fleet snapshot ("scheduler-manage snapshot") '
                          'or a simulator fleet file')
    rep.add_argument('--trace', action='append', metavar='FILE',
                     help='trace file ([trace] path); repeat, or use a '
                          'shell pattern, for several workers or rotated '
                          'files: merged in time order')
    rep.add_argument('--config', action='append', metavar='FILE',
                     help='a configuration to replay under (repeat to '
                          'compare); named after its file')
    rep.add_argument('--json', metavar='FILE', help='write the comparison')
    rep.add_argument('--html', metavar='FILE',
                     help='write the self-contained HTML report')
    rep.add_argument('--seed', type=int, default=0,
                     help='seed of the random choices (host_subset_size, '
                          'ties; the demo\'s fleet and trace)')
    rep.add_argument('--explain', type=_explain_count,
                     default=runner.DEFAULT_EXPLAINED, metavar='N|all',
                     help='requests explained in full (per-host filter '
                          'results and weights), sampled over the trace, '
                          'besides up to %d refusals; "all": every request '
                          '(about twice the time, and a report several '
                          'times bigger); default %%(default)s'
                          % runner.MAX_EXPLAINED_REFUSALS)
    rep.add_argument('--hosts', type=int, default=100,
                     help='demo: hosts in the generated fleet')
    rep.add_argument('--requests', type=int, default=1500,
                     help='demo: requests in the generated trace')
    rep.add_argument('--quiet', action='store_true',
                     help='no progress lines on stderr')
    rep.set_defaults(func=cmd_replay)

    cap = subparsers.add_parser(
        'capacity', parents=[common],
        help='how many more instances of each flavor fit now, per '
             'availability zone and in total, through the configured '
             'filters and weighers')
    cap.add_argument('--flavor', action='append', metavar='NAME',
                     help='NAME:MB:VCPUS:DISK_GB, or a flavor name of '
                          'the trace (repeatable; default: every flavor of '
                          'the trace)')
    cap.add_argument('--trace', action='append', metavar='FILE',
                     help='a trace to take flavors from (repeatable, shell '
                          'patterns allowed); default: the files recorded '
                          'at [trace] path, if any')
    cap.add_argument('--fleet', metavar='FILE',
                     help='count on this snapshot or fleet file instead of '
                          'the inventory')
    cap.add_argument('--limit', type=int, default=capacity.DEFAULT_LIMIT,
                     help='stop counting a flavor and zone at this many '
                          '(shown as ">= N")')
    cap.add_argument('--quiet', action='store_true')
    cap.set_defaults(func=cmd_capacity)
