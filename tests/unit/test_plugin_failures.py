"""A plugin's own bug is the plugin's, not the caller's.

A filter or weigher from outside the scheduler package that raises
(``KeyError``, ``TypeError``...) while serving a request: the caller
gets ``PluginFailed`` naming it, not ``InvalidRequest``; the operator
gets one ERROR line with the plugin's traceback; the service goes on
serving.
"""

import logging

import pytest

from scheduler import exception
from scheduler.filters import base as filters_base
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
