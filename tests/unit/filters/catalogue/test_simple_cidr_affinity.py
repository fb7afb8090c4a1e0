"""SimpleCIDRAffinityFilter: the guide's 192.168.1.1/24 example."""

import pytest

from scheduler import exception
from scheduler.filters import simple_cidr_affinity as mod
from tests.unit.filters.catalogue import host
from tests.unit.filters.catalogue import passing
from tests.unit.filters.catalogue import request


def _hosts():
    return [host('near', host_ip='192.168.1.20'),
            host('far', host_ip='192.168.2.20'),
            host('unknown'),
            host('v6', host_ip='2001:db8::5')]


@pytest.mark.parametrize('cidr', ['/24', '24'])
def test_cli_and_api_forms(cidr):
    spec = request(hints={'build_near_host_ip': '192.168.1.1',
                          'cidr': cidr})
    flt = mod.SimpleCIDRAffinityFilter()
    assert passing(flt, _hosts(), spec) == ['near']
    assert flt.rejection_reason(_hosts()[1], spec) == (
        'host_ip 192.168.2.20 is not in 192.168.1.0/24')
    assert 'no host_ip' in flt.rejection_reason(_hosts()[2], spec)


def test_cidr_defaults_to_24():
    spec = request(hints={'build_near_host_ip': '192.168.1.1'})
    assert passing(mod.SimpleCIDRAffinityFilter(), _hosts(), spec) == [
        'near']


def test_wider_prefix():
    spec = request(hints={'build_near_host_ip': '192.168.1.1',
                          'cidr': '/16'})
    assert passing(mod.SimpleCIDRAffinityFilter(), _hosts(), spec) == [
        'near', 'far']


def test_ipv6():
    spec = request(hints={'build_near_host_ip': '2001:db8::1',
                          'cidr': '/64'})
    assert passing(mod.SimpleCIDRAffinityFilter(), _hosts(), spec) == [
        'v6']


@pytest.mark.parametrize('hints', [
    {'build_near_host_ip': 'not-an-ip'},
    {'build_near_host_ip': '192.168.1.1', 'cidr': '/99'},
    {'build_near_host_ip': ['192.168.1.1', '10.0.0.1']},
])
def test_bad_hints_are_invalid_requests(hints):
    with pytest.raises(exception.InvalidRequest):
        mod.SimpleCIDRAffinityFilter().filter_all(_hosts(), request(
            hints=hints))


def test_no_hint_skips():
    assert mod.SimpleCIDRAffinityFilter().prepare(request()) is \
        mod.base.SKIP
