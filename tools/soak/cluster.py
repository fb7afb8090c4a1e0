"""The soak's processes: its broker, database, proxy, services and fleet.

Two ``scheduler-service`` daemons (``sched-0``, ``sched-1``), each with
its workers, share one inventory (PostgreSQL or MariaDB) that they
reach through a TCP proxy (``tests.functional.tcp_proxy``: stopping it cuts the
database); one ``scheduler-compute-sim`` runs the fleet.  Everything
talks over the soak's own RabbitMQ node (``tools.soak.broker``).
Daemons are started the way the functional tests start them
(``tests.functional.daemons``).  A restarted service keeps its host
name and gets a log file of its own generation (``sched-0.g2.log``),
so that no log is overwritten.
"""

import contextlib
import os
import subprocess

import sqlalchemy as sa

from scheduler import context
from scheduler.db import migration
from scheduler import rpcapi
from tests.functional import daemons
from tests.functional import db_servers
from tests.functional import tcp_proxy
from tools.soak import broker as broker_mod

#: ``--db`` -> its server in ``db_servers.SERVERS``.
BACKENDS = {'postgresql': 'postgresql', 'mariadb': 'mysql'}


def inventory_database(db: str = 'postgresql'):
    """A throw-away database on the machine's PostgreSQL or MariaDB
    (``BACKENDS``), made and dropped as the functional tests' (which
    stops the soak's daemons before the drop: ``daemons.add_stopper``)."""
    return contextlib.contextmanager(db_servers.throwaway_database)(
        BACKENDS[db])


class Service:
    """One scheduler service (a parent and its workers), restartable."""

    STARTED = 'Starting scheduler-service on host %s,'

    def __init__(self, cluster: 'Cluster', name: str):
        self.cluster = cluster
        self.name = name
        self.generation = 0
        self.daemon: daemons.Daemon | None = None

    @property
    def log_path(self) -> str:
        return os.path.join(self.cluster.workdir, '%s.g%d.log'
                            % (self.name, self.generation))

    def start(self) -> None:
        self.generation += 1
        c = self.cluster
        text = '\n'.join([
            '[DEFAULT]', 'transport_url = %s' % c.broker.url,
            'host = %s' % self.name, 'debug = false',
            'log_file = %s' % self.log_path, '',
            '[scheduler]', 'topic = %s' % c.topic,
            'workers = %d' % c.workers, 'executor = %s' % c.executor,
            'service_down_time = %d' % c.service_down_time, '',
            '[compute]', 'topic = %s' % c.compute_topic, '',
            # The default connection budget: whether it fits the shared
            # database server is one of the things a soak checks.
            '[database]', 'connection = %s' % c.proxied_db_url, ''])
        path = daemons.write_multi_config(
            os.path.join(c.workdir, '%s.g%d.conf' % (self.name,
                                                     self.generation)),
            text)
        self.daemon = daemons.Daemon('scheduler-service',
                                     ['--config-file', path],
                                     self.log_path)

    def started_workers(self) -> int:
        return self.daemon.log().count(self.STARTED % self.name)

    def wait_ready(self, workers: int | None = None,
                   timeout: float = 120) -> None:
        """Until its workers (``workers`` start lines) are up."""
        want = self.cluster.workers if workers is None else workers

        def ready():
            if not self.daemon.alive():
                raise RuntimeError('%s exited:\n%s' % (
                    self.name, self.daemon.log()[-3000:]))
            return self.started_workers() >= want
        daemons.wait_for(ready, timeout, interval=0.5,
                         what='%s to start %d worker(s)' % (self.name, want))

    @property
    def pid(self) -> int:
        return self.daemon.proc.pid

    def workers(self) -> list:
        out = subprocess.run(['pgrep', '-P', str(self.pid)],
                             capture_output=True, text=True).stdout
        return [int(p) for p in out.split()]


