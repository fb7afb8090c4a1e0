"""The figures of one replay: placed, refused, hosts used, stranded...

``Tally`` follows a replay request by request and samples the fleet
now and then for the plots; ``result()`` is one configuration's part
of the comparison (``scheduler.replay.compare``).
"""

import collections
import statistics

from scheduler.filters import availability_zone
from scheduler.resources import compute


def flavor_key(spec) -> tuple:
    """``(name, memory_mb, vcpus, disk_gb)`` of a request's flavor."""
    memory_mb, vcpus, disk_gb = compute.resources_of(spec)
    flavor = spec.flavor
    name = flavor.obj_get('name') or '%dMB/%dvCPU/%dGB' % (
        memory_mb, vcpus, disk_gb)
    return name, memory_mb, vcpus, disk_gb


def most_common_flavor(events: list) -> tuple | None:
    """The flavor the trace asks for most (instances, not requests)."""
    from scheduler.replay import trace as trace_mod
    counts: collections.Counter = collections.Counter()
    for event in events:
        if event['kind'] == 'request':
            spec = trace_mod.spec_of(event)
            counts[flavor_key(spec)] += spec.num_instances
    return counts.most_common(1)[0][0] if counts else None


def free_of(view) -> tuple:
    """``(memory_mb, vcpus, disk_gb)`` a node can still give, with its
    allocation ratios (aggregate overrides included)."""
    memory = view.memory_mb * view.allocation_ratio('ram') \
        - view.memory_mb_used
    vcpus = view.vcpus * view.allocation_ratio('cpu') - view.vcpus_used
    disk = view.local_gb * view.allocation_ratio('disk') \
        - view.local_gb_used
    return max(0.0, memory), max(0.0, vcpus), max(0.0, disk)


def stranded(views: list, flavor: tuple | None) -> dict:
    """Free capacity on the up nodes that cannot take one more of
    ``flavor`` (the trace's most common one)."""
    out = {'flavor': flavor[0] if flavor else None, 'hosts': 0,
           'memory_mb': 0, 'vcpus': 0, 'disk_gb': 0}
    if flavor is None:
        return out
    _name, mb, cpus, gb = flavor
    for view in views:
        memory, vcpus, disk = free_of(view)
        if memory >= mb and vcpus >= cpus and disk >= gb:
            continue
        out['hosts'] += 1
        out['memory_mb'] += int(memory)
        out['vcpus'] += int(vcpus)
        out['disk_gb'] += int(disk)
    return out


