"""The service's workers under the threading runtime, reloaded in place.

oslo.service's threading backend runs workers with cotyledon, whose
worker class has no ``reload``: on SIGHUP each worker would end itself
and a new one be forked.  This launcher drives cotyledon (a public API)
directly, with a worker that reloads as the eventlet launcher does
(``restart_method='mutate'``): the parent mutates its configuration,
each worker mutates its own and resets the service.  Everything else
is cotyledon's, as under oslo.service.
"""

import cotyledon
from cotyledon import oslo_config_glue
from oslo_config import cfg
from oslo_log import log as logging
from oslo_service import opts as service_opts

LOG = logging.getLogger(__name__)
CONF = cfg.CONF


class Worker(cotyledon.Service):
    """One worker process running one ``scheduler.service.Service``."""

    name = 'scheduler-service'

    def __init__(self, worker_id: int, service):
        super().__init__(worker_id)
        self.service = service

    def run(self) -> None:
        self.service.start()
        self.service.wait()

    def terminate(self) -> None:
        self.service.stop()

    def reload(self) -> None:
        """SIGHUP: apply the configuration files' mutable options here.

        Not calling cotyledon's ``reload`` (which ends the worker) is
        the point.
        """
        LOG.info('Caught SIGHUP, reloading the configuration in worker '
                 '%d', self.worker_id)
        CONF.mutate_config_files()
        self.service.reset()


class Launcher:
    """``launch()``'s launcher under threading: ``wait()`` runs it."""

    def __init__(self, service, workers: int):
        service_opts.register_service_opts(CONF)
        self.manager = cotyledon.ServiceManager(
            graceful_shutdown_timeout=CONF.graceful_shutdown_timeout)
        oslo_config_glue.link(self.manager, CONF, reload_method='mutate')
        self.manager.add(Worker, workers=workers, args=(service,))

    def wait(self) -> int:
        """Run and supervise the workers until SIGTERM; the exit status.

        cotyledon ends a graceful shutdown with ``sys.exit(0)``.
        """
        try:
            self.manager.run()
        except SystemExit as e:
            return e.code or 0
        return 0

    def stop(self) -> None:
        self.manager.shutdown()
