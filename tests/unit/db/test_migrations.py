"""The migrations build exactly the schema that models.py describes."""

from alembic import autogenerate
from alembic import migration as alembic_migration
import pytest
import sqlalchemy as sa

from scheduler import conf
from scheduler.db import api
from scheduler.db import migration
from scheduler.db import models

CONF = conf.CONF


@pytest.fixture
def url(tmp_path):
    url = f'sqlite:///{tmp_path}/scheduler.sqlite'
    CONF.set_override('connection', url, group='database')
    api.reset_engine()
    yield url
    api.reset_engine()
    CONF.clear_override('connection', group='database')


def schema_diffs(engine: sa.Engine) -> list:
    with engine.connect() as conn:
        context = alembic_migration.MigrationContext.configure(
            conn, opts={'compare_type': True})
        return autogenerate.compare_metadata(context, models.Base.metadata)


def test_an_empty_database_has_no_version(url):
    assert migration.db_version() is None


def test_sync_to_head(url):
    migration.db_sync()
    assert migration.db_version() == migration.head()
    migration.db_sync()
    assert migration.db_version() == migration.head()


def test_sync_to_an_explicit_version_with_an_explicit_url(url, tmp_path):
    other = f'sqlite:///{tmp_path}/other/inventory.sqlite'
    migration.db_sync(version=migration.head(), connection=other)
    assert migration.db_version(connection=other) == migration.head()
    assert migration.db_version() is None


def test_migrated_tables_match_the_models(url):
    migration.db_sync()
    engine = api.get_engine()
    assert schema_diffs(engine) == []
    tables = set(sa.inspect(engine).get_table_names())
    assert tables == set(models.Base.metadata.tables) | {'alembic_version'}


def test_the_comparison_does_see_a_drift(url):
    migration.db_sync()
    engine = api.get_engine()
    with engine.begin() as conn:
        conn.execute(sa.text('DROP INDEX instances_host_idx'))
    assert schema_diffs(engine) != []
