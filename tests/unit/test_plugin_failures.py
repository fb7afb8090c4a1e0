"""A plugin's own bug is the plugin's, not the caller's.

A filter or weigher from outside the scheduler package that raises
(``KeyError``, ``TypeError``...) while serving a request: the caller
gets ``PluginFailed`` naming it, not ``InvalidRequest``; the operator
gets one ERROR line with the plugin's traceback; the service goes on
serving.
"""

import copy
import logging

import numpy
from oslo_config import cfg
import pytest

from scheduler.drivers import filter_scheduler
from scheduler import exception
from scheduler.filters import base as filters_base
from scheduler import rejections
from scheduler.weights import base as weights_base
from tests.unit import fixtures
from tests.unit import test_rpc

start_service = test_rpc.start_service
CTX = test_rpc.CTX


class BrokenFilter(filters_base.BaseHostFilter):
    """Passes nothing: it reads a hint it assumes every request has."""

    def host_passes(self, host_state, spec_obj):
        hints = spec_obj.scheduler_hints or {}
        return host_state.host in hints['assumed_hint']


def _path(cls) -> str:
    return '%s.%s' % (cls.__module__, cls.__name__)


def test_a_plugin_that_raises_is_named_to_the_caller_and_logged_once(
        start_service, fake_transport, conf, caplog):
    caplog.set_level(logging.INFO, logger='scheduler')
    conf.config(available_filters=['scheduler.filters.all_filters',
                                   _path(BrokenFilter)],
                enabled_filters=fixtures.CORE_FILTERS + ['BrokenFilter'],
                group='filter_scheduler')
    svc = start_service()
    api = test_rpc._client(fake_transport)
    test_rpc._report(api, svc, fixtures.report('h1'))

    with pytest.raises(exception.PluginFailed) as info:
        api.select_destinations(CTX, fixtures.request(memory_mb=512),
                                [fixtures.uuid(1)])
    assert 'BrokenFilter' in str(info.value)
    assert 'assumed_hint' in str(info.value)

    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1, [r.getMessage() for r in errors]
    assert errors[0].exc_info is not None
    assert 'BrokenFilter' in errors[0].getMessage()
    assert not [r for r in caplog.records
                if 'Rejected a call' in r.getMessage()]

    # The service goes on: a request the plugin does not choke on.
    selections = api.select_destinations(
        CTX, fixtures.request(memory_mb=512,
                              scheduler_hints={'assumed_hint': ['h1']}),
        [fixtures.uuid(2)])
    assert selections[0][0].service_host == 'h1'


# What an out-of-tree plugin returns is taken as the plugin's word: a
# value in-tree code cannot use is the plugin's bug too, named as such,
# not the caller's InvalidRequest nor a wrong placement.

class _Weigher(weights_base.BaseHostWeigher):
    """Returns ``VALUE`` for h2, a plain number for every other host."""

    VALUE: object = 1.0

    def _weigh_object(self, host_state, spec_obj):
        return self.VALUE if host_state.host == 'h2' else 2.0


class StringWeigher(_Weigher):
    VALUE = 'heavy'


class NoneWeigher(_Weigher):
    VALUE = None


class NaNWeigher(_Weigher):
    VALUE = float('nan')


class InfWeigher(_Weigher):
    VALUE = float('inf')


class ShortListWeigher(weights_base.BaseHostWeigher):
    """Weighs one host whatever it is given."""

    def weigh_objects(self, weighed_hosts, spec_obj):
        return [1.0]


class TextMultiplierWeigher(weights_base.BaseHostWeigher):
    """Its multiplier is a word."""

    def _weigh_object(self, host_state, spec_obj):
        return 1.0

    def weight_multiplier(self, host_state):
        return 'high'

    def weight_multipliers(self, hosts):
        return ['high'] * len(hosts)


class WordVerdictFilter(filters_base.BaseHostFilter):
    """Answers in words: a non-empty string, which Python calls true."""

    def host_passes(self, host_state, spec_obj):
        return 'no'


class StrangerFilter(filters_base.BaseHostFilter):
    """Returns a host it was not given (another request's, say)."""

    def filter_all(self, host_states, spec_obj):
        hosts = list(host_states)
        stranger = copy.copy(hosts[0])
        return [stranger]


class NamesFilter(filters_base.BaseHostFilter):
    """Returns host names, not hosts."""

    def filter_all(self, host_states, spec_obj):
        return [h.host for h in host_states]


class ShortMaskFilter(filters_base.BaseHostFilter):
    """Its vector form answers for one host whatever it is given."""

    def host_passes(self, host_state, spec_obj):
        return True

    def filter_columns(self, columns, spec_obj):
        return numpy.ones(1, bool)


