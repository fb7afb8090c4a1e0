"""MetricsWeigher: the guide's name1=1.0, name2=-1.0 setting."""

import pytest

from scheduler import exception
from scheduler.weights import metrics as mod
from tests.unit.filters.catalogue import aggregate
from tests.unit.filters.catalogue import host
from tests.unit.filters.catalogue import request
from tests.unit.weights.catalogue import contributions
from tests.unit.weights.catalogue import ranking


@pytest.fixture
def setting(conf):
    conf.config(weight_setting=['name1=1.0', 'name2=-1.0'],
                group='metrics')


def _hosts():
    return [host('a', metrics={'name1': 10.0, 'name2': 2.0}),
            host('b', metrics={'name1': 10.0, 'name2': 8.0}),
            host('c', metrics={'name1': 20.0, 'name2': 1.0})]


def test_weighted_sum(setting):
    weigher = mod.MetricsWeigher()
    weighed = [mod.base.WeighedHost(h) for h in _hosts()]
    assert weigher.weigh_objects(weighed, request()) == [8.0, 2.0, 19.0]
    assert ranking(weigher, _hosts(), request()) == ['c', 'a', 'b']


def test_negative_multiplier(setting, conf):
    conf.config(weight_multiplier=-1.0, group='metrics')
    assert ranking(mod.MetricsWeigher(), _hosts(), request()) == [
        'b', 'a', 'c']


def test_missing_required_metric_is_a_weigher_configuration_error(setting):
    # A configuration problem, named as such: not NoValidHost.
    hosts = _hosts() + [host('d', metrics={'name1': 1.0})]
    with pytest.raises(exception.WeigherConfigurationError) as err:
        ranking(mod.MetricsWeigher(), hosts, request())
    assert not isinstance(err.value, exception.NoValidHost)
    assert err.value.kwargs['weigher'] == 'MetricsWeigher'
    assert 'MetricsWeigher' in str(err.value)
    assert 'name2' in str(err.value) and 'MetricsFilter' in str(err.value)


def test_missing_metric_weighs_unavailable_when_not_required(setting,
                                                             conf):
    conf.config(required=False, weight_of_unavailable=-50.0,
                group='metrics')
    hosts = _hosts() + [host('d', metrics={'name1': 100.0})]
    weighed = [mod.base.WeighedHost(h) for h in hosts]
    assert mod.MetricsWeigher().weigh_objects(weighed, request())[-1] == \
        -50.0
    assert ranking(mod.MetricsWeigher(), hosts, request())[-1] == 'd'


def test_disabled_weigher_ignores_missing_metrics(setting, conf):
    conf.config(weight_multiplier=0.0, group='metrics')
    hosts = [host('d')]
    assert ranking(mod.MetricsWeigher(), hosts, request()) == ['d']


def test_aggregate_override(setting):
    agg = aggregate(metrics_weight_multiplier='0.5')
    hosts = [host('a', metrics={'name1': 1.0, 'name2': 0.0},
                  aggregates=[agg]),
             host('b', metrics={'name1': 0.0, 'name2': 0.0})]
    assert contributions(mod.MetricsWeigher(), hosts, request()) == {
        'a': 0.5, 'b': 0.0}


def test_no_setting_weighs_nothing():
    assert set(contributions(mod.MetricsWeigher(), [host('x')],
                             request()).values()) == {0.0}
