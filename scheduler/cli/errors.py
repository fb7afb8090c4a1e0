"""One line per error for every ``scheduler-manage`` command.

An operator whose scheduler is not running, whose broker is down or
whose database has no schema needs to read what is wrong and where, not
a traceback: ``describe()`` turns each kind of failure into that line.
``--debug`` prints the traceback as well.
"""

from oslo_config import cfg
from oslo_db import exception as db_exc
import oslo_messaging
import sqlalchemy as sa

from scheduler.cli import output
from scheduler import exception
from scheduler import rpc
from scheduler import urls

CONF = cfg.CONF


def _first_line(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0]


def describe(error: BaseException, timeout: float | None) -> str:
    """The one line that says what failed, with secrets masked."""
    if isinstance(error, rpc.MessageBusUnreachable):
        return ('cannot reach the message bus at %s: the call was not '
                'taken within %s s (is the broker running, and is '
                '[DEFAULT] transport_url right?)'
                % (urls.masked_url(CONF.transport_url), _seconds(timeout)))
    if isinstance(error, oslo_messaging.MessagingTimeout):
        return ('no scheduler answered on topic %s at transport %s within '
                '%s s (is scheduler-service running with the same '
                '[scheduler] topic and transport_url? --timeout waits '
                'longer)' % (CONF.scheduler.topic,
                             urls.masked_url(CONF.transport_url),
                             _seconds(timeout)))
    if isinstance(error, cfg.Error):
        return 'configuration error: %s' % _first_line(error)
    if isinstance(error, (db_exc.DBError, sa.exc.SQLAlchemyError)):
        url = CONF.database.connection
        return 'database error at %s: %s' % (
            urls.masked_url(url), urls.mask_secret(_first_line(error), url))
    if isinstance(error, exception.BrokerUnreachable):
        return _first_line(error)
    if isinstance(error, exception.SchedulerException):
        return urls.mask_text(output.error_line(error).splitlines()[0])
    if isinstance(error, oslo_messaging.MessagingException):
        return 'message bus error at %s: %s: %s' % (
            urls.masked_url(CONF.transport_url), type(error).__name__,
            urls.mask_text(_first_line(error)))
    if isinstance(error, OSError):
        return urls.mask_text('%s: %s' % (type(error).__name__,
                                          _first_line(error)))
    return urls.mask_text('unexpected %s: %s (run with --debug for the '
                          'traceback)' % (type(error).__name__,
                                          _first_line(error)))


def exit_code(error: BaseException) -> int:
    """2 for a configuration the command cannot use, else 1."""
    return 2 if isinstance(error, cfg.Error) else 1


def _seconds(timeout: float | None) -> str:
    return '?' if timeout is None else '%g' % timeout
