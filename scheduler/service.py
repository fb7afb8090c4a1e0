"""The scheduler service: an oslo.service Service serving the manager."""

import os
import threading

from oslo_config import cfg
from oslo_log import log as logging
import oslo_messaging
from oslo_service import service

from scheduler import alive_consumer
from scheduler import broker_login
from scheduler import cast_ledger
from scheduler import concurrency
from scheduler import context
from scheduler.db import availability
from scheduler.db import api as db_api
from scheduler import manager as manager_mod
from scheduler import metrics
from scheduler import readiness as readiness_mod
from scheduler import replies
from scheduler import report_consumers
from scheduler import rpc
from scheduler import trust

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
        #: Set by ``launch()``: where a worker says it serves.
        self.readiness: readiness_mod.Readiness | None = None
        # A SIGTERM may come while start() is still connecting: stop()
        # then waits for start() to reach a safe point, and start()
        # starts nothing once a stop was asked for.
        self._lifecycle = threading.Lock()
        self._stop_asked = False
        self._start_done = threading.Event()
        self._start_done.set()
        #: This worker's turn to consume the report queues (``[scheduler]
        #: report_workers``); None: every worker consumes them.
        self.turns: report_consumers.Turns | None = None

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
        self._start_done.clear()
        try:
            self._start()
        finally:
            self._start_done.set()

    def _stopping(self) -> bool:
        with self._lifecycle:
            return self._stop_asked

    def _start(self) -> None:
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
        self._load_saved_state()
        trust.log_binding()
        if self._stopping():
            return
        try:
            self._start_servers()
        except Exception as e:
            if not broker_login.is_refusal(e):
                raise
            # Checked before the launch; the credentials changed since
            # (or a worker was forked again later): no worker can serve.
            rpc.stop_servers(self.servers)
            self.servers = []
            refused = broker_login.describe(e)
            if self.readiness is None:
                raise refused
            self.readiness.worker_failed(str(refused))
            return
        if self._stopping():
            LOG.info('Stopped while starting: not serving topic %s',
                     self.topic)
            return
        self.tg.add_dynamic_timer(
            self.periodic_tasks, initial_delay=None,
            periodic_interval_max=self.periodic_interval)
        if self.turns is not None:
            self.tg.add_timer(report_consumers.RETRY_EVERY,
                              self._mind_report_turn,
                              initial_delay=report_consumers.RETRY_EVERY)
        metrics.start(CONF)
        LOG.info('Serving topic %(topic)s (pid %(pid)d)',
                 {'topic': self.topic, 'pid': os.getpid()})
        if self.readiness is not None:
            self.readiness.worker_ready()

    def _load_saved_state(self) -> None:
        """Load what the inventory holds; put off during an outage.

        A worker forked while the database is away must still start
        (else the launcher forks it again and again): it serves
        ``InventoryUnavailable`` as the others do, and loads once the
        database is back (``HostManager.ensure_loaded``).
        """
        try:
            self.manager.driver.host_manager.load_from_inventory()
        except Exception as e:
            if not availability.is_outage(e):
                raise
            availability.count('loading the saved host states (put off)')

    def _start_servers(self) -> None:
        """Start the RPC servers; each consumes its queues when it returns.

        oslo.messaging declares and binds a server's queues before
        ``start()`` returns: from then on a call is kept for it.
        ``self.servers`` holds the servers started so far; none is
        started once a stop was asked for, and one whose start ended
        after ``stop()`` gave up waiting is stopped here.  The report
        queues' servers only with a turn (``_took_turn``; else later,
        ``_mind_report_turn``).
        """
        # Requests, compute reports and operator casts each get their own
        # server (own topic, own executor pool): a stalled request or a
        # dead caller's undeliverable replies never delay the reports
        # that keep hosts up, and broker permissions can tell them apart.
        target = oslo_messaging.Target(topic=self.topic, server=self.host)
        self.rpcserver = rpc.get_server(target, [self.manager],
                                        transport=self._transport)
        servers = [
            # The 1.4 fanout (older computes' reports, every compute's
            # instance news): every worker, since a fanout message is
            # not delivered again to another.
            rpc.get_server(rpc.own_exchange_target(rpc.reports_topic(),
                                                   server=self.host),
                           [self.manager.reports],
                           transport=self._transport,
                           at_once=_REPORTS_AT_ONCE),
            rpc.get_server(rpc.own_exchange_target(rpc.operator_topic(),
                                                   server=self.host),
                           [self.manager.operator],
                           transport=self._transport),
            # Last: computes without an upgrade level take the request
            # topic consumed without the reports topic for a scheduler
            # older than 1.4, and stop sending (``rpcapi``).
            self.rpcserver]
        self.servers = []
        if not self._start_these(servers):
            return
        self.turns = _turns(self.topic, self.host)
        if self.turns is None or self._took_turn():
            if not self._start_these(self._report_servers()) and \
                    self.turns is not None:
                # Stopped meanwhile, maybe before ``stop()`` saw a turn.
                self.turns.release()

    def _report_servers(self) -> list:
        """The servers of the report queues, each message of which is
        taken by one worker of the deployment."""
        return [
            # Reports of 1.5 computes (``rpc.intake_target``).
            rpc.get_server(rpc.intake_target(server=self.host),
                           [self.manager.intake],
                           transport=self._transport,
                           at_once=_REPORTS_AT_ONCE),
            # Liveness messages of quiet 1.6 computes
            # (``rpc.alive_target``): a batching consumer on RabbitMQ.
            alive_consumer.get_server(self.manager.alive, self.host,
                                      self._transport, REPORTS_AT_ONCE)]

    def _start_these(self, servers: list) -> bool:
        """Start ``servers`` in turn into ``self.servers``; False when a
        stop was asked for meanwhile (what started late is stopped)."""
        for server in servers:
            if self._stopping():
                return False
            server.start()
            with self._lifecycle:
                late = self._stop_asked
                if not late:
                    self.servers.append(server)
            if late:
                rpc.stop_servers([server], grace=servers_grace())
                return False
        return True

    def _took_turn(self) -> bool:
        """Take a free report turn; whether this worker holds one."""
        if not self.turns.take():
            return False
        LOG.info('Consuming the report queues %(intake)s and %(alive)s '
                 '(report turn %(slot)d of %(slots)d, pid %(pid)d)',
                 {'intake': rpc.intake_topic(), 'alive': rpc.alive_topic(),
                  'slot': self.turns.slot + 1, 'slots': self.turns.slots,
                  'pid': os.getpid()})
        return True

    def _mind_report_turn(self) -> None:
        """Timer, every ``report_consumers.RETRY_EVERY`` seconds: the
        holder of a turn publishes its report lag and when it last heard
        the computes; a worker without one hears them (and so needs no
        probe of the broker of its own, ``hearing``), and takes a turn
        once one is free (its holder ended) and starts the report
        queues' servers."""
        try:
            self._report_turn_step()
        except Exception:
            # The timer must keep running: the next step tries again.
            LOG.exception('Could not take a turn on the report queues')

    def _report_turn_step(self) -> None:
        turns = self.turns
        if turns is None or self._stopping():
            return
        stale_after = CONF.scheduler.service_down_time
        lag = self.manager.reports.lag
        if turns.held:
            turns.publish_lag(lag.current(stale_after=stale_after),
                              heard_at=self.manager.hearing.heard_at)
            return
        heard, heard_at = turns.heard(stale_after=stale_after)
        if heard is not None:
            lag.hear(heard, heard_at=heard_at)
        if not self._took_turn():
            return
        started = False
        try:
            started = self._start_these(self._report_servers())
        finally:
            if not started:
                # Stopping, or the servers could not start: the turn is
                # another worker's to take.
                turns.release()

    def periodic_tasks(self, raise_on_error: bool = False) -> float:
        ctxt = context.get_admin_context()
        return self.manager.run_periodic_tasks(ctxt,
                                               raise_on_error=raise_on_error)

    def stop(self, graceful: bool = True) -> None:
        """Stop taking requests, let in-flight ones finish, save state."""
        LOG.info('Stopping %s on %s', self.binary, self.host)
        with self._lifecycle:
            self._stop_asked = True
        if not self._start_done.wait(START_WAIT):
            LOG.warning('Stopping although start-up has not ended after '
                        '%d s: a server it starts later is stopped as it '
                        'comes up', START_WAIT)
        with self._lifecycle:
            servers, self.servers = self.servers, []
        # Calls served from now on may have lost their callers: their
        # replies must not hold the stop for the long post-restart wait.
        replies.stopping()
        self.manager.driver.stopping = True
        grace = servers_grace()
        broker_down = bool(servers) and not rpc.broker_reachable(
            timeout=BROKER_PROBE_TIMEOUT)
        if broker_down:
            # Every connection of the servers retries the broker without
            # a limit, under its lock: waiting for them waits for it.
            grace = BROKER_DOWN_GRACE if grace is None \
                else min(grace, BROKER_DOWN_GRACE)
        # The broker may also go while the stop waits (a node shutting
        # down stops RabbitMQ too): the servers are asked about it again.
        rpc.stop_servers(servers, grace=grace, broker_down=broker_down,
                         probe=lambda: rpc.broker_reachable(
                             timeout=BROKER_PROBE_TIMEOUT),
                         down_grace=BROKER_DOWN_GRACE)
        if self.turns is not None:
            # Its servers are stopped: another worker may consume now.
            self.turns.release()
        try:
            # The builds it left: another worker's at its next takeover.
            cast_ledger.hand_back_all()
        except Exception:
            LOG.exception('Could not hand back the casts left')
        try:
            self.manager.driver.host_manager.flush()
        except Exception:
            LOG.exception('Could not save state at shutdown')
        self.manager.reports.log_unsaved()
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


