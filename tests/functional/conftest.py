"""Fixtures for functional tests: real RabbitMQ, real databases, real daemons.

``scheduler_cluster`` starts ``scheduler-service`` and
``scheduler-compute-sim`` as processes with their own config file, on a
topic no other test uses, and points this process's ``SchedulerAPI`` at
them.
"""

import os
import subprocess
import warnings

import kombu
from oslo_config import cfg
import pytest

from scheduler import context
from scheduler import rpc
from scheduler import rpcapi
from tests.functional.broker_users import guide_users  # noqa: F401
from tests.functional import daemons
from tests.functional import rabbit_node
from tests.functional.db_servers import mysql_url  # noqa: F401 (fixture)
from tests.functional.db_servers import postgresql_url  # noqa: F401
from tests.functional import services

CONF = cfg.CONF

# This session's control exchange, for this process and every daemon
# and command of the session: deleted at its end (``_tidy_broker``).
daemons.CONTROL_EXCHANGE = daemons.unique_topic('scheduler-tests')


def _missing_services(terminalreporter) -> list:
    """What the skips of this run say is missing.

    Read from the skip reports, not only from ``services.MISSING``:
    under pytest-xdist the tests run in worker processes, whose list
    the controller printing the summary never sees.
    """
    missing = list(services.MISSING)
    for report in terminalreporter.stats.get('skipped', []):
        longrepr = getattr(report, 'longrepr', None)
        text = str(longrepr[2]) if isinstance(longrepr, tuple) else ''
        _, marker, message = text.partition(services.SKIP_MARKER)
        if marker and message not in missing:
            missing.append(message)
    return missing


def pytest_terminal_summary(terminalreporter):
    missing = _missing_services(terminalreporter)
    if missing:
        terminalreporter.section('SERVICES MISSING: functional tests '
                                 'skipped', sep='!', red=True, bold=True)
        for message in missing:
            terminalreporter.line('  ' + message, red=True)
        terminalreporter.line('  (under CI=true these are failures)')


@pytest.fixture(autouse=True)
def _daemons_of_this_test():
    """Start each test with no daemon on record (``daemons.STARTED``)."""
    daemons.STARTED.clear()
    yield


_TAILS_SHOWN = pytest.StashKey[bool]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed test's report carries the tail of each daemon's log:
    the daemons' logs live in the test's temporary directory, which a
    CI run does not keep, so the output alone must say what the
    services did."""
    outcome = yield
    report = outcome.get_result()
    if (not report.failed or not daemons.STARTED
            or item.stash.get(_TAILS_SHOWN, False)):
        return
    # Once a test: a teardown failing after the call did shows the same.
    item.stash[_TAILS_SHOWN] = True
    for title, text in daemons.log_tails():
        report.sections.append(('%s (%s)' % (title, report.when), text))


@pytest.fixture
def rabbit_url(conf):
    """The broker's URL; this process's reply queues, as the daemons'
    (``daemons.write_multi_config``), go a minute after it is done.
    The session's control exchange (``daemons.CONTROL_EXCHANGE``) is
    this process's too."""
    url = services.require_rabbit()
    _SHARED_BROKER_USED.append(True)
    conf.config(control_exchange=daemons.CONTROL_EXCHANGE)
    conf.config(rabbit_transient_queues_ttl=daemons.TRANSIENT_QUEUES_TTL,
                group='oslo_messaging_rabbit')
    return url


#: Topics the session's clusters used: their fanout queues are deleted
#: at the end of the session.
_TOPICS: set = set()
#: Not empty once a test of the session used the shared broker.
_SHARED_BROKER_USED: list = []


class BrokerLeftovers(UserWarning):
    """Queues or exchanges this session declared and did not delete."""


def _broker_names(kind: str) -> list:
    """The names of the shared broker's ``kind`` (queues, exchanges)."""
    return subprocess.run(
        ['rabbitmqctl', '-q', 'list_%s' % kind, 'name',
         '--no-table-headers'], capture_output=True, text=True,
        timeout=60, check=True).stdout.split()


