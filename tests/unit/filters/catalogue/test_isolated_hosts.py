"""IsolatedHostsFilter: the guide's server1/server2 example, with and
without restrict_isolated_hosts_to_isolated_images."""

import pytest

from scheduler.filters import isolated_hosts as mod
from tests.unit.filters.catalogue import host
from tests.unit.filters.catalogue import passing
from tests.unit.filters.catalogue import request

ISOLATED = '342b492c-128f-4a42-8d3a-c5088cf27d13'
OTHER_ISOLATED = 'ebd267a6-ca86-4d6c-9a0e-bd132d6b7d09'
PLAIN = 'cedef40a-ed67-4d10-800e-17455edce175'


@pytest.fixture
def hosts(conf):
    conf.config(isolated_hosts=['server1', 'server2'],
                isolated_images=[ISOLATED, OTHER_ISOLATED],
                group='filter_scheduler')
    return [host('server1'), host('server2'), host('server3')]


def test_isolated_image_only_on_isolated_hosts(hosts):
    flt = mod.IsolatedHostsFilter()
    spec = request(image_id=ISOLATED)
    assert passing(flt, hosts, spec) == ['server1', 'server2']
    assert 'isolated_images' in flt.rejection_reason(hosts[2], spec)


def test_restricted_hosts_refuse_other_images(hosts):
    assert passing(mod.IsolatedHostsFilter(), hosts,
                   request(image_id=PLAIN)) == ['server3']


def test_volume_backed_kept_off_isolated_hosts_when_restricted(hosts):
    spec = request(is_bfv=True)
    assert passing(mod.IsolatedHostsFilter(), hosts, spec) == ['server3']


def test_unrestricted_hosts_take_anything(hosts, conf):
    conf.config(restrict_isolated_hosts_to_isolated_images=False,
                group='filter_scheduler')
    flt = mod.IsolatedHostsFilter()
    assert passing(flt, hosts, request(image_id=PLAIN)) == [
        'server1', 'server2', 'server3']
    assert passing(flt, hosts, request(is_bfv=True)) == [
        'server1', 'server2', 'server3']
    assert passing(flt, hosts, request(image_id=ISOLATED)) == [
        'server1', 'server2']


def test_no_isolated_images_restrict_still_guards_hosts(conf):
    conf.config(isolated_hosts=['server1'], group='filter_scheduler')
    hosts = [host('server1'), host('server2')]
    assert passing(mod.IsolatedHostsFilter(), hosts,
                   request(image_id=PLAIN)) == ['server2']


def test_nothing_configured_skips():
    flt = mod.IsolatedHostsFilter()
    assert flt.prepare(request(image_id=PLAIN)) is mod.base.SKIP
    assert flt.run_filter_once_per_request
