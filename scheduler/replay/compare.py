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


def figures(configs: list) -> list:
    """``(label, value of one configuration's summary)`` of each figure
    compared: the terminal table and the HTML report show the same."""
    common = configs[0]['stranded']['flavor'] if configs else ''
    rows = [
        ('requests placed', lambda s: s['placed']),
        ('NoValidHost', lambda s: s['no_valid_host']),
        ('instances placed', lambda s: s['instances_placed']),
        ('hosts used', lambda s: '%d of %d' % (s['hosts_used'],
                                               s['hosts_total'])),
        ('stranded (flavor %s)' % common,
         lambda s: '%(hosts)d hosts: %(vcpus)d vCPU, %(memory_mb)d MB, '
                   '%(disk_gb)d GB' % s['stranded']),
        ('spread over zones', lambda s: s['spread']['zones']),
        ('spread over aggregates', lambda s: s['spread']['aggregates']),
        ('refusals by filter', lambda s: s['refusals_by_filter']),
        ('decision ms (mean, p50, p95, p99)',
         lambda s: '%(mean).2f, %(p50).2f, %(p95).2f, %(p99).2f'
                   % s['decision_ms']),
        ('same as recorded',
         lambda s: '%(same)d of %(requests)d' % s['same_as_recorded']),
    ]
    names = sorted({n for s in configs for n in s['per_filter_rejections']})
    return rows + [('hosts rejected by %s' % name,
                    lambda s, n=name: s['per_filter_rejections'].get(n, 0))
                   for name in names]


def table(document: dict) -> list:
    """Figure rows, one column per configuration, for the terminal."""
    configs = document['configs']
    return [dict({'figure': label}, **{s['name']: get(s) for s in configs})
            for label, get in figures(configs)]