@pytest.fixture(scope='session', autouse=True)
def _tidy_broker():
    """Delete what the session left on the shared broker; report the rest.

    The fanout queues of every cluster: oslo.messaging names them
    ``<topic>_fanout_<random>`` and lets them expire half an hour after
    their last consumer; the names are only known to the broker, so they
    are listed once, at the end.  The session's control exchange: every
    party declared it, none deleted it.

    Then any queue or exchange still named after one of the session's
    unique names (``daemons.unique_topic``) is reported as a warning: a
    fixture that does not delete what it declared.  Other processes on
    the broker never use these names, so they cannot cause the report.
    """
    yield
    if not _SHARED_BROKER_USED:
        return
    prefixes = tuple('%s_' % topic for topic in _TOPICS)
    try:
        doomed = [name for name in _broker_names('queues')
                  if prefixes and name.startswith(prefixes)
                  and '_fanout_' in name]
        with kombu.Connection(
                services.RABBIT_URL.replace('rabbit://', 'amqp://', 1),
                connect_timeout=5) as conn:
            rpc.delete_names(conn, doomed, [daemons.CONTROL_EXCHANGE])
        left = daemons.own_names(
            _broker_names('queues') + _broker_names('exchanges'))
    except Exception as e:  # never fail a session on its clean-up
        print('could not tidy the shared broker: %s' % e)
        return
    if left:
        warnings.warn(BrokerLeftovers(
            'this session left %d name(s) on the shared broker: %s'
            % (len(left), ', '.join(left))))


