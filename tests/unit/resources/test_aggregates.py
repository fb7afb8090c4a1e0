"""Aggregate metadata has one parser: the smallest value, warned once."""

import logging

from scheduler.resources import aggregates
from scheduler.weights import base
from tests.unit.filters.catalogue import aggregate
from tests.unit.filters.catalogue import host


def test_no_value_one_value_several_values():
    assert aggregates.smallest_value([], 'k', 7, int) == 7
    assert aggregates.smallest_value(['3'], 'k', 7, int) == 3
    assert aggregates.smallest_value(['3', ' 2 '], 'k', 7, int) == 2
    assert aggregates.smallest_value(['1.5', '0.5'], 'k', 1.0) == 0.5


def test_an_unreadable_value_means_the_default_as_in_nova():
    # nova's validate_num_values raises and its callers use the default.
    assert aggregates.smallest_value(['3', 'lots'], 'k2', 7, int) == 7
    assert aggregates.smallest_value(['1.5'], 'k2', 7, int) == 7


def test_warns_once_per_aggregate_change_not_per_host(caplog):
    caplog.set_level(logging.INFO, logger='scheduler.resources.aggregates')
    aggs = [aggregate('a', ram_weight_multiplier='2.0'),
            aggregate('b', ram_weight_multiplier='0.5')]
    hosts = [host('h%d' % i, aggregates=aggs) for i in range(200)]
    for _request in range(3):
        for h in hosts:
            assert base.aggregate_override(h, 'ram_weight_multiplier',
                                           1.0) == 0.5
    lines = [r for r in caplog.records
             if 'ram_weight_multiplier' in r.getMessage()]
    assert len(lines) == 1
    # The aggregates change: one new line.
    changed = [aggregate('a', ram_weight_multiplier='3.0'),
               aggregate('b', ram_weight_multiplier='0.25')]
    for h in [host('h%d' % i, aggregates=changed) for i in range(50)]:
        base.aggregate_override(h, 'ram_weight_multiplier', 1.0)
    lines = [r for r in caplog.records
             if 'ram_weight_multiplier' in r.getMessage()]
    assert len(lines) == 2


def test_allocation_ratios_zones_and_multipliers_share_the_parser():
    aggs = [aggregate('a', ram_allocation_ratio='1.5',
                      availability_zone='az1'),
            aggregate('b', ram_allocation_ratio='1.2')]
    h = host('h', aggregates=aggs)
    assert aggregates.ratio_overrides(aggs) == {'ram': 1.2}
    assert h.allocation_ratio('ram') == 1.2
    assert h.availability_zones == {'az1'}
    assert aggregates.zones_of(aggs) == {'az1'}


def test_split_values():
    assert aggregates.split_values(['a, b', 'c,,']) == {'a', 'b', 'c'}
