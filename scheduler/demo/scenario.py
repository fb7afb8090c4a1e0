"""What the demo asks of each driver, and how it checks the answers."""

import dataclasses
import time
import typing

from oslo_config import cfg

from scheduler import objects
from scheduler.simulator import fleet as fleet_mod


CONF = cfg.CONF

DRIVERS = ('filter_scheduler', 'chance_scheduler', 'ip_scheduler')

#: The demo's fleet, in the fleet file format (written out for the
#: simulator process in RabbitMQ mode).
DEMO_FLEET = {
    'aggregates': {'az1': {'availability_zone': 'az1'},
                   'az2': {'availability_zone': 'az2'},
                   'ssd': {'disk_type': 'ssd'}},
    'groups': [
        {'prefix': 'doc', 'count': 6, 'memory_mb': 32768, 'vcpus': 8,
         'local_gb': 400, 'availability_zone': 'az1'},
        {'prefix': 'doc', 'count': 4, 'memory_mb': 32768, 'vcpus': 8,
         'local_gb': 400, 'availability_zone': 'az2'},
        {'prefix': 'ops', 'count': 5, 'memory_mb': 65536, 'vcpus': 16,
         'local_gb': 800, 'availability_zone': 'az1',
         'aggregates': ['ssd']},
        {'prefix': 'ops', 'count': 5, 'memory_mb': 65536, 'vcpus': 16,
         'local_gb': 800, 'availability_zone': 'az2',
         'aggregates': ['ssd']},
        {'prefix': 'dev', 'count': 10, 'memory_mb': 16384, 'vcpus': 4,
         'local_gb': 200, 'ram_allocation_ratio': 1.5,
         'availability_zone': 'az1'},
        {'prefix': 'dev', 'count': 10, 'memory_mb': 16384, 'vcpus': 4,
         'local_gb': 200, 'ram_allocation_ratio': 1.5,
         'availability_zone': 'az2'},
        {'prefix': 'big', 'count': 3, 'memory_mb': 262144, 'vcpus': 64,
         'local_gb': 4000, 'availability_zone': 'az1'},
        {'prefix': 'big', 'count': 3, 'memory_mb': 262144, 'vcpus': 64,
         'local_gb': 4000, 'availability_zone': 'az2'},
        {'prefix': 'arm', 'count': 4, 'memory_mb': 65536, 'vcpus': 32,
         'local_gb': 1000, 'architecture': 'aarch64',
         'availability_zone': 'az2'},
    ],
}

#: name -> (memory_mb, vcpus, root_gb, ephemeral_gb, swap MiB)
FLAVORS = {
    'm1.small': (2048, 1, 20, 0, 0),
    'm1.medium': (4096, 2, 40, 0, 1024),
    'm1.large': (16384, 8, 160, 0, 0),
    'x.huge': (1048576, 8, 20, 0, 0),
}

SELECT, RUN, TERMINATE = 'select', 'run', 'terminate'
PLACED, NO_VALID_HOST, REFUSED = 'placed', 'NoValidHost', 'refused'

#: Seconds to wait for the computes to act on a cast.
CAST_TIMEOUT = 20
#: Seconds to wait for the scheduler to know the whole fleet.
READY_TIMEOUT = 60

Check = typing.Callable[[str, fleet_mod.FleetSpec], typing.Optional[str]]


class DemoError(Exception):
    """A part of the demo could not start or stop."""


# -- the scenario -----------------------------------------------------------

def in_zone(zone: str) -> Check:
    def check(host, spec):
        actual = spec.availability_zone(host)
        return None if actual == zone else 'in zone %s, not %s' % (actual,
                                                                   zone)
    return check


def named(prefix: str) -> Check:
    def check(host, spec):
        return None if host.startswith(prefix + '-') else \
            'host name does not start with %s-' % prefix
    return check


def architecture(arch: str) -> Check:
    def check(host, spec):
        actual = spec.host(host).architecture
        return None if actual == arch else 'architecture %s' % actual
    return check