class Cluster:
    """One scheduler service plus a simulated fleet, on private topics."""

    def __init__(self, tmp_path, transport_url: str, conf_fixture):
        self.tmp = tmp_path
        self.transport_url = transport_url
        self.conf_fixture = conf_fixture
        self.topic = daemons.unique_topic('scheduler')
        self.compute_topic = daemons.unique_topic('compute')
        _TOPICS.update((self.topic, self.compute_topic))
        self.control_dir = str(tmp_path / 'control')
        os.makedirs(self.control_dir, exist_ok=True)
        self.daemons: list = []
        self.server_names: set = set()
        #: Fleet RPC server names of the simulators started (their
        #: queues are deleted at the end, should a simulator not).
        self.fleet_names: set = set()
        #: Configuration text every daemon of the cluster gets too.
        self.shared_config = ''
        #: Exchanges to delete at the end, besides the topics' own.
        self.exchanges: set = set()
        #: Other queues a test declared (a notification listener's).
        self.queues: set = set()
        # Kept: a test may point the computes at a proxy later.
        self._broker_url = transport_url.replace('rabbit://', 'amqp://', 1)
        self.scheduler = None
        self.sim = None
        self._queues_deleted = False
        # The test process is the caller (a conductor), on the daemons'
        # control exchange (``daemons.write_multi_config``).
        conf_fixture.config(transport_url=transport_url,
                            control_exchange=daemons.CONTROL_EXCHANGE)
        conf_fixture.config(topic=self.topic, group='scheduler')
        conf_fixture.config(topic=self.compute_topic, group='compute')
        self.api = rpcapi.SchedulerAPI(timeout=30)
        self.ctxt = context.RequestContext(user_id='tester',
                                           project_id='functional')
        self.admin_ctxt = context.get_admin_context()

    def service_config(self, name: str, database_url: str,
                       scheduler_opts: dict | None = None,
                       extra: str = '') -> str:
        """Write the service's config file; ``extra`` is appended raw.

        ``database_url`` None: no ``connection``, the default inventory
        (SQLite under ``state_path``)."""
        sched = {'topic': self.topic, 'service_down_time': 6,
                 'report_interval': 1, 'periodic_task_interval': 1}
        sched.update(scheduler_opts or {})
        lines = ['[DEFAULT]',
                 'transport_url = %s' % self.transport_url,
                 'host = %s' % name, 'debug = true',
                 'log_file = %s' % (self.tmp / ('%s.log' % name)),
                 'state_path = %s' % (self.tmp / 'state'), '',
                 '[scheduler]']
        lines += ['%s = %s' % kv for kv in sched.items()]
        lines += ['', '[compute]', 'topic = %s' % self.compute_topic, '',
                  '[database]']
        if database_url is not None:
            lines.append('connection = %s' % database_url)
        lines.append('')
        path = str(self.tmp / ('%s.conf' % name))
        return daemons.write_multi_config(
            path, '\n'.join(lines) + '\n' + self.shared_config + extra)

    def private_exchange(self, rabbit_opts: dict | None = None) -> str:
        """Put every party on a control exchange of its own; return it.

        ``rabbit_opts`` go to ``[oslo_messaging_rabbit]`` of every
        daemon and of this process (the caller).  A party with durable
        or quorum queues cannot share an exchange another declared
        non-durable: RabbitMQ refuses the second declaration.  The
        exchange is deleted with the cluster.
        """
        exchange = daemons.unique_topic('exchange')
        self.exchanges.add(exchange)
        self.conf_fixture.config(control_exchange=exchange)
        lines = ['[DEFAULT]', 'control_exchange = %s' % exchange, '',
                 '[oslo_messaging_rabbit]']
        for key, value in (rabbit_opts or {}).items():
            self.conf_fixture.config(group='oslo_messaging_rabbit',
                                     **{key: value})
            lines.append('%s = %s' % (key, str(value).lower()
                                      if isinstance(value, bool) else value))
        self.shared_config += '\n'.join(lines) + '\n\n'
        return exchange

    def start_scheduler(self, database_url: str, name: str = 'sched',
                        scheduler_opts: dict | None = None, extra: str = '',
                        wait: bool = True) -> daemons.Daemon:
        path = self.service_config(name, database_url, scheduler_opts,
                                   extra)
        daemon = daemons.Daemon('scheduler-service', ['--config-file', path],
                                str(self.tmp / ('%s.log' % name)))
        self.daemons.append(daemon)
        self._queues_deleted = False
        self.scheduler = daemon
        self.server_names.add(name)
        if wait:
            self.wait_ready(daemon, name,
                            int((scheduler_opts or {}).get('workers', 1)))
        return daemon

    def wait_ready(self, daemon: daemons.Daemon, name: str,
                   workers: int = 1, serving_line: bool = True) -> None:
        """Wait until the service answers and its workers have started.

        For services started with ``wait=False``, side by side.
        ``serving_line``: False for a release older than the "is
        serving" line (the rolling upgrade's previous release).
        """
        daemons.wait_for(lambda: self._answers(daemon), 60,
                         what='scheduler-service to answer')
        # Another service on the topic may have answered: wait for
        # this one's workers too.
        started = 'Starting scheduler-service on host %s,' % name
        daemons.wait_for(
            lambda: daemon.log().count(started) >= workers, 60,
            what='%d worker(s) of %s to start' % (workers, name))
        # Answering takes only the request server: wait until every
        # worker consumes all its queues (reports, intake, operators),
        # or a test's first report may find no intake consumer yet.
        if not serving_line:
            return
        daemons.wait_for(
            lambda: 'scheduler-service is serving: ' in daemon.log(), 60,
            what='every worker of %s to consume its queues' % name)

    def _answers(self, daemon) -> bool:
        if not daemon.alive():
            raise AssertionError('scheduler-service exited:\n%s'
                                 % daemon.log()[-3000:])
        probe = rpcapi.SchedulerAPI(timeout=2)
        return bool(probe.get_version_info(self.admin_ctxt))

    def client_config(self, database_url: str) -> str:
        """A config file for scheduler-manage pointing at this cluster."""
        return daemons.write_multi_config(
            str(self.tmp / 'client.conf'),
            '[DEFAULT]\ntransport_url = %s\n\n[scheduler]\ntopic = %s\n\n'
            '[database]\nconnection = %s\n'
            % (self.transport_url, self.topic, database_url))

    def start_sim(self, hosts: int = 4, name: str = 'sim',
                  fleet: str | None = None, report_interval: int = 1,
                  debug: bool = True,
                  extra_args: tuple = (),
                  service_down_time: int | None = None,
                  report_intake: bool = False) -> daemons.Daemon:
        """``service_down_time``: the scheduler's, which the simulator
        checks its report interval against (its default otherwise).
        ``report_intake``: report to the schedulers' intake queue."""
        down = ('service_down_time = %d\n' % service_down_time
                if service_down_time else '')
        if report_intake:
            down += 'report_intake = true\n'
        path = daemons.write_multi_config(
            str(self.tmp / ('%s.conf' % name)),
            '[DEFAULT]\ntransport_url = %s\nhost = %s\nlog_file = %s\n'
            'debug = %s\n\n[scheduler]\ntopic = %s\nreport_interval = %d\n'
            '%s\n[compute]\ntopic = %s\n\n%s'
            % (self.transport_url, name, self.tmp / ('%s.log' % name),
               str(debug).lower(), self.topic, report_interval, down,
               self.compute_topic, self.shared_config))
        args = ['--config-file', path, '--control-dir', self.control_dir]
        args += ['--fleet', fleet] if fleet else ['--hosts', str(hosts)]
        args += list(extra_args)
        if '--server-name' not in args:
            args += ['--server-name', daemons.unique_topic('fleet')]
        self.fleet_names.add(args[args.index('--server-name') + 1])
        daemon = daemons.Daemon('scheduler-compute-sim', args,
                                str(self.tmp / ('%s.log' % name)))
        self.daemons.append(daemon)
        self._queues_deleted = False
        self.sim = daemon
        return daemon

    def stop_all(self) -> None:
        """Stop every daemon (side by side) and delete the queues, once."""
        if not self.daemons and self._queues_deleted:
            return
        for daemon in reversed(self.daemons):
            daemon.terminate()
        for daemon in reversed(self.daemons):
            daemon.stop()
        self.daemons.clear()
        self._delete_queues()
        self._queues_deleted = True

    def _delete_queues(self) -> None:
        """Delete the RPC queues and exchanges the cluster declared.

        oslo.messaging's topic queues (quorum queues too) and the
        exchanges named like a topic outlive their consumers; the fanout
        queues, whose names only the broker knows, are deleted at the
        end of the session (``_tidy_broker``).  A simulator
        deletes its own queue when it stops cleanly; it is deleted here
        too in case it did not.
        """
        queues, exchanges = rpc.service_names(self.topic, self.server_names)
        queues.append(self.compute_topic)
        queues += ['%s.%s' % (self.compute_topic, fleet)
                   for fleet in self.fleet_names]
        queues += sorted(self.queues)
        # A fanout exchange goes with its last queue, unless a caller
        # declared it (to cast) when no queue was bound any more.
        exchanges += sorted(self.exchanges)
        try:
            with kombu.Connection(self._broker_url,
                                  connect_timeout=5) as conn:
                rpc.delete_names(conn, queues, exchanges)
        except Exception as e:  # never fail a test on its clean-up
            print('could not delete the queues of %s: %s' % (self.topic, e))


