"""Every registered filter and weigher loads, has the right base and a
docstring, and ``all_filters()`` / ``all_weighers()`` return them."""

import importlib.metadata

from oslo_config import cfg
import pytest

from scheduler import filters
from scheduler.filters import base as filter_base
from scheduler import loader
from scheduler import weights
from scheduler.weights import base as weight_base
from tests.unit.filters.catalogue import host
from tests.unit.filters.catalogue import request

CONF = cfg.CONF

#: What the catalogue adds; the core plugins are registered too.
CATALOGUE_FILTERS = {
    'AggregateImagePropertiesIsolation', 'AggregateInstanceExtraSpecsFilter',
    'AggregateIoOpsFilter', 'AggregateMultiTenancyIsolation',
    'AggregateNumInstancesFilter', 'AggregateTypeAffinityFilter',
    'DifferentHostFilter', 'IoOpsFilter', 'IsolatedHostsFilter',
    'JsonFilter', 'MetricsFilter', 'NUMATopologyFilter',
    'NumInstancesFilter', 'PciPassthroughFilter', 'RetryFilter',
    'SameHostFilter', 'ServerGroupAffinityFilter',
    'ServerGroupAntiAffinityFilter', 'SimpleCIDRAffinityFilter',
}
CATALOGUE_WEIGHERS = {
    'BuildFailureWeigher', 'HypervisorVersionWeigher', 'IoOpsWeigher',
    'MetricsWeigher', 'NumInstancesWeigher', 'PCIWeigher',
    'ServerGroupSoftAffinityWeigher', 'ServerGroupSoftAntiAffinityWeigher',
}


def _entry_points(namespace: str) -> list:
    return list(importlib.metadata.entry_points(group=namespace))


@pytest.mark.parametrize('namespace, names', [
    (loader.FILTER_NAMESPACE, CATALOGUE_FILTERS),
    (loader.WEIGHER_NAMESPACE, CATALOGUE_WEIGHERS),
])
def test_catalogue_is_registered(namespace, names):
    registered = {ep.name for ep in _entry_points(namespace)}
    assert names <= registered, sorted(names - registered)


@pytest.mark.parametrize('ep', _entry_points(loader.FILTER_NAMESPACE),
                         ids=lambda ep: ep.name)
def test_filter_entry_point(ep):
    cls = ep.load()
    assert cls.__name__ == ep.name
    assert issubclass(cls, filter_base.BaseHostFilter)
    assert (cls.__doc__ or '').strip()
    module = importlib.import_module(cls.__module__)
    assert (module.__doc__ or '').strip()
    assert cls in filters.all_filters()


@pytest.mark.parametrize('ep', _entry_points(loader.WEIGHER_NAMESPACE),
                         ids=lambda ep: ep.name)
def test_weigher_entry_point(ep):
    cls = ep.load()
    assert cls.__name__ == ep.name
    assert issubclass(cls, weight_base.BaseHostWeigher)
    assert (cls.__doc__ or '').strip()
    assert cls in weights.all_weighers()
    weigher = cls()
    # The multiplier resolves (its option exists) for the default and
    # for a host, and a plain request weighs every candidate.
    assert isinstance(weigher.weight_multiplier(None), float)
    hosts = [host('a'), host('b')]
    assert len(weigher.weight_multipliers(hosts)) == 2
    weighed = [weight_base.WeighedHost(h) for h in hosts]
    assert len(weigher.weigh_objects(weighed, request())) == 2


def test_catalogue_multipliers_are_filter_scheduler_options():
    for cls in weights.all_weighers():
        if cls.__name__ in CATALOGUE_WEIGHERS - {'MetricsWeigher'}:
            assert cls.multiplier_option.endswith('_weight_multiplier')
            assert cls.multiplier_option in CONF.filter_scheduler


def test_all_filters_returns_every_entry_point():
    names = {cls.__name__ for cls in filters.all_filters()}
    assert names == {ep.name for ep in
                     _entry_points(loader.FILTER_NAMESPACE)}


def test_every_catalogue_filter_handles_a_plain_request():
    # A request asking for nothing special must not trip any filter.
    spec = request()
    for cls in filters.all_filters():
        if cls.__name__ in CATALOGUE_FILTERS:
            assert cls().filter_all([host('a')], spec) is not None
