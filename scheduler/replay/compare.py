"""The comparison of several configurations over one trace (the JSON).

Top level: ``configs`` (one summary per configuration, in the order
given: ``name``, ``placed``, ``no_valid_host``, ``hosts_used``,
``stranded``, ``per_filter_rejections``, spread, decision time...),
``requests`` (per request of the trace: what it asked and, per
configuration, where it went, its filter walk and, for the explained
ones, the explain), ``timeline`` (per configuration, the plots'
points) and ``fleet``/``trace`` (what was replayed).
"""

import sys
import typing

from scheduler.replay import limits
from scheduler.replay import metrics
from scheduler.replay import runner
from scheduler.replay import trace as trace_mod


def describe(event: dict, spec) -> dict:
    name, mb, cpus, gb = metrics.flavor_key(spec)
    answer = event.get('answer') or {}
    return {
        't': event.get('t'),
        'flavor': name, 'memory_mb': mb, 'vcpus': cpus, 'disk_gb': gb,
        'instances': spec.num_instances,
        'availability_zone': spec.obj_get('availability_zone'),
        'project': spec.obj_get('project_id'),
        'recorded': ([h for h, _n in answer['hosts']]
                     if 'hosts' in answer else
                     'NoValidHost' if 'no_valid_host' in answer else None),
    }


def compare(fleet, events: list, configs: list, seed: int = 0,
            explained: int = limits.DEFAULT_EXPLAINED,
            progress: typing.TextIO | None = sys.stderr) -> dict:
    """Replay ``events`` once per ``(name, config path)``; the document."""
    runs = [runner.run(fleet, events, path, name, seed, explained, progress)
            for name, path in configs]
    requests = []
    index = 0
    for event in events:
        if event['kind'] != 'request':
            continue
        row = describe(event, trace_mod.spec_of(event))
        row['index'] = index
        row['results'] = {run['summary']['name']: run['requests'][index]
                          for run in runs}
        requests.append(row)
        index += 1
    return {
        'configs': [run['summary'] for run in runs],
        'requests': requests,
        'timeline': {run['summary']['name']: run['timeline']
                     for run in runs},
        'fleet': {'source': fleet.source,
                  'nodes': len(fleet.reports),
                  'aggregates': len(fleet.aggregates),
                  'instances': len(fleet.instances)},
        'trace': {'requests': len(requests),
                  'releases': sum(1 for e in events
                                  if e['kind'] == 'release')},
    }


def table(document: dict) -> list:
    """Field rows, one column per configuration, for the terminal."""
    configs = document['configs']
    rows = []

    def add(label, get):
        row = {'figure': label}
        for summary in configs:
            row[summary['name']] = get(summary)
        rows.append(row)

    add('requests placed', lambda s: s['placed'])
    add('NoValidHost', lambda s: s['no_valid_host'])
    add('instances placed', lambda s: s['instances_placed'])
    add('hosts used', lambda s: '%d of %d' % (s['hosts_used'],
                                              s['hosts_total']))
    add('stranded hosts', lambda s: s['stranded']['hosts'])
    add('stranded vCPU', lambda s: s['stranded']['vcpus'])
    add('stranded RAM MB', lambda s: s['stranded']['memory_mb'])
    add('stranded disk GB', lambda s: s['stranded']['disk_gb'])
    add('zones', lambda s: ', '.join('%s %d' % kv for kv in
                                     s['spread']['zones'].items()))
    add('decision ms p50/p95', lambda s: '%.2f / %.2f' % (
        s['decision_ms']['p50'], s['decision_ms']['p95']))
    add('same as recorded', lambda s: '%d of %d' % (
        s['same_as_recorded']['same'], s['same_as_recorded']['requests']))
    names = sorted({n for s in configs for n in s['per_filter_rejections']})
    for name in names:
        add('rejected by %s' % name,
            lambda s, n=name: s['per_filter_rejections'].get(n, 0))
    return rows