def vcpus_at_least(count: int) -> Check:
    def check(host, spec):
        actual = spec.host(host).vcpus
        return None if actual >= count else 'has only %d vCPUs' % actual
    return check


@dataclasses.dataclass
class Step:
    """One request of the scenario and what the driver should make of it."""

    label: str
    flavor: str = 'm1.small'
    num: int = 1
    how: str = SELECT
    zone: str | None = None
    arch: str | None = None
    remote: str | None = None
    admin: bool = False
    alternates: bool = False
    expect_alternates: bool = False
    ignore_prefix: str | None = None
    outcome: str = PLACED
    #: Text the NoValidHost message must contain.
    reason_has: str = ''
    check: Check | None = None
    note: str = ''


def scenario(driver: str) -> list:
    """The requests for ``driver``: each driver is held to what it does."""
    if driver == 'filter_scheduler':
        return [
            Step('m1.small'),
            Step('m1.medium (1 GiB swap)', 'm1.medium'),
            Step('m1.large: 8 vCPUs', 'm1.large', check=vcpus_at_least(8)),
            Step('m1.small in az2', zone='az2', check=in_zone('az2')),
            Step('3 x m1.small, alternates', num=3, alternates=True,
                 expect_alternates=True),
            Step('aarch64 image', arch='aarch64',
                 check=architecture('aarch64')),
            Step('1 TiB of RAM, as admin', 'x.huge', admin=True,
                 outcome=NO_VALID_HOST, reason_has='Filter results'),
            Step('2 x m1.medium, schedule_run_instance', 'm1.medium', num=2,
                 how=RUN),
            Step('terminate them', how=TERMINATE),
        ]
    if driver == 'chance_scheduler':
        return [
            Step('m1.small'),
            Step('m1.medium (1 GiB swap)', 'm1.medium'),
            Step('m1.large: 8 vCPUs', 'm1.large',
                 note='any host: no resource check'),
            Step('m1.small in az2', zone='az2',
                 note='any zone: the chance driver ignores zones'),
            Step('3 x m1.small, alternates', num=3, alternates=True,
                 expect_alternates=True),
            Step('1 TiB of RAM', 'x.huge',
                 note='chosen all the same: no resource check'),
            Step('1 TiB of RAM, schedule_run_instance', 'x.huge', how=RUN,
                 outcome=REFUSED),
            Step('2 x m1.medium, schedule_run_instance', 'm1.medium', num=2,
                 how=RUN),
            Step('terminate them', how=TERMINATE),
        ]
    if driver == 'ip_scheduler':
        return [
            Step('m1.small from 10.1.0.5', remote='10.1.0.5',
                 check=named('doc')),
            Step('m1.small from 10.2.7.9', remote='10.2.7.9',
                 check=named('ops')),
            Step('m1.medium from 192.0.2.10', 'm1.medium',
                 remote='192.0.2.10', check=named('dev')),
            Step('3 x m1.small from 10.1.3.3', num=3, remote='10.1.3.3',
                 alternates=True, check=named('doc'),
                 note='no alternates from this driver'),
            Step('from 192.0.2.10, every dev host ignored',
                 remote='192.0.2.10', ignore_prefix='dev',
                 outcome=NO_VALID_HOST, reason_has="prefix 'dev'"),
            Step('2 x m1.medium from 10.2.0.8, schedule_run_instance',
                 'm1.medium', num=2, remote='10.2.0.8', how=RUN,
                 check=named('ops')),
            Step('terminate them', how=TERMINATE),
        ]
    raise ValueError('no scenario for driver %r' % driver)


def make_flavor(name: str) -> objects.Flavor:
    memory_mb, vcpus, root_gb, ephemeral_gb, swap = FLAVORS[name]
    return objects.Flavor(flavorid=name, name=name, memory_mb=memory_mb,
                          vcpus=vcpus, root_gb=root_gb,
                          ephemeral_gb=ephemeral_gb, swap=swap,
                          extra_specs={})


def wait_for(predicate: typing.Callable[[], bool], timeout: float,
             interval: float = 0.05) -> bool:
    """Poll ``predicate`` until it holds or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


# -- what the scheduler and the computes know -------------------------------
