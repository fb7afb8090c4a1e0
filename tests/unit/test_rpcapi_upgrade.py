"""SchedulerAPI against an older (1.3) scheduler, over ``fake://``.

The old scheduler here is a stand-in that speaks API 1.3 and knows
HostState 1.1, as release d220c38 does (the real one is run in
tests/functional/test_rolling_upgrade.py).
"""

import logging
import threading
import time

import oslo_messaging
import pytest

from scheduler import concurrency
from scheduler import context
from scheduler import exception
from scheduler.objects import base as objects_base
from scheduler import rpc
from scheduler import rpcapi
from tests.unit import fixtures

CTX = context.get_admin_context()


class OldScheduler:
    """API 1.3: no topics of its own for reports and operator casts."""

    target = oslo_messaging.Target(version='1.3')

    def __init__(self):
        self.reports: list = []
        self.aggregates: list = []
        self.arrived = threading.Event()

    @oslo_messaging.expose
    def get_version_info(self, ctxt):
        manifest = objects_base.obj_manifest()
        manifest['HostState'] = '1.1'
        return {'rpc_version': '1.3', 'objects': manifest}

    @oslo_messaging.expose
    def update_service_capabilities(self, ctxt, host_state=None):
        self.reports.append(host_state.VERSION)
        self.arrived.set()

    @oslo_messaging.expose
    def update_aggregates(self, ctxt, aggregates):
        self.aggregates.append(aggregates)
        self.arrived.set()


@pytest.fixture
def old_scheduler(conf, fake_transport, monkeypatch):
    monkeypatch.setattr(concurrency, 'EXECUTOR', 'threading')
    endpoint = OldScheduler()
    server = oslo_messaging.get_rpc_server(
        fake_transport, oslo_messaging.Target(topic=conf.conf.scheduler.topic,
                                              server='old'),
        [endpoint], executor='threading',
        serializer=rpc.RequestContextSerializer(),
        access_policy=oslo_messaging.ExplicitRPCAccessPolicy)
    server.start()
    yield endpoint
    server.stop()
    server.wait()


def test_the_first_report_honours_an_auto_cap(old_scheduler, conf,
                                              fake_transport):
    conf.config(scheduler='auto', group='upgrade_levels')
    api = rpcapi.SchedulerAPI(transport=fake_transport, timeout=10)
    api.update_service_capabilities(CTX, fixtures.report('h1'))
    assert old_scheduler.arrived.wait(5)
    assert old_scheduler.reports == ['1.1']


def test_without_a_cap_a_cast_it_cannot_hear_fails_at_the_sender(
        old_scheduler, fake_transport, caplog):
    api = rpcapi.SchedulerAPI(transport=fake_transport, timeout=10)
    with caplog.at_level(logging.ERROR, logger='scheduler.rpcapi'):
        for _ in range(2):
            with pytest.raises(exception.SchedulerTooOld) as raised:
                api.update_service_capabilities(CTX, fixtures.report('h1'))
    assert 'scheduler = auto' in str(raised.value)
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1, errors
    assert '[upgrade_levels] scheduler' in errors[0].getMessage()
    time.sleep(0.2)
    assert old_scheduler.reports == []


def test_a_quiet_compute_sends_full_reports_to_an_older_scheduler(
        old_scheduler, conf, fake_transport):
    """Capped (``auto``) below 1.6, ``report`` sends no liveness
    message: the older scheduler gets every report, whole."""
    conf.config(scheduler='auto', group='upgrade_levels')
    api = rpcapi.SchedulerAPI(transport=fake_transport, timeout=10)
    for count in (1, 2, 3):
        assert api.report(CTX, fixtures.report('h1')) is False
        deadline = time.monotonic() + 5
        while len(old_scheduler.reports) < count:
            assert time.monotonic() < deadline, old_scheduler.reports
            time.sleep(0.05)
    assert old_scheduler.reports == ['1.1'] * 3
