"""NumInstancesWeigher: off by default, packs or spreads."""

from scheduler.weights import num_instances as mod
from tests.unit.filters.catalogue import host
from tests.unit.filters.catalogue import request
from tests.unit.weights.catalogue import contributions
from tests.unit.weights.catalogue import ranking


def _hosts():
    return [host('few', num_instances=1), host('many', num_instances=9),
            host('some', num_instances=4)]


def test_does_nothing_by_default():
    assert set(contributions(mod.NumInstancesWeigher(), _hosts(),
                             request()).values()) == {0.0}


def test_positive_packs(conf):
    conf.config(num_instances_weight_multiplier=1.0,
                group='filter_scheduler')
    assert ranking(mod.NumInstancesWeigher(), _hosts(), request()) == [
        'many', 'some', 'few']


def test_negative_spreads(conf):
    conf.config(num_instances_weight_multiplier=-1.0,
                group='filter_scheduler')
    assert ranking(mod.NumInstancesWeigher(), _hosts(), request()) == [
        'few', 'some', 'many']
