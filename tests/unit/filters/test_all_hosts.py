"""AllHostsFilter: the no-op filter."""

from scheduler.filters import all_hosts
from tests.unit import fixtures


def test_every_host_passes_even_a_full_disabled_one():
    hosts = fixtures.hosts(
        fixtures.report('h1'),
        fixtures.report('full', memory_mb=0, local_gb=0, vcpus=0),
        fixtures.report('off', disabled=True))
    flt = all_hosts.AllHostsFilter()
    spec = fixtures.request(memory_mb=1 << 20)
    assert flt.filter_all(hosts, spec) == hosts
    assert all(flt.host_passes(h, spec) for h in hosts)


def test_runs_once_per_request():
    assert not all_hosts.AllHostsFilter().run_filter_for_index(1)
