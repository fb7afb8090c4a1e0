"""``scheduler-service``: the scheduler daemon."""

import sys

from oslo_config import cfg
from oslo_log import log as logging

from scheduler import config
from scheduler.db import migration
from scheduler import exception
from scheduler import service

CONF = cfg.CONF
LOG = logging.getLogger('scheduler.cmd.service')

STARTUP_ERRORS = (exception.SchedulerDriverNotFound,
                  exception.SchedulerHostFilterNotFound,
                  exception.SchedulerWeigherNotFound,
                  exception.PluginLoadError,
                  exception.ConfigurationError)


def main(argv: list | None = None) -> None:
    config.parse_args(sys.argv[1:] if argv is None else argv,
                      prog='scheduler-service')
    try:
        migration.db_sync()
        server = service.Service.create(binary='scheduler-service',
                                        topic=CONF.scheduler.topic)
    except STARTUP_ERRORS as e:
        LOG.error('Cannot start: %s', e)
        sys.exit('scheduler-service: %s' % e)
    service.launch(server).wait()