#: Host reports a server of a worker holds taken off the bus and not
#: yet served, at most (``rpc.get_server``'s ``at_once``).  A report
#: only computes: taking more at once serves none sooner, and a worker
#: behind on reports would make every request wait for them between its
#: round trips.  Reports wait on the bus instead, which the report lag
#: accounts for (``scheduler.report_lag``).
REPORTS_AT_ONCE = 4

_REPORTS_AT_ONCE = {'update_service_capabilities': REPORTS_AT_ONCE}


def _turns(topic: str, host: str) -> report_consumers.Turns | None:
    """This worker's report turns (``[scheduler] report_workers``),
    with one taken if one was free; None when every worker consumes the
    report queues."""
    slots = CONF.scheduler.report_workers
    if not slots:
        return None
    turns = report_consumers.Turns(
        report_consumers.directory_of(CONF.state_path),
        report_consumers.service_name(topic, host), slots)
    try:
        turns.prepare()
        # Once here, so that a file that cannot be opened is found now.
        turns.take()
    except OSError as e:
        LOG.warning('Cannot keep the report turns ([scheduler] '
                    'report_workers) in %(dir)s: %(error)s; every worker '
                    'consumes the report queues',
                    {'dir': turns.directory, 'error': e})
        return None
    return turns


#: Seconds ``stop()`` waits for a start-up in progress (connecting to
#: the broker, declaring queues) to reach a point where every server it
#: started is known, so that none is left consuming after the stop.
START_WAIT = 5


