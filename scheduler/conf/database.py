"""Options in ``[database]``: oslo.db's options, with our default connection.
"""

from oslo_config import cfg
from oslo_db import options as db_options

_DEFAULT_SQL_CONNECTION = 'sqlite:///$state_path/scheduler.sqlite'


def register_opts(conf: cfg.ConfigOpts) -> None:
    db_options.set_defaults(conf, connection=_DEFAULT_SQL_CONNECTION)


def list_opts() -> dict:
    # oslo.db's own namespace documents [database]; listing it here too
    # would duplicate it in the sample.
    return {}