class Cluster:
    """Every process of the soak; ``stop_all`` ends them."""

    def __init__(self, workdir: str, executor: str, hosts_file: str,
                 services: int = 2, workers: int = 2,
                 report_interval: int = 5, service_down_time: int = 30):
        self.workdir = workdir
        self.executor = executor
        self.hosts_file = hosts_file
        self.workers = workers
        self.report_interval = report_interval
        self.service_down_time = service_down_time
        self.topic = daemons.unique_topic('soak')
        self.compute_topic = daemons.unique_topic('soak-compute')
        self.broker = broker_mod.OwnBroker(workdir)
        #: In front of the database server (its address set by ``start``).
        self.db_proxy = tcp_proxy.TCPProxy(upstream=None)
        self.db_url: str | None = None
        self.services = [Service(self, 'sched-%d' % i)
                         for i in range(services)]
        self.sim: daemons.Daemon | None = None
        self.engine: sa.Engine | None = None

    def claim_expiry_window(self) -> tuple:
        """(earliest, latest) seconds after a claim at which the services
        log its expiry when no report ever lists its instance: once it is
        ``service_down_time`` old, at a worker's next periodic check
        (``[scheduler] periodic_task_interval``, left at its default),
        after a report that still leaves it out."""
        from scheduler.conf import scheduler as scheduler_opts
        periodic = next(o.default
                        for opts in scheduler_opts.list_opts().values()
                        for o in opts if o.name == 'periodic_task_interval')
        return (self.service_down_time,
                self.service_down_time + periodic + self.report_interval)

    @property
    def proxied_db_url(self) -> str:
        url = sa.make_url(self.db_url)
        return url.set(port=self.db_proxy.port).render_as_string(
            hide_password=False)

    @property
    def sim_log(self) -> str:
        return os.path.join(self.workdir, 'sim.log')

    def start(self, db_url: str) -> None:
        """Broker, schema, proxy, services, then the fleet."""
        self.db_url = db_url
        self.broker.start()
        migration.db_sync(connection=db_url)
        self.engine = sa.create_engine(db_url, pool_size=2)
        url = sa.make_url(db_url)
        self.db_proxy.upstream = (url.host, url.port)
        self.db_proxy.start()
        daemons.add_stopper(self.stop_all)
        for service in self.services:
            service.start()
        for service in self.services:
            service.wait_ready()
        self._start_sim()

    def caller_config(self) -> str:
        """The config file of this process's callers."""
        return daemons.write_multi_config(
            os.path.join(self.workdir, 'callers.conf'),
            '[DEFAULT]\ntransport_url = %s\nlog_file = %s\n\n'
            '[scheduler]\ntopic = %s\n\n[compute]\ntopic = %s\n'
            % (self.broker.url, os.path.join(self.workdir, 'callers.log'),
               self.topic, self.compute_topic))

    def _start_sim(self) -> None:
        path = daemons.write_multi_config(
            os.path.join(self.workdir, 'sim.conf'),
            '[DEFAULT]\ntransport_url = %s\nhost = sim\nlog_file = %s\n'
            'debug = false\n\n[scheduler]\ntopic = %s\nreport_interval = '
            '%d\n\n[compute]\ntopic = %s\n'
            % (self.broker.url, self.sim_log, self.topic,
               self.report_interval, self.compute_topic))
        self.sim = daemons.Daemon(
            'scheduler-compute-sim',
            ['--config-file', path, '--fleet', self.hosts_file,
             '--server-name', daemons.unique_topic('fleet')],
            self.sim_log)

    def wait_for_fleet(self, hosts: int, timeout: float = 180) -> None:
        """Until every host's usage row is in the inventory."""
        def saved():
            with self.engine.connect() as conn:
                return conn.execute(sa.text(
                    'SELECT count(*) FROM node_usage')).scalar() >= hosts
        daemons.wait_for(saved, timeout, interval=1,
                         what='%d hosts in the inventory' % hosts)

    def answers(self) -> bool:
        probe = rpcapi.SchedulerAPI(timeout=5)
        return bool(probe.get_version_info(context.get_admin_context()))

    def db_connections(self) -> tuple:
        """Connections on the inventory database, and on the whole
        server (shared with everyone on the machine)."""
        name = sa.make_url(self.db_url).database
        if self.engine.dialect.name == 'postgresql':
            query = ('SELECT count(*) FILTER (WHERE datname = :n), count(*) '
                     'FROM pg_stat_activity')
        else:
            # MariaDB: every client thread of the server (PROCESS
            # privilege: the soak connects as root).
            query = ('SELECT count(CASE WHEN db = :n THEN 1 END), count(*) '
                     'FROM information_schema.processlist '
                     "WHERE command <> 'Daemon'")
        with self.engine.connect() as conn:
            return conn.execute(sa.text(query), {'n': name}).one()

    def stop_services(self, timeout: float = 90) -> list:
        """SIGTERM every service; ``[(name, exit code or None)]``."""
        for service in self.services:
            if service.daemon is not None:
                service.daemon.terminate()
        exits = []
        for service in self.services:
            if service.daemon is None:
                continue
            try:
                code = service.daemon.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                code = None
            service.daemon.stop(1)
            exits.append((service.name, code))
        return exits

    def stop_all(self) -> None:
        """Everything down, in an order that lets each stop cleanly."""
        if self.sim is not None:
            self.sim.stop()
            self.sim = None
        for service in self.services:
            if service.daemon is not None:
                service.daemon.stop()
        if self.db_proxy.running:
            self.db_proxy.stop()
        if self.engine is not None:
            self.engine.dispose()
        self.broker.stop()
