"""The service's kombu consumer of liveness messages
(``scheduler.alive_consumer``, issue 26), with the real daemon and real
RabbitMQ: trust per message, malformed messages, a broker restart.

Quiet hosts kept up by liveness alone through it are
``test_liveness.py``'s.
"""

import time

from scheduler import rpc
from scheduler import rpcapi
from tests.functional import broker_users
from tests.functional import daemons
from tests.functional import hostile
from tests.functional import test_liveness
from tests.functional.test_scheduler_service import wait_for_hosts
from tests.functional.test_security import _raw_cast
from tests.functional.test_security import _report
from tests.functional.test_security import _sqlite
from tests.functional.test_security import _warnings


def test_liveness_is_taken_only_from_the_credential_of_its_hosts(
        cluster, conf, tmp_path, guide_users):
    """With the guide's ``[trust] compute_users = *:{user}``: a compute
    credential's liveness message for its own host is taken; one naming
    another host, whatever its context says, is refused naming the
    credential, as is one without a ``user_id``; an unreadable message
    is one rejection line, and the consumer goes on."""
    users = guide_users
    db = _sqlite(tmp_path)
    cluster.transport_url = users.url('service')
    conf.config(transport_url=users.url('caller'))
    daemon = cluster.start_scheduler(
        db, extra='[trust]\n%s\n' % broker_users.GUIDE_TRUST_CONFIG)
    operator = rpcapi.SchedulerAPI(
        transport=rpc.get_transport(url=users.url('service')), timeout=30)
    compute_api = rpcapi.SchedulerAPI(
        transport=rpc.get_transport(url=users.url('compute')), timeout=5)
    own = users.user('compute')
    operator.update_service_capabilities(cluster.admin_ctxt,
                                         _report('other'))
    compute_api.update_service_capabilities(cluster.admin_ctxt, _report(own))
    assert wait_for_hosts(conf, db, 2) == sorted(['other', own])

    compute_api.report_alive(cluster.admin_ctxt,
                             [['other', 'other', 'digest']])
    exchange, queue = rpc.reports_topic(), rpc.alive_topic()
    _raw_cast(users.url('compute', 'amqp'), exchange, queue,
              'report_alive', {'nodes': [[own, own, 'digest']]},
              hostile.context(is_admin=True), user_id=None)
    with_compute = users.url('compute', 'amqp')
    _raw_cast(with_compute, exchange, queue, 'report_alive',
              {'nodes': 'garbage'}, hostile.context(),
              user_id=users.user('compute'))
    compute_api.report_alive(cluster.admin_ctxt, [[own, own, 'digest']])
    refused = 'refused for broker user %s' % own
    daemons.wait_for(
        lambda: _warnings(daemon.log(), refused)
        and _warnings(daemon.log(), 'broker user unknown (no user_id)')
        and _warnings(daemon.log(), 'liveness message'),
        30, what='the liveness messages to be refused')
    # The compute's own host's message is taken: its digest is unknown,
    # so its full report is asked for (no compute consumes here).
    daemons.wait_for(
        lambda: 'Could not ask %s for its full report' % own in daemon.log()
        or 'names a report this worker does not hold' in daemon.log(), 30,
        what='the compute\'s own liveness message to be taken')
    assert not [line for line in _warnings(daemon.log(), refused)
                if 'about host %s on' % own in line]
    assert 'Traceback' not in daemon.log(), daemon.log()[-3000:]


def test_the_consumer_consumes_again_after_a_broker_restart(
        own_cluster, broker, conf, postgresql_url, monkeypatch):
    """A RabbitMQ node of the test's own restarted under a two-worker
    service whose hosts send liveness messages only: its report worker
    (``[scheduler] report_workers``, one by default) consumes the alive
    queue again, and the hosts stay up on liveness
    alone for longer than ``service_down_time`` after it."""
    cluster = own_cluster
    conf.config(report_liveness=True, group='scheduler')
    service, api, computes, servers = test_liveness._start(
        cluster, conf, postgresql_url, monkeypatch, 'restart')
    queue = rpc.alive_topic()
    try:
        daemons.wait_for(lambda: test_liveness._report_all(computes)
                         or api.count('alive') >= test_liveness.HOSTS, 60,
                         interval=1, what='liveness messages')
        assert broker.consumers(queue) == 1
        broker.stop_app()
        broker.start_app()
        daemons.wait_for(lambda: broker.consumers(queue) == 1, 120,
                         interval=1,
                         what='the report worker to consume the alive queue')
        assert service.log().count(
            'Liveness messages: consuming %s again' % queue) == 1
        full, alive = api.count('full'), api.count('alive')
        deadline = time.monotonic() + test_liveness.DOWN_TIME + 5
        while time.monotonic() < deadline:
            test_liveness._report_all(computes)
            time.sleep(1)
        assert api.count('alive') - alive >= test_liveness.HOSTS * (
            test_liveness.DOWN_TIME)
        # Whatever the restart cost, liveness alone keeps them up now.
        assert test_liveness._all_up(cluster), service.log()[-3000:]
        assert api.count('full') - full <= test_liveness.HOSTS
    finally:
        rpc.stop_servers(servers)
