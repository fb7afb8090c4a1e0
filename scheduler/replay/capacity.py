"""How many more of each flavor fit now, per availability zone and in all.

A copy of the fleet (``scheduler.replay.snapshot``) on an inventory of
this process's own, and the configured driver placing one flavor
again and again until NoValidHost: what the filters, weighers, ratios
and aggregate limits of the configuration allow, not a sum of free
RAM.  Each flavor and each zone starts from a fresh copy.
"""

import sys
import typing
import uuid as uuid_lib

from oslo_config import cfg

from scheduler import exception
from scheduler import filters
from scheduler import objects
from scheduler.replay import limits
from scheduler.replay import runner

CONF = cfg.CONF

#: Instances placed per request while counting (fewer near the end).
BATCH = 50
DEFAULT_LIMIT = limits.DEFAULT_LIMIT


def flavor_spec(name: str, memory_mb: int, vcpus: int, disk_gb: int,
                extra_specs: dict | None = None,
                zone: str | None = None) -> objects.RequestSpec:
    return objects.RequestSpec(
        flavor=objects.Flavor(flavorid=name, name=name, memory_mb=memory_mb,
                              vcpus=vcpus, root_gb=disk_gb, ephemeral_gb=0,
                              swap=0, extra_specs=dict(extra_specs or {})),
        project_id='capacity', user_id='capacity', num_instances=1,
        availability_zone=zone, image=objects.ImageMeta(properties={}))


def count_fits(fleet, spec_of: typing.Callable, limit: int) -> int:
    """Instances of ``spec_of(n)`` placed on a fresh copy of ``fleet``
    before NoValidHost (at most ``limit``)."""
    with runner.private_inventory():
        sim = runner.Replay(fleet)
        placed, batch = 0, BATCH
        while placed < limit:
            size = min(batch, limit - placed)
            spec = spec_of(size)
            uuids = [str(uuid_lib.uuid4()) for _ in range(size)]
            try:
                sim.place(spec, uuids, filters.FilterReport())
            except exception.NoValidHost:
                if size == 1:
                    break
                # Fewer at once: the last ones that fit still count.
                batch = max(1, size // 4)
                continue
            placed += size
        return placed


def fleet_zones(fleet) -> list:
    """The availability zones of the fleet's hosts, sorted: those of
    their zone aggregates, and the default zone
    (``[DEFAULT] default_availability_zone``) when a host is in none,
    as ``AvailabilityZoneFilter`` sees them."""
    zoned: dict = {}
    for agg in fleet.aggregates:
        zone = agg.metadata.get('availability_zone')
        if zone:
            for host in agg.hosts:
                zoned.setdefault(host, set()).add(zone)
    zones: set = set()
    for report in fleet.reports:
        zones |= zoned.get(report.host) or {CONF.default_availability_zone}
    return sorted(zones)


def capacity(fleet, flavors: list, limit: int = DEFAULT_LIMIT,
             progress: typing.TextIO | None = sys.stderr) -> list:
    """Rows ``{flavor, zone, fits, at_least}`` per flavor and zone, and
    one per flavor for the whole fleet (zone ``*``)."""
    zones = fleet_zones(fleet)
    rows = []
    with runner.configured(None):
        for name, mb, cpus, gb, extra in flavors:
            for zone in zones + [None]:
                def spec_of(count, zone=zone):
                    spec = flavor_spec(name, mb, cpus, gb, extra, zone)
                    spec.num_instances = count
                    return spec
                fits = count_fits(fleet, spec_of, limit)
                rows.append({'flavor': name, 'zone': zone or '*',
                             'fits': fits, 'at_least': fits >= limit})
                if progress is not None:
                    progress.write('capacity: %s in %s: %s%d\n' % (
                        name, zone or 'all zones',
                        '>= ' if fits >= limit else '', fits))
                    progress.flush()
    return rows