@pytest.fixture
def cluster(tmp_path, rabbit_url, conf):
    c = Cluster(tmp_path, rabbit_url, conf)
    daemons.add_stopper(c.stop_all)
    yield c
    daemons.remove_stopper(c.stop_all)
    c.stop_all()
    rpc.cleanup()


@pytest.fixture(scope='module')
def _module_rabbit_node(tmp_path_factory):
    """A RabbitMQ node for the tests of a module (``broker``), started
    by the first of them."""
    node = rabbit_node.RabbitNode(str(tmp_path_factory.mktemp('rabbit')))
    try:
        yield node
    finally:
        node.stop()


@pytest.fixture
def broker(_module_rabbit_node):
    """A RabbitMQ node to stop and start at will, for this test alone:
    a virtual host of its own on the module's node
    (``rabbit_node.Share``)."""
    share = rabbit_node.Share(_module_rabbit_node)
    try:
        yield share
    finally:
        daemons.stop_daemons_first()
        share.close()


@pytest.fixture
def own_cluster(tmp_path, broker, conf):
    conf.config(rabbit_transient_queues_ttl=daemons.TRANSIENT_QUEUES_TTL,
                group='oslo_messaging_rabbit')
    c = Cluster(tmp_path, broker.url, conf)
    daemons.add_stopper(c.stop_all)
    yield c
    daemons.remove_stopper(c.stop_all)
    c.stop_all()
    rpc.cleanup()
