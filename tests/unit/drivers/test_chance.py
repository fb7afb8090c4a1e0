"""The chance scheduler: any up host, at random; no resource checks."""

import random
import time

import pytest

from scheduler.drivers import chance
from scheduler import exception
from tests.unit import fixtures


def _driver(*reports):
    reports = reports or (fixtures.report('h1'), fixtures.report('h2'),
                          fixtures.report('h3'))
    return chance.ChanceScheduler(fixtures.manager_with(reports))


def _place(driver, spec=None, uuids=None, alternates=False):
    return driver.select_destinations(None, spec or fixtures.request(),
                                      uuids, return_alternates=alternates)


def test_places_on_a_random_up_host_and_claims_it():
    random.seed(3)
    driver = _driver()
    picked = set()
    for n in range(30):
        selections = _place(driver, uuids=[fixtures.uuid(n)])
        picked.add(selections[0][0].service_host)
    assert picked == {'h1', 'h2', 'h3'}
    used = sum(s.memory_mb_used
               for s in driver.host_manager.get_all_host_states())
    assert used == 30 * 512


def test_checks_no_resources():
    driver = _driver(fixtures.report('tiny', memory_mb=1))
    assert _place(driver, fixtures.request(memory_mb=4096))[0][0] \
        .service_host == 'tiny'


def test_skips_down_and_disabled_hosts(conf):
    conf.config(service_down_time=60, group='scheduler')
    driver = _driver(fixtures.report('up'), fixtures.report('off',
                                                            disabled=True),
                     fixtures.report('silent'))
    driver.host_manager.get_host_state('silent').received_at = \
        time.time() - 120
    random.seed(4)
    assert {_place(driver)[0][0].service_host for _ in range(10)} == {'up'}


def test_ignore_and_force_hosts():
    random.seed(5)
    driver = _driver()
    assert {_place(driver, fixtures.request(ignore_hosts=['h1', 'h2']))[0][0]
            .service_host for _ in range(5)} == {'h3'}
    assert {_place(driver, fixtures.request(force_hosts=['h2']))[0][0]
            .service_host for _ in range(5)} == {'h2'}


def test_one_selection_per_instance_and_distinct_alternates(conf):
    conf.config(max_attempts=2, group='scheduler')
    random.seed(6)
    selections = _place(_driver(), fixtures.request(num_instances=3),
                        [fixtures.uuid(n) for n in (1, 2, 3)],
                        alternates=True)
    assert len(selections) == 3
    for n, alts in enumerate(selections, start=1):
        assert len(alts) == 2
        assert len({s.service_host for s in alts}) == 2
        assert {s.instance_uuid for s in alts} == {fixtures.uuid(n)}


def test_no_up_host_is_no_valid_host():
    with pytest.raises(exception.NoValidHost) as info:
        _place(chance.ChanceScheduler(fixtures.manager_with()))
    assert 'Is the appropriate service running?' in str(info.value)


def test_host_names_match_in_any_case_as_in_nova():
    random.seed(6)
    driver = _driver()
    assert {_place(driver, fixtures.request(ignore_hosts=['H1', 'h2']))[0][0]
            .service_host for _ in range(5)} == {'h3'}
    assert {_place(driver, fixtures.request(force_hosts=['H2']))[0][0]
            .service_host for _ in range(5)} == {'h2'}
