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

import json
import os
import sys
import tempfile

from scheduler.cli import output


def _compare(args, fleet, events: list, configs: list) -> int:
    """Replay under each of ``configs``; write and print the comparison."""
    from scheduler.replay import compare
    from scheduler.replay import html
    document = compare.compare(fleet, events, configs, seed=args.seed,
                               explained=args.explain,
                               progress=None if args.quiet else sys.stderr)
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
    return 0


def _config_pairs(paths: list) -> list:
    """``(name, path)`` of each ``--config``: named after its file."""
    pairs, seen = [], set()
    for path in paths:
        if not os.path.isfile(path):
            raise FileNotFoundError('--config %s: no such file' % path)
        name = os.path.splitext(os.path.basename(path))[0]
        while name in seen:
            name += "'"
        seen.add(name)
        pairs.append((name, path))
    return pairs


def cmd_replay(args) -> int:
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
    return _compare(args, snapshot.load(args.fleet), trace.read(args.trace),
                    _config_pairs(args.config))


def cmd_demo(args) -> int:
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
        return _compare(args, fleet, events, configs)


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
