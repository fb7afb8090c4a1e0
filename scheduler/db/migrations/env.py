"""Alembic environment: run the revisions on the connection we are given.

``scheduler.db.migration`` builds the alembic ``Config`` in code and puts
an open SQLAlchemy connection in ``config.attributes['connection']``, so
no ``alembic.ini`` exists at runtime.
"""

from alembic import context

from scheduler.db import models

config = context.config


def run_migrations_online() -> None:
    connection = config.attributes.get('connection')
    if connection is None:
        raise RuntimeError('scheduler.db.migration passes the connection '
                           "in config.attributes['connection']; offline "
                           '(--sql) mode is not supported')
    # Batch mode lets future revisions alter tables on SQLite, which has
    # to rebuild a table to change it.
    context.configure(connection=connection,
                      target_metadata=models.Base.metadata,
                      render_as_batch=True,
                      compare_type=True)
    with context.begin_transaction():
        context.run_migrations()


run_migrations_online()
