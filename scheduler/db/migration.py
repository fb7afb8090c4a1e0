"""Schema migrations: bring the inventory to a revision, report where it is.

Alembic is configured in code, from the scripts shipped inside this
package, so an installed service needs no ``alembic.ini``.  It is the
one module that imports alembic, and only when a function here runs:
the commands that never migrate start without it.
"""

import contextlib
import fcntl
import os
from typing import Iterator
import zlib

import sqlalchemy as sa

from scheduler.db import api
from scheduler import exception

MIGRATIONS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                              'migrations')


def _config():
    from alembic import config as alembic_config
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
    from alembic import script as alembic_script
    scripts = alembic_script.ScriptDirectory.from_config(_config())
    return scripts.get_current_head()


def known_revisions() -> set:
    """Every revision shipped with this code."""
    from alembic import script as alembic_script
    scripts = alembic_script.ScriptDirectory(MIGRATIONS_DIR)
    return {rev.revision for rev in scripts.walk_revisions()}


def revision_of(conn: sa.Connection) -> str | None:
    """The revision the schema behind ``conn`` is at (None: empty)."""
    from alembic import migration as alembic_migration
    return alembic_migration.MigrationContext.configure(
        conn).get_current_revision()


def command_errors() -> tuple:
    """What alembic raises for an unknown revision and the like."""
    from alembic import util as alembic_util
    return (alembic_util.CommandError,)


#: Names the lock every process takes to migrate one database.
LOCK_NAME = 'scheduler-db-sync'
#: Seconds a process waits for another's migration before giving up.
LOCK_TIMEOUT = 300


def db_sync(version: str | None = None, connection: str | None = None) -> None:
    """Upgrade the schema to ``version`` (default: the newest revision).

    ``connection`` is a database URL; without it, ``[database]
    connection`` is used.  Services starting together on an empty
    database each call this: one migrates while the others wait for it
    (``_sync_lock``), then find the schema at ``version`` and do
    nothing.  A schema at a revision this code does not ship (a newer
    release's) is ``InventorySchemaUnknown``.
    """
    from alembic import command as alembic_command
    config = _config()
    with _connect(connection) as conn, _sync_lock(conn):
        current = revision_of(conn)
        # Ends the read's transaction: alembic's would join it, and
        # nothing would commit the upgrade.
        conn.rollback()
        if current is not None and current not in known_revisions():
            raise exception.InventorySchemaUnknown(revision=current,
                                                   head=head())
        config.attributes['connection'] = conn
        alembic_command.upgrade(config, version or 'head')


#: dialect -> (take, give back) the migration lock, on the server.
_SERVER_LOCKS = {
    'postgresql': ('SELECT pg_advisory_lock(:key)',
                   'SELECT pg_advisory_unlock(:key)'),
    'mysql': ('SELECT GET_LOCK(:name, :timeout)',
              'SELECT RELEASE_LOCK(:name)'),
}


@contextlib.contextmanager
def _sync_lock(conn: sa.Connection) -> Iterator[None]:
    """Hold the database's migration lock: a PostgreSQL advisory lock,
    a MySQL/MariaDB named lock, or for a SQLite file an exclusive lock
    on a file beside it (an in-memory database has one process)."""
    name = conn.dialect.name
    if name in _SERVER_LOCKS:
        take, give_back = _SERVER_LOCKS[name]
        params = {'key': zlib.crc32(LOCK_NAME.encode()), 'name': LOCK_NAME,
                  'timeout': LOCK_TIMEOUT}
        # pg_advisory_lock waits as long as it takes; GET_LOCK answers 1
        # once it holds the lock (0 after the timeout, NULL on error).
        got = conn.execute(sa.text(take), params).scalar()
        if name == 'mysql' and got != 1:
            raise RuntimeError('another process held the schema migration '
                               'lock for %d s' % LOCK_TIMEOUT)
        conn.commit()
        try:
            yield
        finally:
            conn.rollback()
            conn.execute(sa.text(give_back), params)
            conn.commit()
        return
    path = conn.engine.url.database
    if name != 'sqlite' or not path or path == ':memory:':
        yield
        return
    with open(path + '.sync-lock', 'a') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def db_version(connection: str | None = None) -> str | None:
    """The revision the schema is at, or None for an empty database."""
    with _connect(connection) as conn:
        return revision_of(conn)