def _percentile(values: list, share: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


class Tally:
    """What one replay did, request by request."""

    def __init__(self, sim, flavor: tuple | None):
        self.sim = sim
        self.flavor = flavor
        self.placed = self.refused = self.instances = 0
        self.releases = self.releases_unknown = 0
        self.rejections: collections.Counter = collections.Counter()
        self.emptied_by: collections.Counter = collections.Counter()
        self.zones: collections.Counter = collections.Counter()
        self.aggregates: collections.Counter = collections.Counter()
        self.hosts_touched: set = set()
        self.seconds: list = []
        self.cpu: list = []
        self.requests: list = []
        self.timeline: list = []
        self.matches = self.compared = 0
        views = sim.manager.get_all_host_states()
        # A host in no zone aggregate is in the default zone, as the
        # AvailabilityZoneFilter sees it.
        self._zone_of = {v.host: sorted(availability_zone.host_zones(v))
                         for v in views}
        self._aggs_of = {v.host: sorted(a.name for a in v.aggregates)
                         for v in views}

    def released(self, known: bool) -> None:
        self.releases += 1
        self.releases_unknown += not known

    def request(self, index: int, event: dict, spec, hosts, report,
                seconds: float, cpu: float, detail: dict | None) -> None:
        self.seconds.append(seconds)
        self.cpu.append(cpu)
        walk = [[s.name, s.hosts_in, s.hosts_out] for s in report.steps]
        for name, hosts_in, hosts_out in walk:
            self.rejections[name] += hosts_in - hosts_out
        recorded = (event.get('answer') or {}).get('hosts')
        if hosts is None:
            self.refused += 1
            emptied = report.emptied_by()
            self.emptied_by[emptied.name if emptied else '(no host)'] += 1
        else:
            self.placed += 1
            self.instances += len(hosts)
            for host, _node in hosts:
                self.hosts_touched.add(host)
                for zone in self._zone_of.get(host) or []:
                    self.zones[zone] += 1
                for agg in self._aggs_of.get(host) or []:
                    self.aggregates[agg] += 1
        answer = event.get('answer') or {}
        if 'hosts' in answer or 'no_valid_host' in answer:
            self.compared += 1
            got = None if hosts is None else [list(h) for h in hosts]
            want = None if recorded is None else [list(h) for h in recorded]
            self.matches += got == want
        name, mb, cpus, gb = flavor_key(spec)
        self.requests.append({
            'hosts': None if hosts is None else [h for h, _n in hosts],
            'ms': round(seconds * 1e3, 3),
            'walk': walk,
            'explain': detail,
        })

    def sample(self, events_done: int, requests_done: int) -> None:
        """One point of the plots: fleet fill, refusals, stranded."""
        views = [v for v in self.sim.manager.get_all_host_states()]
        total_mb = used_mb = total_cpu = used_cpu = 0.0
        for view in views:
            total_mb += view.memory_mb * view.allocation_ratio('ram')
            used_mb += view.memory_mb_used
            total_cpu += view.vcpus * view.allocation_ratio('cpu')
            used_cpu += view.vcpus_used
        lost = stranded(views, self.flavor)
        self.timeline.append({
            'event': events_done, 'request': requests_done,
            'ram_fill': round(used_mb / total_mb, 4) if total_mb else 0,
            'vcpu_fill': round(used_cpu / total_cpu, 4) if total_cpu else 0,
            'refused': self.refused,
            'stranded_memory_mb': lost['memory_mb'],
            'stranded_vcpus': lost['vcpus'],
            'stranded_hosts': lost['hosts'],
        })

    def hosts_used(self) -> int:
        """Nodes' hosts with at least one instance at the trace's end."""
        return len({v.host for v in self.sim.manager.get_all_host_states()
                    if v.num_instances > 0 or v.vcpus_used > 0
                    or v.memory_mb_used > 0})

    def result(self, name: str) -> dict:
        views = self.sim.manager.get_all_host_states()
        ms = [s * 1e3 for s in self.seconds]
        summary = {
            'name': name,
            'placed': self.placed,
            'no_valid_host': self.refused,
            'instances_placed': self.instances,
            'hosts_used': self.hosts_used(),
            'hosts_total': len({v.host for v in views}),
            'hosts_touched': len(self.hosts_touched),
            'stranded': stranded(views, self.flavor),
            'spread': {'zones': dict(sorted(self.zones.items())),
                       'aggregates': dict(sorted(self.aggregates.items()))},
            'per_filter_rejections': dict(self.rejections.most_common()),
            'refusals_by_filter': dict(self.emptied_by.most_common()),
            'decision_ms': {
                'mean': round(statistics.fmean(ms), 3) if ms else 0.0,
                'p50': round(_percentile(ms, 0.50), 3),
                'p95': round(_percentile(ms, 0.95), 3),
                'p99': round(_percentile(ms, 0.99), 3),
                'total_s': round(sum(self.seconds), 3),
                'cpu_mean': round(statistics.fmean(self.cpu) * 1e3, 3)
                if self.cpu else 0.0,
            },
            'releases': self.releases,
            'releases_unknown': self.releases_unknown,
            'same_as_recorded': {'requests': self.compared,
                                 'same': self.matches},
        }
        return {'summary': summary, 'requests': self.requests,
                'timeline': self.timeline}
