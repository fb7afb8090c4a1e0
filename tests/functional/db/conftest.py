"""The inventory on a database server, for the tests of this folder."""

import pytest

from scheduler import conf
from scheduler.db import api
from scheduler.db import migration

CONF = conf.CONF


def _inventory_at(url: str):
    CONF.set_override('connection', url, group='database')
    api.reset_engine()
    migration.db_sync()
    yield url
    api.reset_engine()
    CONF.clear_override('connection', group='database')


@pytest.fixture
def postgresql(postgresql_url):
    """The inventory on PostgreSQL, migrated."""
    yield from _inventory_at(postgresql_url)


@pytest.fixture(params=['postgresql_url', 'mysql_url'])
def db_server(request):
    """The inventory on PostgreSQL, then on MariaDB, migrated."""
    yield from _inventory_at(request.getfixturevalue(request.param))
