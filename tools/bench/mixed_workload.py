"""A production-shaped fleet and request mix, seeded (for bench_mixed).

The fleet is a document in the compute simulator's fleet file format
(``scheduler.simulator.fleet``), so the same hosts run in process and as
``scheduler-compute-sim --fleet``: several host types (general purpose,
high memory, SSD, GPU, ARM, small edge hosts), three availability zones,
aggregates with metadata that flavors ask for, and a share of hosts
started near full (``prefill``).

The requests are drawn from a skewed mix: tens of flavors and hundreds
of projects with Zipf-like weights (a few are most of the traffic, as in
a real cloud), images with properties, zones, scheduler hints that name
instances placed earlier, and server groups of every policy,
anti-affinity included.  Everything comes from one ``random.Random``
seeded by the caller, so two runs with a seed draw the same requests;
``MixState`` holds what the requests refer back to (instances placed,
server group members) and is filled in by the caller as placements come
back.
"""

import dataclasses
import random
import threading
import uuid

from scheduler import objects
from scheduler.simulator import fleet as fleet_mod

#: ``(type, share of the fleet, group keys, zones, extra aggregates)``.
#: The edge hosts are small and in a zone of their own; ``prefill``
#: leaves most of them near full.
HOST_TYPES = (
    ('gp', 0.40, {'memory_mb': 262144, 'vcpus': 64, 'local_gb': 2000,
                  'cpu_info': {'vendor': 'Intel',
                               'features': ['avx2', 'vmx']}},
     ('az1', 'az2'), ('general',)),
    ('hm', 0.12, {'memory_mb': 1048576, 'vcpus': 96, 'local_gb': 2000,
                  'ram_allocation_ratio': 1.0},
     ('az1', 'az2'), ('highmem',)),
    ('ssd', 0.15, {'memory_mb': 131072, 'vcpus': 32, 'local_gb': 1600,
                   'disk_available_least': 1500,
                   'stats': {'io_workload': 0}},
     ('az1', 'az2'), ('ssd',)),
    ('gpu', 0.05, {'memory_mb': 524288, 'vcpus': 48, 'local_gb': 4000,
                   'cpu_allocation_ratio': 1.0},
     ('az1',), ('gpu',)),
    ('arm', 0.08, {'memory_mb': 262144, 'vcpus': 128, 'local_gb': 2000,
                   'architecture': 'aarch64',
                   'supported_instances': [['aarch64', 'kvm', 'hvm']]},
     ('az2',), ('general',)),
    ('edge', 0.20, {'memory_mb': 16384, 'vcpus': 8, 'local_gb': 200,
                    'disk_available_least': 120,
                    'hypervisor_version': '6.2.0'},
     ('az3',), ('edge',)),
)

AGGREGATES = {
    'general': {'class': 'general'},
    'highmem': {'memory_class': 'high'},
    'ssd': {'disk_type': 'ssd'},
    'gpu': {'gpu': 'true', 'cpu_allocation_ratio': '1.0'},
    'edge': {'class': 'edge', 'max_instances_per_host': '20'},
}

#: Filters a production nova runs, with the server group and hint
#: filters the mix needs (the defaults plus those).
ENABLED_FILTERS = [
    'ComputeFilter', 'AvailabilityZoneFilter', 'ComputeCapabilitiesFilter',
    'ImagePropertiesFilter', 'RamFilter', 'DiskFilter', 'VCPUFilter',
    'AggregateInstanceExtraSpecsFilter', 'ServerGroupAntiAffinityFilter',
    'ServerGroupAffinityFilter', 'DifferentHostFilter', 'SameHostFilter']

#: ``(family, aggregate key or None, sizes as (MB, vCPUs, GB))``.
FLAVOR_FAMILIES = (
    ('m1', None, [(512, 1, 1), (2048, 1, 20), (4096, 2, 40),
                  (8192, 4, 80), (16384, 8, 160), (32768, 16, 320)]),
    ('c1', None, [(2048, 2, 20), (4096, 4, 40), (8192, 8, 80),
                  (16384, 16, 160)]),
    ('r1', ('memory_class', 'high'),
     [(32768, 4, 40), (65536, 8, 80), (131072, 16, 160),
      (262144, 32, 320)]),
    ('s1', ('disk_type', 'ssd'),
     [(4096, 2, 100), (8192, 4, 200), (16384, 8, 400)]),
    ('g1', ('gpu', 'true'), [(65536, 8, 200), (131072, 16, 400)]),
    ('e1', ('class', 'edge'), [(1024, 1, 10), (2048, 2, 20),
                               (4096, 2, 40)]),
    ('t1', None, [(256, 1, 1), (1024, 1, 5), (2048, 2, 10)]),
    ('x1', None, [(65536, 32, 100), (131072, 48, 200)]),
)

