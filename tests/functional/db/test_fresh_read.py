"""The freshness read on PostgreSQL: statements, no transaction.

Before every request a worker reads what other workers changed: the
changed reports and usage rows, then the reports and pending claims of
the nodes that changed.  Every request waits for that read, and each
round trip of it waits for the server and for the worker's other green
threads; a transaction made each of the last two reads three round
trips (BEGIN, SELECT, COMMIT).  Here the statements and commits the
driver sees are counted.
"""

import uuid

from oslo_utils import timeutils
import pytest
import sqlalchemy as sa

from scheduler import conf
from scheduler.db import api
from scheduler.db import engine
from scheduler.db import migration
from scheduler.db import usage

CONF = conf.CONF
_LIMITS = {'memory_mb': 4096, 'vcpu': 8, 'disk_gb': 100}


@pytest.fixture
def postgresql(postgresql_url):
    CONF.set_override('connection', postgresql_url, group='database')
    api.reset_engine()
    migration.db_sync()
    yield
    api.reset_engine()
    CONF.clear_override('connection', group='database')


class _Driver:
    """What reaches the driver: statements, commits and BEGINs."""

    def __init__(self):
        self.statements, self.commits, self.begins = [], 0, 0

    def __enter__(self):
        eng = engine.get_engine()
        sa.event.listen(eng, 'before_cursor_execute', self._execute)
        sa.event.listen(eng, 'commit', self._commit)
        return self

    def __exit__(self, *exc):
        eng = engine.get_engine()
        sa.event.remove(eng, 'before_cursor_execute', self._execute)
        sa.event.remove(eng, 'commit', self._commit)

    def _execute(self, conn, cursor, statement, *args):
        self.statements.append(statement)
        # psycopg2 sends a BEGIN of its own before the first statement
        # of a transaction, unless the connection is in autocommit.
        if not conn.connection.driver_connection.autocommit:
            self.begins += 1

    def _commit(self, conn):
        self.commits += 1


def _node(name: str):
    usage.apply_reports([usage.NodeReport(name, name, 0, 0, 0, 0,
                                          timeutils.utcnow(), frozenset())])


def test_pending_claims_of_nodes_are_one_statement_outside_a_transaction(
        postgresql):
    _node('n1')
    _node('n2')
    placed = usage.claim_many([usage.ClaimRequest(
        str(uuid.uuid4()), 'n1', 'n1', 1024, 1, 10, limits=dict(_LIMITS))])
    with _Driver() as driver:
        found = usage.pending_claims([('n1', 'n1'), ('n2', 'n2')])
    assert [p['instance_uuid'] for p in found] == \
        [placed[0]['instance_uuid']]
    assert len(driver.statements) == 1, driver.statements
    assert driver.commits == 0
    assert driver.begins == 0


def test_stored_reports_of_nodes_are_one_statement_outside_a_transaction(
        postgresql):
    api.host_reports_save([{
        'host': name, 'nodename': name,
        'uuid': '00000000-0000-4000-8000-%012d' % i, 'disabled': False,
        'updated_at': timeutils.utcnow(), 'report': {'free_ram_mb': 1024},
    } for i, name in enumerate(('h1', 'h2'))])
    with _Driver() as driver:
        found = api.host_reports_get([('h1', 'h1')])
    assert [(r['host'], r['nodename']) for r in found] == [('h1', 'h1')]
    assert len(driver.statements) == 1, driver.statements
    assert driver.commits == 0
    assert driver.begins == 0
