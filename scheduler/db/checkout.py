"""How a server database's pooled connection is checked before use.

oslo.db's engine factory turns on ``pool_pre_ping``: a ``SELECT 1``
round trip on every checkout, several times per request.  Here the ping
is kept only where a dropped connection is likely: one that sat in the
pool for ``IDLE_PING_AFTER`` seconds or more (replaced if the ping
fails, SQLAlchemy's ``DisconnectionError`` contract).  If the server
dropped one in steady use, its first statement fails with a disconnect,
SQLAlchemy invalidates the pool, and ``scheduler.db.engine`` runs the
work once more on a fresh connection where that is safe.

The pre-ping is removed through SQLAlchemy's public engine-plugin hook
(``CreateEnginePlugin``), named in the URL handed to oslo.db, so that
everything else oslo.db's factory sets up stays.
"""

import time

import sqlalchemy as sa
from sqlalchemy.dialects import plugins
from sqlalchemy.engine import CreateEnginePlugin

from oslo_db import exception as db_exc

#: A pooled connection idle this many seconds or more is pinged before
#: use.  Short: a connection in steady use goes back and forth in well
#: under it, and one idle that long costs its ping rarely.
IDLE_PING_AFTER = 1.0

#: The plugin's name in the URL (``?plugin=...``).
PLUGIN = 'scheduler_checkout'

#: ``ConnectionRecord.info`` keys: when the connection went back to the
#: pool, and whether its current checkout skipped the ping.
_IDLE_SINCE = 'scheduler_idle_since'
_UNCHECKED = 'scheduler_unchecked'


class CheckOnIdle(CreateEnginePlugin):
    """Drops ``pool_pre_ping`` from the engine's arguments and pings a
    connection at checkout only after it sat idle (module docstring)."""

    def __init__(self, url, kwargs):
        super().__init__(url, kwargs)
        kwargs.pop('pool_pre_ping', None)
        # The connection checked in last is handed out first: the few a
        # worker's steady load needs stay in use (no ping), the others
        # idle until a burst needs them.
        kwargs['pool_use_lifo'] = True

    def update_url(self, url: sa.URL) -> sa.URL:
        return url       # (SQLAlchemy already took ``plugin`` out)

    def engine_created(self, engine: sa.Engine) -> None:
        watch(engine)


def watch(engine: sa.Engine) -> None:
    """Install the idle ping on ``engine``'s pool."""
    dialect = engine.dialect

    @sa.event.listens_for(engine, 'checkin')
    def _checkin(_dbapi_connection, record):
        if record is not None:
            record.info[_IDLE_SINCE] = time.monotonic()

    @sa.event.listens_for(engine, 'checkout')
    def _checkout(dbapi_connection, record, _proxy):
        since = record.info.get(_IDLE_SINCE)
        # A connection just opened (no check-in yet) needs no ping.
        record.info[_UNCHECKED] = since is not None
        if since is None or time.monotonic() - since < IDLE_PING_AFTER:
            return
        record.info[_UNCHECKED] = False
        try:
            dialect.do_ping(dbapi_connection)
        except Exception as e:
            # The pool drops this connection and checks out another.
            raise sa.exc.DisconnectionError(
                'idle connection failed its ping: %s' % e) from e


def with_plugin(url: sa.URL) -> sa.URL:
    """``url`` naming the plugin (made known to SQLAlchemy first), for
    oslo.db's engine factory."""
    if PLUGIN not in plugins.impls:
        plugins.register(PLUGIN, __name__, 'CheckOnIdle')
    return url.update_query_dict({'plugin': PLUGIN}, append=True)


def unchecked(conn: sa.Connection) -> bool:
    """Whether ``conn`` was handed out of the pool without a ping."""
    return bool(conn.info.get(_UNCHECKED))


def is_stale(error: BaseException) -> bool:
    """Whether ``error`` is a connection the server had dropped."""
    if isinstance(error, db_exc.DBConnectionError):
        return True
    return isinstance(error, sa.exc.DBAPIError) and bool(
        error.connection_invalidated)
