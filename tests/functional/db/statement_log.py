"""What reaches the database driver, recorded."""

import sqlalchemy as sa

from scheduler.db import engine


class StatementLog:
    """What reaches the database driver while in use: statements,
    commits, and BEGINs (psycopg2 sends one of its own before the first
    statement of a transaction, unless the connection is in
    autocommit)."""

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
        if not getattr(conn.connection.driver_connection, 'autocommit',
                       True):
            self.begins += 1

    def _commit(self, conn):
        self.commits += 1