#: ``(name, properties)``; aarch64 images go to ARM hosts only.
IMAGES = (
    ('ubuntu-24.04', {'hw_architecture': 'x86_64', 'os_type': 'linux'}),
    ('ubuntu-22.04', {'hw_architecture': 'x86_64', 'img_hv_type': 'kvm'}),
    ('centos-9', {'hw_architecture': 'x86_64', 'hw_vm_mode': 'hvm'}),
    ('windows-2022', {'hw_architecture': 'x86_64', 'os_type': 'windows',
                      'img_hv_requested_version': '>=8.0'}),
    ('debian-12', {}),
    ('cirros', {'hw_disk_bus': 'virtio'}),
    ('ubuntu-arm', {'hw_architecture': 'aarch64'}),
    ('volume', None),   # booted from volume: no image, no root disk
)

#: Zones asked for, by weight; None: any zone.
ZONES = ((None, 60), ('az1', 20), ('az2', 15), ('az3', 5))

POLICIES = (('anti-affinity', 45), ('affinity', 15),
            ('soft-anti-affinity', 30), ('soft-affinity', 10))

#: Share of requests with a server group, with a different_host or a
#: same_host hint.
GROUP_SHARE = 0.15
DIFFERENT_HOST_SHARE = 0.08
SAME_HOST_SHARE = 0.02
#: Members a server group grows to before it is replaced by a new one
#: (an anti-affinity group of thousands of members is not a cloud's).
GROUP_MAX_MEMBERS = 12
GROUPS = 60
#: ``(instances, weight)`` of a request when the mix chooses.
INSTANCES = ((1, 88), (2, 6), (3, 3), (5, 2), (10, 1))
#: Instances a hint names are among the last this many placed.
RECENT = 200


def _zipf_weights(count: int, skew: float = 1.1) -> list:
    return [1.0 / (rank + 1) ** skew for rank in range(count)]


def fleet_document(hosts: int) -> dict:
    """A fleet file (``scheduler.simulator.fleet`` format) of ``hosts``
    hosts of every type in ``HOST_TYPES``, in three zones."""
    if hosts < 2 * len(HOST_TYPES):
        raise ValueError('at least %d hosts' % (2 * len(HOST_TYPES)))
    counts = [max(1, int(hosts * share)) for _t, share, *_r in HOST_TYPES]
    counts[0] += hosts - sum(counts)
    groups = []
    for (kind, _share, keys, zones, aggs), count in zip(HOST_TYPES,
                                                        counts):
        for index, zone in enumerate(zones):
            part = count // len(zones) + (
                1 if index < count % len(zones) else 0)
            if part:
                groups.append(dict(keys, prefix=kind, count=part,
                                   availability_zone=zone,
                                   aggregates=list(aggs)))
    return {'_comment': 'generated by tools/bench/mixed_workload.py',
            'aggregates': AGGREGATES, 'groups': groups}


def fleet(hosts: int) -> fleet_mod.FleetSpec:
    """The parsed fleet of ``fleet_document(hosts)``."""
    return fleet_mod.parse(fleet_document(hosts), source='bench fleet')


@dataclasses.dataclass(frozen=True)
class Flavor:
    name: str
    memory_mb: int
    vcpus: int
    root_gb: int
    extra_specs: tuple

    def obj(self) -> objects.Flavor:
        return objects.Flavor(flavorid=self.name, name=self.name,
                              memory_mb=self.memory_mb, vcpus=self.vcpus,
                              root_gb=self.root_gb, ephemeral_gb=0, swap=0,
                              extra_specs=dict(self.extra_specs))


def flavors() -> list:
    """Every flavor of the mix (tens of them)."""
    made = []
    for family, key, sizes in FLAVOR_FAMILIES:
        specs = () if key is None else (
            ('aggregate_instance_extra_specs:%s' % key[0], key[1]),)
        for size, (mb, cpus, gb) in enumerate(sizes):
            made.append(Flavor('%s.s%d' % (family, size), mb, cpus, gb,
                               specs))
    return made


@dataclasses.dataclass(frozen=True)
class Draw:
    """One request of the mix, before it refers to earlier placements."""
    flavor: Flavor
    project: str
    image: str
    zone: str | None
    instances: int
    #: 'group', 'different_host', 'same_host' or None.
    kind: str | None
    #: Which server group (index), for kind 'group'.
    group: int | None
    #: Random draws the hint uses to choose earlier instances.
    pick: float


