"""AggregateImagePropertiesIsolation: the guide's myWinAgg example, the
namespace options, and the documented limitation of the Trove blog."""

import pytest

from scheduler.filters import aggregate_image_properties_isolation as mod
from tests.unit.filters.catalogue import aggregate
from tests.unit.filters.catalogue import host
from tests.unit.filters.catalogue import passing
from tests.unit.filters.catalogue import request


@pytest.fixture
def hosts():
    win = aggregate('myWinAgg', hosts=['sf-devel'],
                    availability_zone='zone1', os_distro='windows')
    return [host('sf-devel', aggregates=[win]), host('plain')]


def test_windows_image_boots_on_the_windows_aggregate(hosts):
    spec = request(image_properties={'os_distro': 'windows'})
    assert passing(mod.AggregateImagePropertiesIsolation(), hosts,
                   spec) == ['sf-devel', 'plain']


def test_other_distro_is_kept_off_the_windows_aggregate(hosts):
    spec = request(image_properties={'os_distro': 'ubuntu'})
    flt = mod.AggregateImagePropertiesIsolation()
    assert passing(flt, hosts, spec) == ['plain']
    assert 'os_distro=ubuntu' in flt.rejection_reason(hosts[0], spec)


def test_image_without_the_property_passes_everywhere(hosts):
    # The Trove blog's trap: isolation only works for tagged images.
    spec = request(image_properties={'trove': 'true'})
    assert passing(mod.AggregateImagePropertiesIsolation(), hosts,
                   spec) == ['sf-devel', 'plain']
    assert passing(mod.AggregateImagePropertiesIsolation(), hosts,
                   request()) == ['sf-devel', 'plain']


def test_aggregate_values_are_comma_lists():
    agg = aggregate(os_distro='windows, linux')
    spec = request(image_properties={'os_distro': 'linux'})
    assert passing(mod.AggregateImagePropertiesIsolation(),
                   [host('h', aggregates=[agg])], spec) == ['h']


def test_any_of_several_aggregates_values():
    a1, a2 = aggregate(os_distro='windows'), aggregate(os_distro='linux')
    spec = request(image_properties={'os_distro': 'linux'})
    assert passing(mod.AggregateImagePropertiesIsolation(),
                   [host('h', aggregates=[a1, a2])], spec) == ['h']


def test_namespace_limits_the_compared_keys(conf):
    conf.config(aggregate_image_properties_isolation_namespace='iso',
                aggregate_image_properties_isolation_separator='_',
                group='filter_scheduler')
    agg = aggregate(iso_os='windows', os_distro='windows')
    h = [host('h', aggregates=[agg])]
    flt = mod.AggregateImagePropertiesIsolation()
    # os_distro is outside the namespace: not compared.
    assert passing(flt, h, request(
        image_properties={'os_distro': 'linux'})) == ['h']
    assert passing(flt, h, request(
        image_properties={'iso_os': 'linux'})) == []
    assert passing(flt, h, request(
        image_properties={'iso_os': 'windows'})) == ['h']


def test_skips_requests_without_image():
    flt = mod.AggregateImagePropertiesIsolation()
    assert flt.prepare(request()) is mod.base.SKIP
    assert flt.run_filter_once_per_request
