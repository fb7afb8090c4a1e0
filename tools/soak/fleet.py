"""The soak's fleet: three kinds of simulated hosts, and what each may hold.

* ``big``: roomy hosts in zone ``az1`` with CPU overcommit;
* ``small``: small hosts in zone ``az2``, where RAM binds first;
* ``thin``: hosts whose declared disk is large (and overcommitted) but
  whose real free disk, ``disk_available_least``, is small: there the
  real disk binds, as on a compute whose images share a thin pool.

``capacities()`` is what the invariant checker holds each node to:
totals times allocation ratios, and the real disk where it is reported.
The fleet file is the one truth for both the simulator and the checker.
"""

import json

from scheduler.simulator import fleet as fleet_mod
from tools.soak import invariants

#: (prefix, share of the hosts, group keys of the fleet file).
KINDS = (
    ('big', 1 / 3, {'memory_mb': 16384, 'vcpus': 16, 'local_gb': 1000,
                    'ram_allocation_ratio': 1.0,
                    'cpu_allocation_ratio': 4.0,
                    'disk_allocation_ratio': 1.0,
                    'availability_zone': 'az1'}),
    ('small', 0.4, {'memory_mb': 8192, 'vcpus': 8, 'local_gb': 400,
                    'ram_allocation_ratio': 1.0,
                    'cpu_allocation_ratio': 2.0,
                    'disk_allocation_ratio': 1.0,
                    'availability_zone': 'az2'}),
    # Real free disk far below the totals, and no disk over-commit:
    # the compute's disk_available_least is what binds.
    ('thin', None, {'memory_mb': 32768, 'vcpus': 32, 'local_gb': 2000,
                    'ram_allocation_ratio': 1.0,
                    'cpu_allocation_ratio': 2.0,
                    'disk_allocation_ratio': 1.0,
                    'disk_available_least': 120,
                    'availability_zone': 'az1'}),
)

ZONES = ('az1', 'az2')


def fleet_document(hosts: int) -> dict:
    """The fleet file for ``hosts`` hosts of the three kinds."""
    groups = []
    left = hosts
    for prefix, share, keys in KINDS:
        count = left if share is None else max(1, int(hosts * share))
        left -= count
        groups.append(dict(keys, prefix=prefix, count=count))
    return {'_comment': 'written by tools/soak', 'groups': groups}


def write(path: str, hosts: int) -> fleet_mod.FleetSpec:
    """Write the fleet file; return it as the simulator will read it."""
    with open(path, 'w') as f:
        json.dump(fleet_document(hosts), f, indent=1)
    return fleet_mod.load(path)


def capacities(spec: fleet_mod.FleetSpec) -> dict:
    """``{(host, node): Capacity}``: the most each node may hold.

    Real disk as nova's DiskFilter and the claim count it: what is
    really free, plus the over-commit the disk ratio allows beyond the
    totals (none at a ratio of 1.0).
    """
    out = {}
    for host in spec.hosts:
        real = host.disk_available_least
        if real is not None:
            real += host.local_gb * (host.disk_allocation_ratio - 1)
        out[(host.name, host.name)] = invariants.Capacity(
            memory_mb=host.memory_mb * host.ram_allocation_ratio,
            vcpus=host.vcpus * host.cpu_allocation_ratio,
            disk_gb=host.local_gb * host.disk_allocation_ratio,
            real_disk_gb=real)
    return out