#: Seconds a stopping service waits for the broker to take a connection
#: before it judges it unreachable (one attempt).
BROKER_PROBE_TIMEOUT = 1.0

#: Seconds the RPC servers may take to stop when the broker is
#: unreachable: enough for the calls in flight to finish their database
#: work (their replies cannot go anyway); what is left of the 10 s a
#: stop may take (``config.STOP_WITHIN``) is for saving the state.
BROKER_DOWN_GRACE = 3.0


#: Share of ``graceful_shutdown_timeout`` the RPC servers may take to
#: stop; the rest is for saving state before the launcher kills the
#: worker.
SERVERS_GRACE_SHARE = 0.8


def servers_grace() -> float | None:
    """Seconds the RPC servers may take to stop, None for no bound.

    The launcher kills a worker still stopping after
    ``graceful_shutdown_timeout`` (0: never) without a word of what it
    was doing; the servers get most of that time, so that one still
    busy is logged (with its stack) and the state is saved first.
    """
    try:
        timeout = CONF.graceful_shutdown_timeout
    except cfg.NoSuchOptError:
        return None
    return timeout * SERVERS_GRACE_SHARE if timeout else None


def launch(server: Service, workers: int | None = None) -> 'Launched':
    """Run ``server`` in ``workers`` processes; SIGHUP mutates config.

    systemd hears ``READY=1`` once every worker serves (see
    ``scheduler.readiness``).  Under the threading runtime the workers
    are cotyledon's, reloaded in place on SIGHUP as under eventlet
    (see ``scheduler.threading_launcher``).
    """
    workers = workers or CONF.scheduler.workers
    server.readiness = readiness_mod.Readiness(workers, server.binary)
    concurrency.own_log_locks_after_fork()
    if concurrency.EXECUTOR == concurrency.THREADING:
        from scheduler import threading_launcher
        launcher = threading_launcher.Launcher(server, workers)
    elif workers > 1:
        # oslo.service's launch() would build the same launcher with
        # its default look every 10 ms.
        launcher = service.ProcessLauncher(
            CONF, wait_interval=CHILD_WATCH_EVERY, restart_method='mutate')
        launcher.launch_service(server, workers=workers)
    else:
        launcher = service.launch(CONF, server, workers=workers,
                                  restart_method='mutate')
    return Launched(launcher, server.readiness)


#: Seconds between two looks of a multi-worker service's launching
#: process for a worker that ended (and for a signal it was sent):
#: oslo.service looks every 10 ms by default, which costs the idle
#: parent more CPU than an idle worker spends.  A worker that dies is
#: forked again, and a SIGTERM or SIGHUP to the service passed on to its
#: workers, this much later at most.
CHILD_WATCH_EVERY = 0.5


class Launched:
    """A launched service: ``wait()`` until it ends, then its status."""

    def __init__(self, launcher, readiness: readiness_mod.Readiness):
        self.launcher = launcher
        self.readiness = readiness

    def wait(self):
        """Serve until stopped; ``StartupFailed`` if a worker could not
        start for good (the launcher stopped the service first)."""
        self.readiness.watch()
        try:
            status = self.launcher.wait()
        except SystemExit as e:
            status = e.code
        if self.readiness.fatal:
            raise StartupFailed(self.readiness.fatal)
        return status


class StartupFailed(Exception):
    """A worker could not start, and a restart would not help."""
