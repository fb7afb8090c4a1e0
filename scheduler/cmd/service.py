"""``scheduler-service``: the scheduler daemon."""

import sys

from oslo_config import cfg
from oslo_log import log as logging
from oslo_reports import guru_meditation_report as gmr
from oslo_reports import opts as gmr_opts

from scheduler import config
from scheduler.db import migration
from scheduler import exception
from scheduler import memory
from scheduler import metrics
from scheduler import service
from scheduler import version

CONF = cfg.CONF
LOG = logging.getLogger('scheduler.cmd.service')

STARTUP_ERRORS = (exception.SchedulerDriverNotFound,
                  exception.SchedulerHostFilterNotFound,
                  exception.SchedulerWeigherNotFound,
                  exception.PluginLoadError,
                  exception.ConfigurationError)


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
    try:
        migration.db_sync()
        server = service.Service.create(binary='scheduler-service',
                                        topic=CONF.scheduler.topic)
    except STARTUP_ERRORS as e:
        LOG.error('Cannot start: %s', e)
        sys.exit('scheduler-service: %s' % e)
    # Before the workers fork: they all write where this says.
    metrics.prepare(CONF)
    service.launch(server).wait()
