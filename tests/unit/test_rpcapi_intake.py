"""SchedulerAPI's reports: the intake queue (1.5) or the fanout (1.4)."""

import logging

import oslo_messaging

from scheduler import context
from scheduler import rpcapi
from tests.unit import fixtures

CTX = context.get_admin_context()


class _Refusing:
    """The intake's client, as the broker answers a credential that
    may not publish on the reports exchange."""

    def __init__(self):
        self.casts = 0

    def prepare(self, **kwargs):
        return self

    def cast(self, ctxt, method, **kwargs):
        self.casts += 1
        raise oslo_messaging.MessageDeliveryFailure(
            'Exchange.declare: (403) ACCESS_REFUSED')


def _api(fake_transport, monkeypatch):
    api = rpcapi.SchedulerAPI(transport=fake_transport)
    fanned = []
    monkeypatch.setattr(api, '_state_cast',
                        lambda topic, version, ctxt, method, **kw:
                        fanned.append(method))
    return api, fanned


def test_reports_take_the_intake_by_default(conf, fake_transport):
    conf.config(scheduler='1.5', group='upgrade_levels')
    assert rpcapi.SchedulerAPI(transport=fake_transport)._intake_heard()
    # Schedulers older than 1.5 do not take it.
    conf.config(scheduler='1.4', group='upgrade_levels')
    assert not rpcapi.SchedulerAPI(transport=fake_transport)._intake_heard()
    conf.config(scheduler='1.5', group='upgrade_levels')
    conf.config(report_intake=False, group='scheduler')
    assert not rpcapi.SchedulerAPI(transport=fake_transport)._intake_heard()


def test_a_report_the_broker_refuses_on_the_intake_goes_by_the_fanout(
        conf, fake_transport, monkeypatch, caplog):
    conf.config(scheduler='1.5', group='upgrade_levels')
    api, fanned = _api(fake_transport, monkeypatch)
    refusing = api._cast_clients['intake'] = _Refusing()
    with caplog.at_level(logging.WARNING, logger='scheduler.rpcapi'):
        for _ in range(3):
            api.update_service_capabilities(CTX, fixtures.report('h1'))
    assert fanned == ['update_service_capabilities'] * 3
    # Asked once, not at every report; said once, with what to do.
    assert refusing.casts == 1
    warnings = [r.getMessage() for r in caplog.records
                if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert 'write and configure' in warnings[0]
    # Later, the intake again (the permission may have been widened).
    monkeypatch.setattr(api._intake, 'refused_until', 0.0)
    api.update_service_capabilities(CTX, fixtures.report('h1'))
    assert refusing.casts == 2
