"""The claim protocol's invariant on PostgreSQL (``usage_machine``):
row locks, READ COMMITTED and native sequences, which SQLite has not."""

from hypothesis import settings
import pytest

from scheduler import conf
from scheduler.db import api
from scheduler.db import migration
from tests.unit.db import usage_machine

CONF = conf.CONF


@pytest.fixture
def postgresql(postgresql_url):
    CONF.set_override('connection', postgresql_url, group='database')
    api.reset_engine()
    migration.db_sync()
    yield
    api.reset_engine()
    CONF.clear_override('connection', group='database')


class PostgresqlMachine(usage_machine.UsageMachine):
    reset = staticmethod(usage_machine.reset_tables)


PostgresqlMachine.TestCase.settings = settings(
    max_examples=40, stateful_step_count=30, deadline=None)


def test_usage_invariant_on_postgresql(postgresql):
    PostgresqlMachine.TestCase('runTest').runTest()