class RequestMix:
    """Seeded draws of the skewed mix; ``instances`` forces a count."""

    def __init__(self, seed: int, projects: int = 300,
                 instances: int | None = None):
        self.rng = random.Random(seed)
        order = random.Random(seed + 1)
        self.flavors = flavors()
        order.shuffle(self.flavors)
        self.flavor_weights = _zipf_weights(len(self.flavors))
        self.projects = ['project-%04d' % n for n in range(projects)]
        order.shuffle(self.projects)
        self.project_weights = _zipf_weights(projects, 1.2)
        self.images = [name for name, _p in IMAGES]
        self.image_weights = _zipf_weights(len(self.images), 0.8)
        self.instances = instances

    def draw(self) -> Draw:
        rng = self.rng
        flavor = rng.choices(self.flavors, self.flavor_weights)[0]
        image = rng.choices(self.images, self.image_weights)[0]
        zone = rng.choices([z for z, _w in ZONES],
                           [w for _z, w in ZONES])[0]
        if flavor.name.startswith('e1'):
            zone = rng.choice([None, 'az3'])
        elif zone == 'az3':
            zone = None     # only edge flavors fit the edge zone
        if image == 'ubuntu-arm' and zone == 'az1':
            zone = 'az2'
        count = self.instances or rng.choices(
            [n for n, _w in INSTANCES], [w for _n, w in INSTANCES])[0]
        roll = rng.random()
        kind = group = None
        if roll < GROUP_SHARE:
            kind, group = 'group', rng.randrange(GROUPS)
        elif roll < GROUP_SHARE + DIFFERENT_HOST_SHARE:
            kind = 'different_host'
        elif roll < GROUP_SHARE + DIFFERENT_HOST_SHARE + SAME_HOST_SHARE:
            kind = 'same_host'
        return Draw(flavor, rng.choices(self.projects,
                                        self.project_weights)[0],
                    image, zone, count, kind, group, rng.random())

    def draws(self, count: int) -> list:
        return [self.draw() for _ in range(count)]


class MixState:
    """What requests refer back to: the instances placed (for hints) and
    the server groups' members.  Thread safe (callers share it)."""

    def __init__(self, seed: int):
        self._lock = threading.Lock()
        self._uuids = random.Random(seed + 2)
        #: (instance uuid, host) of the last RECENT placements.
        self.recent: list = []
        #: group index -> (uuid, policy, [(instance, host)]).
        self.groups: dict = {}
        self._generation = 0

    def new_uuids(self, count: int) -> list:
        with self._lock:
            return [str(uuid.UUID(int=self._uuids.getrandbits(128),
                                  version=4)) for _ in range(count)]

    def _group(self, index: int) -> tuple:
        found = self.groups.get(index)
        if found is None or len(found[2]) >= GROUP_MAX_MEMBERS:
            self._generation += 1
            policies = [p for p, _w in POLICIES]
            weights = [w for _p, w in POLICIES]
            policy = random.Random(index * 7919 + self._generation).choices(
                policies, weights)[0]
            found = (str(uuid.uuid5(uuid.NAMESPACE_DNS, 'group-%d-%d' % (
                index, self._generation))), policy, [])
            self.groups[index] = found
        return found

    def spec(self, draw: Draw, uuids: list) -> objects.RequestSpec:
        """The request ``draw`` stands for, for instances ``uuids``."""
        properties = dict(IMAGES)[draw.image]
        spec = objects.RequestSpec(
            flavor=draw.flavor.obj(), project_id=draw.project,
            user_id='user-%s' % draw.project[-3:],
            num_instances=len(uuids), availability_zone=draw.zone,
            instance_uuid=uuids[0], is_bfv=properties is None)
        if properties is not None:
            spec.image = objects.ImageMeta(name=draw.image,
                                           properties=dict(properties))
        with self._lock:
            if draw.kind == 'group':
                group_uuid, policy, members = self._group(draw.group)
                spec.instance_group = objects.InstanceGroup(
                    uuid=group_uuid, name='group-%d' % draw.group,
                    policy=policy,
                    members=[u for u, _h in members] + list(uuids),
                    hosts=sorted({h for _u, h in members}))
            elif draw.kind and self.recent:
                chosen = self.recent[int(draw.pick * len(self.recent))]
                spec.scheduler_hints = {draw.kind: [chosen[0]]}
        return spec

    def placed(self, draw: Draw, uuids: list, hosts: list) -> None:
        """Record that ``uuids`` went to ``hosts`` (first choices)."""
        with self._lock:
            pairs = list(zip(uuids, hosts))
            self.recent = (self.recent + pairs)[-RECENT:]
            if draw.kind == 'group':
                self._group(draw.group)[2].extend(pairs)


def prefill(spec: fleet_mod.FleetSpec, seed: int) -> list:
    """``(host, memory_mb, vcpus, disk_gb)`` instances that start on
    the fleet, leaving most edge hosts (and a few others) near full."""
    rng = random.Random(seed + 3)
    made = []
    for host in spec.hosts:
        edge = host.name.startswith('edge')
        if not (edge and rng.random() < 0.8) and rng.random() > 0.03:
            continue
        share = rng.uniform(0.80, 0.95)
        memory = int(host.memory_mb * share)
        made.append((host.name, memory, max(1, int(host.vcpus * share)),
                     int(host.local_gb * share * 0.5)))
    return made
