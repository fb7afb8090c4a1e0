"""A server database's pooled connections: pinged only after idling.

A ping on every checkout (oslo.db's ``pool_pre_ping``) was one more
round trip for each of a placement's three or four uses of the pool.
Here the pings the dialect sends are counted, and a connection the
server dropped under a busy pool is shown to cost the caller nothing.
"""

import time
import uuid

import pytest
import sqlalchemy as sa

from scheduler.db import availability
from scheduler.db import checkout
from scheduler.db import engine
from scheduler.db import usage

_LIMITS = {'memory_mb': 1 << 20, 'vcpu': 1 << 10, 'disk_gb': 1 << 20}


@pytest.fixture
def pings(db_server, monkeypatch):
    """The pings the engine's dialect sends, counted."""
    dialect = engine.get_engine().dialect
    sent = []
    real = dialect.do_ping

    def counted(dbapi_connection):
        sent.append(1)
        return real(dbapi_connection)

    monkeypatch.setattr(dialect, 'do_ping', counted)
    return sent


def _report(node='n1'):
    from oslo_utils import timeutils
    usage.apply_reports([usage.NodeReport(node, node, 0, 0, 0, 0,
                                          timeutils.utcnow(), frozenset())])


def _claim(node='n1'):
    return usage.claim(usage.ClaimRequest(str(uuid.uuid4()), node, node,
                                          512, 1, 10, limits=dict(_LIMITS)))


def test_a_connection_in_steady_use_is_not_pinged(pings):
    _report()
    for _ in range(10):
        _claim()
        usage.changed_since(0)
    assert pings == []


def test_a_connection_idle_for_a_while_is_pinged(pings, monkeypatch):
    monkeypatch.setattr(checkout, 'IDLE_PING_AFTER', 0.05)
    _report()
    _claim()
    time.sleep(0.1)
    _claim()
    assert len(pings) == 1


def test_after_a_burst_steady_use_stays_on_one_connection(
        pings, monkeypatch):
    # First in, first out, each checkout took the connection idle
    # longest: at a few requests a second every one was pinged.
    monkeypatch.setattr(checkout, 'IDLE_PING_AFTER', 1.5)
    _report()
    eng = engine.get_engine()
    burst = [eng.connect() for _ in range(5)]
    for conn in burst:
        conn.close()
    for _ in range(6):
        _claim()
        time.sleep(0.4)
    assert pings == []


def _drop_connections(url: str) -> int:
    """Have the server drop every connection of this process's pool."""
    admin = sa.create_engine(url, poolclass=sa.pool.NullPool)
    dialect = admin.dialect.name
    try:
        with admin.connect() as conn:
            if dialect == 'postgresql':
                return len(conn.execute(sa.text(
                    'SELECT pg_terminate_backend(pid) FROM pg_stat_activity'
                    ' WHERE datname = current_database()'
                    ' AND pid <> pg_backend_pid()')).all())
            ids = conn.execute(sa.text(
                'SELECT id FROM information_schema.processlist WHERE db = '
                'DATABASE() AND id <> CONNECTION_ID()')).scalars().all()
            for conn_id in ids:
                conn.execute(sa.text('KILL %d' % conn_id))
            return len(ids)
    finally:
        admin.dispose()


def test_a_connection_the_server_dropped_costs_the_caller_nothing(
        db_server, pings, monkeypatch):
    # Several connections in the pool, all in steady use, then all
    # dropped by the server (a restart between two requests): the next
    # claim and read run on new connections, without an error and
    # without an outage begun, as the ping on every checkout gave.
    _report()
    eng = engine.get_engine()
    held = [eng.connect() for _ in range(3)]
    for conn in held:
        conn.close()
    _claim()
    assert _drop_connections(db_server) >= 1
    began = []
    monkeypatch.setattr(availability, 'unavailable',
                        lambda e: began.append(e) or e)
    placed = _claim()
    assert usage.placements_get([placed['instance_uuid']])
    assert usage.changed_since(0)
    assert began == []
    assert pings == []
