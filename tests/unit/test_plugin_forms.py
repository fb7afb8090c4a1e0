"""``scheduler.plugin_testing``: every in-tree filter and weigher says
the same per host and over columns, on random fleets and requests; and
the checks catch a plugin whose forms disagree."""

from hypothesis import HealthCheck
from hypothesis import Phase
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import numpy as np
import pytest

from scheduler import filters
from scheduler.filters import ram
from scheduler import plugin_testing
from scheduler.resources import liveness
from scheduler import weights
from scheduler.weights import ram as ram_weigher
from tests.unit import fixtures
from tests.unit import test_columns


@pytest.fixture(autouse=True)
def _clock():
    yield
    liveness.set_clock(None)


def _views(fleet):
    reports, ages, aggregates = fleet
    return test_columns._manager(reports, ages,
                                 aggregates).get_all_host_states()


@settings(max_examples=60, deadline=None, derandomize=True,
          phases=[Phase.explicit, Phase.reuse, Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(fleet=test_columns.fleets(), data=st.data())
def test_every_in_tree_plugin_agrees_with_itself(conf, fleet, data):
    test_columns._configure(conf, data.draw)
    views = _views(fleet)
    spec = data.draw(test_columns.requests(sorted({v.host for v in views})))
    for cls in filters.all_filters():
        if cls.__module__.startswith('scheduler.'):
            plugin_testing.check_filter(cls(), views, spec)
    for cls in weights.all_weighers():
        if cls.__module__.startswith('scheduler.'):
            plugin_testing.check_weigher(cls(), views, spec)


class _OffByOne(ram.RamFilter):
    """A vector form that lets through a host one MB short."""

    def passes(self, host_state, requested):
        return super().passes(host_state, requested)

    def filter_columns(self, columns, requested):
        return columns.usable_ram_mb >= requested - 1


class _Rounded(ram_weigher.RAMWeigher):
    """A vector form that rounds what the per-host form does not."""

    def _weigh_object(self, host_state, spec_obj):
        return super()._weigh_object(host_state, spec_obj)

    def weigh_columns(self, columns, spec_obj):
        return np.round(columns.free_ram_mb, -3)


def test_a_vector_form_that_disagrees_is_caught():
    views = fixtures.hosts(
        fixtures.report('short', memory_mb=1024, memory_mb_used=513),
        fixtures.report('roomy', memory_mb=4096))
    spec = fixtures.request(memory_mb=512)
    with pytest.raises(AssertionError, match='short/short'):
        plugin_testing.check_filter(_OffByOne(), views, spec)
    plugin_testing.check_filter(ram.RamFilter(), views, spec)
    with pytest.raises(AssertionError, match='raw weights'):
        plugin_testing.check_weigher(_Rounded(), views, spec)
    plugin_testing.check_weigher(ram_weigher.RAMWeigher(), views, spec)


class _Inconsistent(filters.BaseHostFilter):
    """Passes hosts by name, but filters them all out as a list."""

    def host_passes(self, host_state, spec_obj):
        return True

    def filter_all(self, host_states, spec_obj):
        return []


def test_a_filter_all_that_disagrees_with_host_passes_is_caught():
    views = fixtures.hosts(fixtures.report('a'))
    with pytest.raises(AssertionError, match='filter_all'):
        plugin_testing.check_filter(_Inconsistent(), views,
                                    fixtures.request())


def test_a_rejection_says_why():
    host = fixtures.host('full', memory_mb=1024, memory_mb_used=1024)
    verdict = ram.RamFilter().passes(host, 512)
    assert not verdict
    assert isinstance(verdict, filters.Rejected)
    assert str(verdict).startswith('usable RAM 0 MB < requested 512 MB')


class _OneAnswer(ram.RamFilter):
    """A vector form that answers once for every host: the scheduler
    would take it for the first host's answer alone."""

    def passes(self, host_state, requested):
        return super().passes(host_state, requested)

    def filter_columns(self, columns, requested):
        return np.array([True])


class _ShortWeights(ram_weigher.RAMWeigher):
    """A vector form that weighs the first host only."""

    def _weigh_object(self, host_state, spec_obj):
        return super()._weigh_object(host_state, spec_obj)

    def weigh_columns(self, columns, spec_obj):
        return columns.free_ram_mb[:1]


def test_a_vector_form_of_the_wrong_shape_is_caught_even_where_it_agrees():
    # Every host passes, and both have the same free RAM: broadcast, the
    # one answer agrees with the per-host form, yet the scheduler refuses
    # it (plugin_outputs).
    views = fixtures.hosts(fixtures.report('a'), fixtures.report('b'))
    spec = fixtures.request(memory_mb=512)
    with pytest.raises(AssertionError, match='one per host'):
        plugin_testing.check_filter(_OneAnswer(), views, spec)
    with pytest.raises(AssertionError, match='one per host'):
        plugin_testing.check_weigher(_ShortWeights(), views, spec)
