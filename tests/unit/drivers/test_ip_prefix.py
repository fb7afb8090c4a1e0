"""The IP-prefix scheduler of the seed, made configurable.

The seed: requests from 10.1.x.x go to hosts named doc*, from 10.2.x.x
to ops*, all others to dev*, and each placement logs
"Request from <ip> scheduled to <host>" at DEBUG.
"""

import logging
import random

import pytest

from scheduler import context
from scheduler.drivers import ip_prefix
from scheduler import exception
from tests.unit import fixtures

FLEET = ('doc1', 'doc2', 'ops1', 'dev1', 'dev2', 'devstack-havana')


def _driver(names=FLEET):
    return ip_prefix.IPScheduler(fixtures.manager_with(
        [fixtures.report(name) for name in names]))


def _ctx(remote_address):
    return context.RequestContext(remote_address=remote_address,
                                  user_id='demo', project_id='demo')


def _place(driver, remote_address, spec=None, uuids=None):
    return driver.select_destinations(_ctx(remote_address),
                                      spec or fixtures.request(), uuids)


def _prefix(ip, conf_map=None, default='dev'):
    return ip_prefix.hostname_prefix_for(
        ip, {'10.1': 'doc', '10.2': 'ops'} if conf_map is None else conf_map,
        default)


@pytest.mark.parametrize('ip, prefix', [
    ('10.1.0.7', 'doc'), ('10.1.255.1', 'doc'),
    ('10.2.3.4', 'ops'),
    ('10.3.0.1', 'dev'), ('192.168.1.10', 'dev'), (None, 'dev'),
    # The seed's startswith() also sends 10.100.x.x to doc*.
    ('10.100.0.7', 'doc'),
])
def test_default_prefix_map_reproduces_the_seed(ip, prefix):
    assert _prefix(ip) == prefix


def test_default_options_are_the_seeds(conf):
    assert dict(conf.conf.ip_scheduler.prefix_map) == {'10.1': 'doc',
                                                       '10.2': 'ops'}
    assert conf.conf.ip_scheduler.default_host_prefix == 'dev'


def test_cidr_keys_match_exactly():
    cidrs = {'10.1.0.0/16': 'doc', '10.2.0.0/16': 'ops'}
    assert _prefix('10.1.0.7', cidrs) == 'doc'
    assert _prefix('10.100.0.7', cidrs) == 'dev'
    assert _prefix('not-an-ip', cidrs) == 'dev'


def test_longest_match_wins():
    prefix_map = {'10.1': 'doc', '10.1.5.0/24': 'lab', '10.0.0.0/8': 'ten'}
    assert _prefix('10.1.5.9', prefix_map) == 'lab'
    assert _prefix('10.1.6.9', prefix_map) == 'doc'
    assert _prefix('10.9.0.1', prefix_map) == 'ten'


def test_places_by_the_callers_address_with_the_seeds_log_line(caplog):
    caplog.set_level(logging.DEBUG, logger='scheduler.drivers.ip_prefix')
    random.seed(7)
    driver = _driver()
    hosts = {_place(driver, '10.1.0.7')[0][0].service_host
             for _ in range(20)}
    assert hosts == {'doc1', 'doc2'}
    assert _place(driver, '10.2.0.1')[0][0].service_host == 'ops1'
    assert 'Request from 10.1.0.7 scheduled to doc' in caplog.text
    assert 'Request from 10.2.0.1 scheduled to ops1' in caplog.text


def test_anyone_else_goes_to_dev_hosts():
    random.seed(8)
    driver = _driver()
    hosts = {_place(driver, '172.16.0.1')[0][0].service_host
             for _ in range(20)}
    assert hosts == {'dev1', 'dev2', 'devstack-havana'}


def test_configured_map(conf):
    conf.config(prefix_map={'192.168.0.0/16': 'ops'},
                default_host_prefix='doc', group='ip_scheduler')
    driver = _driver()
    assert _place(driver, '192.168.3.3')[0][0].service_host == 'ops1'
    assert _place(driver, '10.2.0.1')[0][0].service_host.startswith('doc')


def test_no_host_with_the_prefix_is_no_valid_host():
    driver = _driver(('dev1',))
    with pytest.raises(exception.NoValidHost) as info:
        _place(driver, '10.2.0.1')
    assert "prefix 'ops'" in str(info.value)


def test_no_host_up_at_all():
    with pytest.raises(exception.NoValidHost) as info:
        _place(_driver(()), '10.1.0.1')
    assert 'Is the appropriate service running?' in str(info.value)


def test_ignore_hosts_and_claims():
    driver = _driver()
    spec = fixtures.request(memory_mb=1024, num_instances=2,
                            ignore_hosts=['doc1'])
    selections = _place(driver, '10.1.0.7', spec,
                        [fixtures.uuid(1), fixtures.uuid(2)])
    assert [alts[0].service_host for alts in selections] == ['doc2', 'doc2']
    assert [alts[0].instance_uuid for alts in selections] == \
        [fixtures.uuid(1), fixtures.uuid(2)]
    assert driver.host_manager.get_host_state('doc2').free_ram_mb == 2048
