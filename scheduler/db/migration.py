"""Schema migrations: bring the inventory to a revision, report where it is.

Alembic is configured in code, from the scripts shipped inside this
package, so an installed service needs no ``alembic.ini``.
"""

import contextlib
import os
from typing import Iterator

from alembic import command as alembic_command
from alembic import config as alembic_config
from alembic import migration as alembic_migration
from alembic import script as alembic_script
import sqlalchemy as sa

from scheduler.db import api

MIGRATIONS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                              'migrations')


def _config() -> alembic_config.Config:
    config = alembic_config.Config()
    config.set_main_option('script_location', MIGRATIONS_DIR)
    return config


@contextlib.contextmanager
def _connect(connection: str | None) -> Iterator[sa.Connection]:
    """Connect with the service's engine, or a one-off one for another URL.

    Both are made by ``scheduler.db.engine.make_engine`` so that
    migrations see the same connection settings (SQLite foreign keys,
    MySQL SQL mode) as the API.
    """
    if connection is None:
        with api.get_engine().connect() as conn:
            yield conn
        return
    engine = api.make_engine(connection)
    try:
        with engine.connect() as conn:
            yield conn
    finally:
        engine.dispose()


def head() -> str:
    """The newest revision shipped with this code."""
    scripts = alembic_script.ScriptDirectory.from_config(_config())
    return scripts.get_current_head()


def db_sync(version: str | None = None, connection: str | None = None) -> None:
    """Upgrade the schema to ``version`` (default: the newest revision).

    ``connection`` is a database URL; without it, ``[database]
    connection`` is used.
    """
    config = _config()
    with _connect(connection) as conn:
        config.attributes['connection'] = conn
        alembic_command.upgrade(config, version or 'head')


def db_version(connection: str | None = None) -> str | None:
    """The revision the schema is at, or None for an empty database."""
    with _connect(connection) as conn:
        return alembic_migration.MigrationContext.configure(
            conn).get_current_revision()
