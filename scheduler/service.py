"""The scheduler service: an oslo.service Service serving the manager."""

import os

from oslo_config import cfg
from oslo_log import log as logging
import oslo_messaging
from oslo_service import service

from scheduler import concurrency
from scheduler import context
from scheduler.db import api as db_api
from scheduler import manager as manager_mod
from scheduler import metrics
from scheduler import rpc

LOG = logging.getLogger(__name__)
CONF = cfg.CONF


class Service(service.Service):
    """Serves a manager on ``Target(topic, server=host)``.

    Transport and RPC server are created in ``start()``, after the
    launcher has forked the workers.  Periodic tasks run on a dynamic
    timer every ``[scheduler] periodic_task_interval`` seconds.
    """

    def __init__(self, host: str, binary: str, topic: str,
                 manager: manager_mod.SchedulerManager,
                 periodic_interval: int, transport=None):
        super().__init__()
        self.host = host
        self.binary = binary
        self.topic = topic
        self.manager = manager
        self.periodic_interval = periodic_interval
        self._transport = transport
        self.rpcserver = None
        self.servers: list = []

    @classmethod
    def create(cls, binary: str = 'scheduler-service',
               topic: str | None = None, host: str | None = None,
               manager: manager_mod.SchedulerManager | None = None,
               transport=None) -> 'Service':
        """Build the service; loads the driver, so bad config fails here."""
        return cls(host=host or CONF.host, binary=binary,
                   topic=topic or CONF.scheduler.topic,
                   manager=manager or manager_mod.SchedulerManager(),
                   periodic_interval=CONF.scheduler.periodic_task_interval,
                   transport=transport)

    def start(self) -> None:
        LOG.info('Starting %(binary)s on host %(host)s, topic %(topic)s, '
                 'driver %(driver)s, executor %(executor)s (pid %(pid)d)',
                 {'binary': self.binary, 'host': self.host,
                  'topic': self.topic,
                  'driver': type(self.manager.driver).__name__,
                  'executor': concurrency.EXECUTOR, 'pid': os.getpid()})
        concurrency.tune_garbage_collector()
        # A forked worker opens its own database connections: whatever
        # the parent pooled (running the migrations) is dropped unclosed.
        db_api.reset_engine(close=False)
        self.manager.driver.host_manager.load_from_inventory()
        # Requests, compute reports and operator casts each get their own
        # server (own topic, own executor pool): a stalled request or a
        # dead caller's undeliverable replies never delay the reports
        # that keep hosts up, and broker permissions can tell them apart.
        target = oslo_messaging.Target(topic=self.topic, server=self.host)
        self.rpcserver = rpc.get_server(target, [self.manager],
                                        transport=self._transport)
        self.servers = [
            self.rpcserver,
            rpc.get_server(rpc.own_exchange_target(rpc.reports_topic(),
                                                   server=self.host),
                           [self.manager.reports],
                           transport=self._transport),
            rpc.get_server(rpc.own_exchange_target(rpc.operator_topic(),
                                                   server=self.host),
                           [self.manager.operator],
                           transport=self._transport)]
        for server in self.servers:
            server.start()
        self.tg.add_dynamic_timer(
            self.periodic_tasks, initial_delay=None,
            periodic_interval_max=self.periodic_interval)
        metrics.start(CONF)

    def periodic_tasks(self, raise_on_error: bool = False) -> float:
        ctxt = context.get_admin_context()
        return self.manager.run_periodic_tasks(ctxt,
                                               raise_on_error=raise_on_error)

    def stop(self, graceful: bool = True) -> None:
        """Stop taking requests, let in-flight ones finish, save state."""
        LOG.info('Stopping %s on %s', self.binary, self.host)
        rpc.stop_servers(self.servers)
        self.servers = []
        try:
            self.manager.driver.host_manager.flush()
        except Exception:
            LOG.exception('Could not save state at shutdown')
        metrics.stop()
        super().stop(graceful=graceful)

    def reset(self) -> None:
        """SIGHUP: the launcher re-read the config; apply it."""
        LOG.info('Reloading configuration')
        try:
            self.manager.reset()
        except Exception as e:
            LOG.error('Configuration reload failed, keeping the running '
                      'pipeline: %s. A plugin package installed or upgraded '
                      'after start-up needs a restart, not a reload: the '
                      'running service lists entry points once', e)
        super().reset()


def launch(server: Service, workers: int | None = None):
    """Run ``server`` in ``workers`` processes; SIGHUP mutates config."""
    concurrency.own_log_locks_after_fork()
    return service.launch(CONF, server,
                          workers=workers or CONF.scheduler.workers,
                          restart_method='mutate')
