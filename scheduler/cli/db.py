"""``db sync`` and ``db version``: the inventory's schema.

Operators run ``db sync`` after installing a new release and before
starting its schedulers; ``db version`` tells where a database is.
Both name the database by its URL with the password masked: the output
ends up in deployment logs and tickets.
"""

import sys

from oslo_config import cfg
from oslo_db import exception as db_exc
import sqlalchemy as sa

from scheduler.cli import output
from scheduler.db import migration
from scheduler import exception
from scheduler.urls import mask_secret
from scheduler.urls import masked_url

CONF = cfg.CONF

#: What ``sync`` and ``version`` may raise for a bad URL, an unreachable
#: server or an unknown revision.
_ERRORS = (db_exc.DBError, sa.exc.SQLAlchemyError,
           exception.SchedulerException, ImportError, ValueError)


def _fail(error: Exception, url: str | None) -> int:
    """One masked line on stderr: the type and the first line of the error."""
    line = output.error_line(error).splitlines()[0]
    sys.stderr.write(mask_secret(line, url) + '\n')
    return 1


def _revision(value: str | None) -> str:
    return value or 'an empty database (no schema)'


def cmd_sync(args) -> int:
    """Upgrade to ``--version`` (default: head) and say what changed."""
    url = CONF.database.connection
    try:
        before = migration.db_version(connection=url)
        migration.db_sync(version=args.version, connection=url)
        after = migration.db_version(connection=url)
        head = migration.head()
    except _ERRORS + migration.command_errors() as e:
        return _fail(e, url)
    if output.structured(args.format):
        output.emit_data(args.format, {
            'database': masked_url(url), 'from': before, 'to': after,
            'head': head, 'changed': before != after})
    elif before == after:
        sys.stdout.write('Database at %s is already at %s\n'
                         % (masked_url(url), _revision(after)))
    else:
        sys.stdout.write('Database at %s upgraded from %s to %s\n'
                         % (masked_url(url), _revision(before),
                            _revision(after)))
    return 0


def cmd_version(args) -> int:
    """Where the schema is, and whether it is at this code's head."""
    url = CONF.database.connection
    try:
        current = migration.db_version(connection=url)
        head = migration.head()
    except _ERRORS + migration.command_errors() as e:
        return _fail(e, url)
    info = {'database': masked_url(url), 'version': current, 'head': head,
            'at_head': current == head}
    if output.structured(args.format):
        output.emit_data(args.format, info)
    else:
        output.emit([{'field': k, 'value': info[k]}
                     for k in ('database', 'version', 'head', 'at_head')],
                    ['field', 'value'])
    return 0
