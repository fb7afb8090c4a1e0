"""BindingGuard: the hosts' keys are bound again only when the probe is
unroutable (the functional test shows it against RabbitMQ)."""

import oslo_messaging
import pytest

from scheduler.simulator import routing


class _Probe:
    def __init__(self, error=None):
        self.error = error
        self.casts = 0

    def cast(self, ctxt, method):
        assert method == 'bindings_probe'
        self.casts += 1
        if self.error is not None:
            raise self.error


@pytest.fixture
def bound(monkeypatch):
    calls = []

    def bind_hosts(conf, topic, server, hosts, stopping=None):
        calls.append((topic, server, list(hosts)))
        return len(hosts)
    monkeypatch.setattr(routing, 'bind_hosts', bind_hosts)
    return calls


def _guard(conf, fake_transport, probe) -> routing.BindingGuard:
    guard = routing.BindingGuard(conf.conf, fake_transport, 'compute',
                                 'fleet-x', ['h-1', 'h-2'])
    guard._probe = probe
    return guard


def test_probe_key_is_not_a_host_name():
    assert routing.probe_server('fleet-x') == 'fleet-x.bindings'


def test_routed_probe_binds_nothing(conf, fake_transport, bound):
    guard = _guard(conf, fake_transport, _Probe())
    assert guard.check() is True
    assert bound == [] and guard.rebinds == 0


def test_unroutable_probe_binds_every_host_again(conf, fake_transport,
                                                 bound, caplog):
    error = oslo_messaging.MessageUndeliverable(Exception('NO_ROUTE'),
                                                'scheduler', 'k', 'm')
    guard = _guard(conf, fake_transport, _Probe(error))
    assert guard.check() is False
    assert bound == [('compute', 'fleet-x', ['h-1', 'h-2'])]
    assert guard.rebinds == 1
    assert 'bound 2 host(s) again' in caplog.text


def test_unreachable_broker_waits_for_the_next_check(conf, fake_transport,
                                                     bound):
    error = oslo_messaging.MessageDeliveryFailure('broker down')
    guard = _guard(conf, fake_transport, _Probe(error))
    assert guard.check() is False
    assert bound == [] and guard.rebinds == 0
