"""The resource filters' forms agree at the edges of their rules.

The property tests (test_columns.py, test_plugin_forms.py) draw random
fleets, which seldom reach an edge: DiskFilter's vector form without
its "no overcommit against itself" guard passed every unit test
(issue 24, mutation pass).  Here each edge is a host of its own, and
``plugin_testing.check_filter`` compares the forms on it; the per-host
answers are stated too, so that the comparison is not between two
forms that both let everything through.
"""

import pytest

from scheduler.filters import compute
from scheduler.filters import disk
from scheduler.filters import ram
from scheduler.filters import vcpu
from scheduler import plugin_testing
from scheduler.resources import liveness
from tests.unit import fixtures


@pytest.fixture(autouse=True)
def _clock():
    yield
    liveness.set_clock(None)


def _check(flt, reports, spec, passing):
    views = fixtures.hosts(*reports)
    assert [v.host for v in views if flt.host_passes(v, spec)] == passing
    plugin_testing.check_filter(flt, views, spec)


def test_disk_forms_agree_at_the_edges():
    gb = 1024
    spec = fixtures.request(root_gb=20)
    _check(disk.DiskFilter(), [
        fixtures.report('exact', local_gb=20),
        fixtures.report('short', local_gb=20, local_gb_used=1),
        # Room at the ratio, but larger than the whole disk: refused.
        fixtures.report('small-disk', local_gb=19,
                        disk_allocation_ratio=10.0),
        fixtures.report('overcommitted', local_gb=20, local_gb_used=20,
                        disk_allocation_ratio=2.0),
        fixtures.report('measured-short', local_gb=100,
                        disk_available_least=19),
        fixtures.report('measured-exact', local_gb=100,
                        disk_available_least=20),
    ], spec, ['exact', 'overcommitted', 'measured-exact'])
    assert 20 * gb == disk.DiskFilter().prepare(spec)


def test_ram_forms_agree_at_the_edges():
    spec = fixtures.request(memory_mb=2048)
    _check(ram.RamFilter(), [
        fixtures.report('exact', memory_mb=2048),
        fixtures.report('short', memory_mb=2048, memory_mb_used=1),
        fixtures.report('small-ram', memory_mb=2047,
                        ram_allocation_ratio=10.0),
        fixtures.report('overcommitted', memory_mb=2048,
                        memory_mb_used=2048, ram_allocation_ratio=2.0),
    ], spec, ['exact', 'overcommitted'])


def test_vcpu_forms_agree_at_the_edges():
    spec = fixtures.request(vcpus=4)
    _check(vcpu.VCPUFilter(), [
        fixtures.report('exact', vcpus=4, cpu_allocation_ratio=1.0),
        fixtures.report('short', vcpus=4, vcpus_used=1,
                        cpu_allocation_ratio=1.0),
        fixtures.report('few-cpus', vcpus=3, cpu_allocation_ratio=16.0),
        fixtures.report('overcommitted', vcpus=4, vcpus_used=4,
                        cpu_allocation_ratio=2.0),
    ], spec, ['exact', 'overcommitted'])


def test_compute_forms_agree_on_down_disabled_and_forced_hosts(conf):
    conf.config(service_down_time=60, group='scheduler')
    reports = [fixtures.report('up'), fixtures.report('stale'),
               fixtures.report('disabled'), fixtures.report('forced'),
               fixtures.report('edge')]
    views = fixtures.hosts(*reports)
    by_name = {v.host: v for v in views}
    now = max(v.received_at for v in views) + 1000.0
    for view in views:
        view.received_at = now - 10.0
    by_name['stale'].received_at = now - 61.0
    by_name['edge'].received_at = now - 60.0
    by_name['disabled'].disabled = True
    by_name['forced'].forced_down = True
    liveness.set_clock(lambda: now)
    flt = compute.ComputeFilter()
    spec = fixtures.request()
    assert [v.host for v in views if flt.host_passes(v, spec)] == [
        'up', 'edge']
    plugin_testing.check_filter(flt, views, spec)
