"""Options in ``[database]``: oslo.db's options, with our defaults.

oslo.db's pool defaults (5 connections plus 50 of overflow a process)
let two services of two workers open more connections than a stock
PostgreSQL (``max_connections`` 100) or MariaDB (151) allows.  Ours
give each worker 10 at most (``scheduler.db.engine.connection_budget``
also bounds them by the requests a worker serves at once): a request
holds one connection at a time, and claims and report batches are
short transactions, so a few connections serve many requests.
``scheduler-manage config check`` compares the budget with the
server's ``max_connections``.

The whole budget is the pool (no overflow): SQLAlchemy closes an
overflow connection as soon as it is returned while the pool holds its
size of idle ones, so a busy worker opened and closed connections at
every peak, each opening a new server process and the request that
opened it waiting for that.
"""

from oslo_config import cfg
from oslo_db import options as db_options

_DEFAULT_SQL_CONNECTION = 'sqlite:///$state_path/scheduler.sqlite'
#: Connections a worker keeps open once opened, and none beyond them.
DEFAULT_MAX_POOL_SIZE = 10
DEFAULT_MAX_OVERFLOW = 0


def register_opts(conf: cfg.ConfigOpts) -> None:
    db_options.set_defaults(conf, connection=_DEFAULT_SQL_CONNECTION,
                            max_pool_size=DEFAULT_MAX_POOL_SIZE,
                            max_overflow=DEFAULT_MAX_OVERFLOW)


def list_opts() -> dict:
    # oslo.db's own namespace documents [database]; listing it here too
    # would duplicate it in the sample.
    return {}