class NamesDriver(filter_scheduler.FilterScheduler):
    """Answers with host names instead of Selection lists."""

    def select_destinations(self, context, spec_obj, instance_uuids,
                            return_alternates=False, **kwargs):
        chosen = super().select_destinations(
            context, spec_obj, instance_uuids, return_alternates, **kwargs)
        return [[s.service_host for s in alts] for alts in chosen]


class ShortDriver(filter_scheduler.FilterScheduler):
    """Answers for the first instance of a request only."""

    def select_destinations(self, context, spec_obj, instance_uuids,
                            return_alternates=False, **kwargs):
        return super().select_destinations(
            context, spec_obj, instance_uuids, return_alternates,
            **kwargs)[:1]


@pytest.fixture(autouse=True)
def _log_every_failure(monkeypatch):
    # Each case's failure logged, whatever the cases before logged.
    monkeypatch.setattr(rejections, '_limiter', rejections._Limiter())


def _two_hosts(start_service, fake_transport, driver='filter_scheduler'):
    svc = start_service(driver)
    api = test_rpc._client(fake_transport)
    test_rpc._report(api, svc, fixtures.report('h1'), fixtures.report('h2'))
    return api


def _named_failure(api, caplog, plugin, num_instances=1):
    with pytest.raises(exception.PluginFailed) as info:
        api.select_destinations(
            CTX, fixtures.request(memory_mb=512,
                                  num_instances=num_instances),
            [fixtures.uuid(i) for i in range(num_instances)])
    assert plugin in str(info.value)
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1, [r.getMessage() for r in errors]
    assert plugin in errors[0].getMessage()
    return str(info.value)


@pytest.mark.parametrize('columnar', [True, False])
@pytest.mark.parametrize('weigher', [StringWeigher, NoneWeigher, NaNWeigher,
                                     InfWeigher, ShortListWeigher,
                                     TextMultiplierWeigher])
def test_a_weigher_returning_what_is_not_a_weight_is_named(
        start_service, fake_transport, conf, caplog, weigher, columnar):
    conf.config(weight_classes=[_path(weigher)], columnar=columnar,
                group='filter_scheduler')
    api = _two_hosts(start_service, fake_transport)
    _named_failure(api, caplog, weigher.__name__)


def test_a_weigher_multiplier_option_that_is_not_a_number_is_named(
        start_service, fake_transport, conf, caplog):
    conf.register_opt(cfg.StrOpt('word_multiplier', default='lots'),
                      group='filter_scheduler')
    conf.config(weight_classes=[_path(WordMultiplierWeigher)],
                group='filter_scheduler')
    api = _two_hosts(start_service, fake_transport)
    _named_failure(api, caplog, 'WordMultiplierWeigher')


class WordMultiplierWeigher(weights_base.BaseHostWeigher):
    """Its multiplier option is a string option."""

    multiplier_option = 'word_multiplier'

    def _weigh_object(self, host_state, spec_obj):
        return 1.0 if host_state.host == 'h1' else 0.0


@pytest.mark.parametrize('columnar, flt', [
    (columnar, flt) for columnar in (True, False)
    for flt in (WordVerdictFilter, StrangerFilter, NamesFilter)] + [
    (True, ShortMaskFilter)])
def test_a_filter_returning_what_is_not_a_verdict_is_named(
        start_service, fake_transport, conf, caplog, flt, columnar):
    conf.config(available_filters=['scheduler.filters.all_filters',
                                   _path(flt)],
                enabled_filters=fixtures.CORE_FILTERS + [flt.__name__],
                columnar=columnar, group='filter_scheduler')
    api = _two_hosts(start_service, fake_transport)
    _named_failure(api, caplog, flt.__name__)


@pytest.mark.parametrize('driver', [NamesDriver, ShortDriver])
def test_a_driver_answering_what_is_not_selections_is_named(
        start_service, fake_transport, caplog, driver):
    api = _two_hosts(start_service, fake_transport, _path(driver))
    _named_failure(api, caplog, driver.__name__, num_instances=2)


class ImplicitNoFilter(filters_base.BaseHostFilter):
    """Passes h1; says nothing (None) of the others, which nova took
    as a no."""

    def host_passes(self, host_state, spec_obj):
        if host_state.host == 'h1':
            return True


@pytest.mark.parametrize('columnar', [True, False])
def test_a_filter_that_returns_nothing_rejects_the_host_as_in_nova(
        start_service, fake_transport, conf, columnar):
    conf.config(available_filters=['scheduler.filters.all_filters',
                                   _path(ImplicitNoFilter)],
                enabled_filters=fixtures.CORE_FILTERS + ['ImplicitNoFilter'],
                columnar=columnar, group='filter_scheduler')
    api = _two_hosts(start_service, fake_transport)
    [[chosen]] = api.select_destinations(
        CTX, fixtures.request(memory_mb=512), [fixtures.uuid(1)])
    assert chosen.service_host == 'h1'
