"""Throw-away databases on the real PostgreSQL and MariaDB/MySQL servers.

Each test that asks for ``postgresql_url`` or ``mysql_url`` gets a fresh
database named ``sched_test_<random hex>``, dropped afterwards.  When a
server cannot be reached the test is skipped with the reason, except in
CI (``CI=true``), where a missing server is a failure: a green CI run
must mean the backends were really tested.
"""

import uuid
from typing import Iterator

import pytest
import sqlalchemy as sa

from tests.functional import daemons
from tests.functional import services

POSTGRESQL_SERVER = 'postgresql+psycopg2://postgres@127.0.0.1:5432'
MYSQL_SERVER = 'mysql+pymysql://root@127.0.0.1:3306'
CONNECT_TIMEOUT = 5


def _admin_engine(url: str, what: str) -> sa.Engine:
    """An autocommit engine on the server, or skip/fail if it is down."""
    try:
        engine = sa.create_engine(
            url, isolation_level='AUTOCOMMIT', poolclass=sa.pool.NullPool,
            connect_args={'connect_timeout': CONNECT_TIMEOUT})
        with engine.connect() as conn:
            conn.execute(sa.text('SELECT 1'))
    except Exception as exc:  # a missing driver counts as unreachable too
        services.unreachable('%s: %s: %s' % (what, type(exc).__name__, exc))
    return engine


def _throwaway_database(server: str, admin_db: str, label: str,
                        drop_sql: str, query: str = '') -> Iterator[str]:
    """Create ``sched_test_<hex>`` on ``server``, yield its URL, drop it."""
    where = sa.make_url(server)
    admin = _admin_engine(
        f'{server}/{admin_db}',
        f'{label} not reachable at {where.host}:{where.port}')
    name = 'sched_test_' + uuid.uuid4().hex
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE {name}'))
    try:
        yield f'{server}/{name}{query}'
    finally:
        try:
            # Not dropped under running daemons: they write to the end.
            daemons.stop_daemons_first()
        finally:
            with admin.connect() as conn:
                conn.execute(sa.text(drop_sql.format(name=name)))
            admin.dispose()


#: The throw-away databases' servers: backend -> ``_throwaway_database``
#: arguments (also the soak's, ``tools.soak.cluster``).
SERVERS = {
    'postgresql': dict(
        server=POSTGRESQL_SERVER, admin_db='postgres', label='PostgreSQL',
        drop_sql='DROP DATABASE IF EXISTS {name} WITH (FORCE)'),
    'mysql': dict(
        server=MYSQL_SERVER, admin_db='', label='MariaDB/MySQL',
        drop_sql='DROP DATABASE IF EXISTS {name}', query='?charset=utf8mb4'),
}


def throwaway_database(backend: str) -> Iterator[str]:
    """``_throwaway_database`` on the server of ``backend`` (``SERVERS``)."""
    yield from _throwaway_database(**SERVERS[backend])


@pytest.fixture
def postgresql_url() -> Iterator[str]:
    """URL of a fresh PostgreSQL database (user postgres, trust auth)."""
    yield from throwaway_database('postgresql')


@pytest.fixture
def mysql_url() -> Iterator[str]:
    """URL of a fresh MariaDB/MySQL database (root, no password)."""
    yield from throwaway_database('mysql')
