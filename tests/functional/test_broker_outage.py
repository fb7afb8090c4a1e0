"""Broker outages, simulated with a TCP proxy: the shared broker stays up.

The process under test (this test's caller, or the scheduler daemon)
reaches RabbitMQ through ``tcp_proxy.TCPProxy``; stopping the proxy cuts
its connections and refuses new ones, as a broker that went down.
"""

import threading
import time

import oslo_messaging
import pytest

from scheduler import rpc
from scheduler import rpcapi
from tests.functional import daemons
from tests.functional import tcp_proxy
from tests.functional.test_scheduler_service import make_spec
from tests.functional.test_scheduler_service import wait_for_hosts


def _sqlite(tmp_path) -> str:
    return 'sqlite:///%s' % (tmp_path / 'inventory.sqlite')


@pytest.fixture
def proxy(rabbit_url):
    p = tcp_proxy.TCPProxy().start()
    yield p
    p.stop()


def _in_thread(func, timeout: float):
    """``func()``'s result or exception, or None if still running."""
    outcome: dict = {}

    def run():
        started = time.monotonic()
        try:
            outcome['result'] = func()
        except Exception as e:  # handed to the test
            outcome['error'] = e
        outcome['elapsed'] = time.monotonic() - started
    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(timeout)
    return outcome if not worker.is_alive() else None


def test_call_timeout_is_honoured_while_the_broker_is_down(
        cluster, conf, tmp_path, proxy):
    """Item 4: MessagingTimeout within the caller's timeout, not after
    the outage (13.2 s for 5 s through a 10 s outage; forever through a
    longer one)."""
    db = _sqlite(tmp_path)
    cluster.start_scheduler(db)
    cluster.start_sim(hosts=1)
    wait_for_hosts(conf, db, 1)
    # Only the caller goes through the proxy.
    transport = oslo_messaging.get_rpc_transport(
        conf.conf, url=proxy.url(), allowed_remote_exmods=rpc.ALLOWED_EXMODS)
    try:
        api = rpcapi.SchedulerAPI(transport=transport, timeout=5)
        assert api.get_version_info(cluster.admin_ctxt)['rpc_version']
        proxy.stop()
        for _ in range(2):
            outcome = _in_thread(lambda: api.select_destinations(
                cluster.ctxt, make_spec()), 20)
            if outcome is None:
                proxy.start()  # let the stuck call go before failing
                pytest.fail('a call with a 5 s timeout still blocked after '
                            '20 s of broker outage')
            assert isinstance(outcome.get('error'),
                              oslo_messaging.MessagingTimeout), outcome
            # Generous on a busy machine; unbounded before.
            assert outcome['elapsed'] < 12, outcome
        proxy.start()
        [[selection]] = daemons.wait_for(
            lambda: api.select_destinations(cluster.ctxt, make_spec()), 60,
            what='calls to go through once the broker is back')
        assert selection.service_host
    finally:
        if not proxy.running:
            proxy.start()
        transport.cleanup()
