"""A service stopped while it holds a backlog of build casts.

oslo.messaging acknowledges a ``schedule_run_instance`` cast as the
service's connection reads it: a service slower than its casters (here
a database a little slow to answer) holds hundreds of casts taken off
the bus and not started.  SIGTERM must still end it within the stop's
promise (``config.STOP_WITHIN``, doc/admin-guide.md "Stop (SIGTERM)"),
and no build may be lost: what the stopping service did not build is
left to the takeover of its rows in the inventory
(``scheduler.cast_ledger``), or stays on the broker for the next
service on the topic.  Each instance is built exactly once.
"""

import threading
import time

import pytest
import sqlalchemy as sa

from scheduler import config
from scheduler import rpcapi
from tests.functional import daemons
from tests.functional import tcp_proxy
from tests.functional.test_cast_delivery import _wait_while_building
from tests.functional.test_database_outage import _start
from tests.functional.test_database_outage import _through
from tests.unit import fixtures

#: Build casts sent to the first service: more than its two workers
#: take off the bus before it is stopped.
CASTS = 600
#: Builds started before the SIGTERM: the backlog is being served.
STARTED_BEFORE = 20
#: Seconds without a build after which the casts left are reported:
#: less than the takeover time (``service_down_time``), so that the
#: rows the first service left must be handed back at once.
QUIET = 60


def _send(ctxt, uuids: list, sent: list) -> None:
    api = rpcapi.SchedulerAPI(timeout=30)
    for uuid in uuids:
        api.schedule_run_instance(ctxt, fixtures.request(memory_mb=64),
                                  [uuid])
        sent.append(uuid)


def _started(sim_log: str, uuid: str) -> int:
    return sim_log.count('started instance %s' % uuid)


@pytest.mark.parametrize('executor', ['eventlet', 'threading'])
def test_a_stop_with_a_backlog_of_casts_keeps_its_time_and_loses_none(
        cluster, conf, postgresql_url, executor):
    upstream = sa.make_url(postgresql_url)
    proxy = tcp_proxy.TCPProxy(upstream=('127.0.0.1', upstream.port),
                               delay=0.02).start()
    try:
        _backlog_stop(cluster, postgresql_url, proxy, executor)
    finally:
        daemons.stop_daemons_first()
        proxy.stop()


def _backlog_stop(cluster, postgresql_url: str, proxy, executor: str):
    (first,) = _start(cluster, _through(proxy, postgresql_url), workers=2,
                      executor=executor)
    instances = [fixtures.uuid(600000 + index) for index in range(CASTS)]
    sent: list = []
    senders = [threading.Thread(target=_send,
                                args=(cluster.ctxt, instances[i::4], sent),
                                daemon=True) for i in range(4)]
    for sender in senders:
        sender.start()
    for sender in senders:
        sender.join(120)
    assert len(sent) == CASTS, len(sent)
    daemons.wait_for(
        lambda: cluster.sim.log().count('started instance')
        >= STARTED_BEFORE, 120, interval=0.1,
        what='%d builds started' % STARTED_BEFORE)

    stopped_at = time.monotonic()
    first.terminate()
    try:
        first.wait_exit(60)
    except Exception:
        pass
    took = time.monotonic() - stopped_at
    built_by_first = cluster.sim.log().count('started instance')
    print('stop of a service holding a backlog (%s): %.1f s, %d of %d '
          'built by then' % (executor, took, built_by_first, CASTS))
    assert took <= config.STOP_WITHIN, (
        'stopped in %.1f s:\n%s' % (took, first.log()[-4000:]))
    assert first.wait_exit(0) == 0

    # Another service on the topic: it takes what stayed on the broker,
    # and the rows the first left, at its first takeover.
    cluster.start_scheduler(
        postgresql_url, name='second',
        scheduler_opts={'service_down_time': 120, 'workers': 1,
                        'executor': executor})

    def unbuilt() -> list:
        log = cluster.sim.log()
        return [i for i in instances if not _started(log, i)]
    left = _wait_while_building(unbuilt, quiet_for=QUIET)
    assert not left, '%d of %d casts never built: %s' % (
        len(left), CASTS, left[:5])
    log = cluster.sim.log()
    twice = [i for i in instances if _started(log, i) > 1]
    assert not twice, twice
    # The first service did hand builds back (else no backlog was
    # tested), and every row left was finished with.
    assert 'is left to another worker' in first.log()
    engine = sa.create_engine(postgresql_url, poolclass=sa.pool.NullPool)
    try:
        daemons.wait_for(
            lambda: _rows(engine) == 0, 30, what='no taken casts left')
    finally:
        engine.dispose()


def _rows(engine) -> int:
    with engine.connect() as conn:
        return conn.execute(sa.text(
            'SELECT count(*) FROM taken_casts')).scalar()
