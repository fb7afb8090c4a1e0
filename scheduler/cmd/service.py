"""``scheduler-service``: the scheduler daemon."""

import itertools
import sys
import time

from oslo_config import cfg
from oslo_db import exception as db_exc
from oslo_log import log as logging
from oslo_reports import guru_meditation_report as gmr
from oslo_reports import opts as gmr_opts
import sqlalchemy as sa

from scheduler import broker_login
from scheduler import cmd
from scheduler import config
from scheduler.db import api as db_api
from scheduler.db import availability
from scheduler.db import migration
from scheduler import exception
from scheduler import memory
from scheduler import metrics
from scheduler.resources import liveness
from scheduler import service
from scheduler import version

CONF = cfg.CONF
LOG = logging.getLogger('scheduler.cmd.service')


class DatabaseUnusable(Exception):
    """The inventory could not be reached or used at start (one line)."""


STARTUP_ERRORS = (exception.SchedulerDriverNotFound,
                  exception.SchedulerHostFilterNotFound,
                  exception.SchedulerWeigherNotFound,
                  exception.PluginLoadError,
                  exception.ConfigurationError,
                  exception.InventorySchemaUnknown,
                  DatabaseUnusable)

#: What a PostgreSQL server that answered says of a login it refused
#: (psycopg2 gives such errors no SQLSTATE): no use waiting for it.
_REFUSED_LOGIN = ('authentication failed', 'does not exist',
                  'no password supplied', 'pg_hba.conf')


def _sync_schema() -> None:
    """Bring the inventory to this release's schema, first waiting for a
    database that is away: ``[database] max_retries`` attempts (-1: no
    limit), ``retry_interval`` seconds apart, one WARNING each, as the
    systemd unit's start timeout allows.  A database that refuses the
    login, or any other error, is one line at once.
    """
    attempts = CONF.database.max_retries
    interval = CONF.database.retry_interval
    for attempt in itertools.count(1):
        try:
            migration.db_sync()
            return
        except (db_exc.DBError, sa.exc.SQLAlchemyError, OSError) as e:
            # (OSError: a SQLite file whose directory cannot be made.)
            reason = availability.describe(e)
            if (isinstance(e, OSError) or not availability.is_outage(e)
                    or any(t in reason for t in _REFUSED_LOGIN)):
                raise DatabaseUnusable('the inventory database cannot be '
                                       'used (%s): check [database] '
                                       'connection' % reason)
            if 0 <= attempts <= attempt:
                raise DatabaseUnusable(
                    'the inventory database is unreachable after %d '
                    'attempts, %d s apart ([database] max_retries, '
                    'retry_interval): %s' % (attempt, interval, reason))
        # Outside the handler: oslo.log would append the exception.
        LOG.warning('The inventory database is unreachable (%s): attempt '
                    '%d of %s, retry in %d s', reason, attempt,
                    attempts if attempts >= 0 else 'unlimited', interval)
        time.sleep(interval)


def main(argv: list | None = None) -> None:
    # Before any thread starts (oslo.messaging's, the workers').
    memory.limit_arenas()
    config.parse_args(sys.argv[1:] if argv is None else argv,
                      prog='scheduler-service')
    # SIGUSR2 prints a Guru Meditation report: threads, green threads and
    # configuration (secrets masked), without stopping the service.
    gmr_opts.set_defaults(CONF)
    gmr.TextGuruMeditation.setup_autorun(version.VersionInfo, conf=CONF)
    CONF.log_opt_values(LOG, logging.DEBUG)
    # The service does not report; its computes do, at their own
    # interval: a warning, since this file's report_interval may not be
    # theirs (it is the simulator's when they share the file).
    problem = liveness.interval_problem(CONF.scheduler.report_interval,
                                        CONF.scheduler.service_down_time)
    if problem:
        LOG.warning('%s (if the computes report at that interval)',
                    problem[1])
    # Once, here: the workers fork after it.
    too_high = config.reconnect_interval_problem()
    if too_high:
        LOG.warning('%s', too_high)
    failure = None
    try:
        _sync_schema()
        server = service.Service.create(binary='scheduler-service',
                                        topic=CONF.scheduler.topic)
        # A wrong password or virtual host: one line and an exit, not
        # workers that never serve (see scheduler.broker_login).
        broker_login.check()
    except STARTUP_ERRORS + (broker_login.LoginRefused,) as e:
        failure = e
    if failure is not None:
        # Outside the handler: oslo.log would append the exception again.
        config.exit_on_startup_error('scheduler-service', failure)
    # Before the workers fork: they all write where this says.
    metrics.prepare(CONF)
    # The migrations' connection is closed, not kept by the launcher
    # for its whole life: only workers hold connections.
    db_api.reset_engine()
    try:
        service.launch(server).wait()
    except service.StartupFailed as e:
        failure = e
    if failure is not None:
        # The launching process logged it already.
        config.exit_on_startup_error('scheduler-service', failure,
                                     logged=True)
    cmd.exit_now(0)
