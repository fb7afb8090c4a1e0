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
    endpoint.server = server
    yield endpoint
    server.stop()
    server.wait()


def _served_all(old_scheduler, conf, fake_transport) -> None:
    """Return once the old scheduler served every message sent to it
    before: a call made after them is answered once they were taken
    (the queue is first in, first out), and its server's ``wait``
    returns once what it took is served.  Stops the server."""
    client = oslo_messaging.get_rpc_client(
        fake_transport, oslo_messaging.Target(
            topic=conf.conf.scheduler.topic, version='1.3'),
        serializer=rpc.RequestContextSerializer())
    client.call(CTX, 'get_version_info')
    old_scheduler.server.stop()
    old_scheduler.server.wait()


def test_the_first_report_honours_an_auto_cap(old_scheduler, conf,
                                              fake_transport):
    conf.config(scheduler='auto', group='upgrade_levels')
    api = rpcapi.SchedulerAPI(transport=fake_transport, timeout=10)
    api.update_service_capabilities(CTX, fixtures.report('h1'))
    assert old_scheduler.arrived.wait(5)
    assert old_scheduler.reports == ['1.1']


def test_without_a_cap_a_cast_it_cannot_hear_fails_at_the_sender(
        old_scheduler, conf, fake_transport, caplog):
    api = rpcapi.SchedulerAPI(transport=fake_transport, timeout=10)
    with caplog.at_level(logging.ERROR, logger='scheduler.rpcapi'):
        for _ in range(2):
            with pytest.raises(exception.SchedulerTooOld) as raised:
                api.update_service_capabilities(CTX, fixtures.report('h1'))
    assert 'scheduler = auto' in str(raised.value)
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1, errors
    assert '[upgrade_levels] scheduler' in errors[0].getMessage()
    _served_all(old_scheduler, conf, fake_transport)
    assert old_scheduler.reports == []


# -- fanout casts no queue takes ----------------------------------------

def _aggregate():
    from scheduler import objects
    return objects.Aggregate(id=7, uuid='8d3c4bd5-4e0c-4d4f-9c1e-1f6c2b5a'
                             '9e01', name='agg', hosts=[], metadata={})


@pytest.mark.parametrize('cap, topic', [('1.5', 'scheduler_ops'),
                                        ('1.4', 'scheduler_ops'),
                                        ('1.3', 'scheduler')])
@pytest.mark.parametrize('consumers, warned', [(0, True), (2, False),
                                               (None, False)])
def test_an_operator_cast_nobody_consumes_is_a_warning_at_the_sender(
        conf, fake_transport, monkeypatch, caplog, cap, topic, consumers,
        warned):
    """oslo.messaging sends fanouts without the mandatory flag: the
    sender asks the broker whether a scheduler consumes the topic
    (None: it cannot tell, and says nothing)."""
    conf.config(scheduler=cap, group='upgrade_levels')
    conf.config(topic='scheduler', group='scheduler')
    api = rpcapi.SchedulerAPI(transport=fake_transport, timeout=10)
    asked = []
    monkeypatch.setattr(rpc, 'is_amqp', lambda **kwargs: True)
    monkeypatch.setattr(api, '_queue_consumers',
                        lambda url, queue: asked.append(queue) or consumers)
    with caplog.at_level(logging.WARNING, logger='scheduler.rpcapi'):
        api.update_aggregates(CTX, [_aggregate()])
        api.delete_aggregate(CTX, _aggregate())
    assert asked == [topic, topic]
    warnings = [r.getMessage() for r in caplog.records
                if r.levelno == logging.WARNING]
    if not warned:
        assert warnings == []
        return
    assert len(warnings) == 2, warnings
    for method, line in zip(('update_aggregates', 'delete_aggregate'),
                            warnings):
        assert line.startswith('%s was cast to topic %s (fanout exchange '
                               '%s_fanout) but no scheduler consumes that '
                               'topic: the broker dropped it'
                               % (method, topic, topic)), line


def test_reports_are_not_confirmed_at_the_broker(conf, fake_transport,
                                                 monkeypatch):
    """A fleet's reports are many: no broker round trip each."""
    conf.config(scheduler='1.4', group='upgrade_levels')
    api = rpcapi.SchedulerAPI(transport=fake_transport, timeout=10)
    monkeypatch.setattr(rpc, 'is_amqp', lambda **kwargs: True)
    monkeypatch.setattr(api, '_queue_consumers',
                        lambda url, queue: pytest.fail('asked'))
    api.update_service_capabilities(CTX, fixtures.report('h1'))
    api.update_instance_info(CTX, 'h1', [])


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


def test_a_scheduler_restarting_is_not_taken_for_an_old_one(
        conf, fake_transport, monkeypatch):
    """A request topic consumed without the reports topic for a moment
    (a scheduler starting or stopping its servers) is looked at again
    before it is kept as "older than 1.4": kept, the verdict refused
    every later report of the compute."""
    conf.config(topic='scheduler', group='scheduler')
    api = rpcapi.SchedulerAPI(transport=fake_transport, timeout=10)
    looks = iter([0, 1, 1])  # reports: 0, main: 1; then reports: 1
    asked = []

    def consumers(url, queue):
        asked.append(queue)
        return next(looks)
    monkeypatch.setattr(api, '_queue_consumers', consumers)
    monkeypatch.setattr(rpcapi, 'OLD_CONFIRM_AFTER', 0.01)
    assert api._judge_by_queues('rabbit://x') == ''
    assert asked == ['scheduler_reports', 'scheduler', 'scheduler_reports']
    # Still so at the second look: an older scheduler.
    looks = iter([0, 1, 0, 1])
    assert 'older than 1.4' in api._judge_by_queues('rabbit://x')
