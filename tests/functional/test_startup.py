"""Start-up as systemd and an operator see it: real daemons, real RabbitMQ.

* ``READY=1`` (sd_notify, observed on a ``NOTIFY_SOCKET`` datagram
  socket this test binds) comes only once every worker consumes: a
  call sent the moment it arrives is answered;
* a broker that refuses the login (a wrong password, a user that does
  not exist) ends the service and the simulator within a bounded time,
  non-zero, with one line naming the broker and the user, and no
  ``READY=1``;
* a configuration file that cannot be read is one line and a non-zero
  exit from every console script;
* SIGHUP under the threading executor reloads in the same workers;
* the simulator joins a broker over TLS signed by a private CA.

Nothing is created on the broker for the refused logins: the shared
broker's ``guest`` with a wrong password, or a user it does not have.
"""

import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import uuid

import oslo_messaging
import pytest

from scheduler import exception
from scheduler import rpc
from scheduler import rpcapi
from tests.functional import daemons
from tests.functional import tcp_proxy
from tests.functional.test_scheduler_service import make_spec
from tests.functional.test_scheduler_service import uuids
from tests.functional.test_scheduler_service import wait_for_hosts

#: Bound on how long a refused login may keep a process alive: a few
#: tries two seconds apart plus the start-up of a loaded box.
REFUSED_EXIT_WITHIN = 60

SCRIPTS = ('scheduler-service', 'scheduler-compute-sim', 'scheduler-demo',
           'scheduler-manage')


class NotifySocket:
    """A systemd notification socket: what a daemon sends, in order."""

    def __init__(self):
        # AF_UNIX paths are short (108 bytes): not under pytest's tmp.
        self._dir = tempfile.mkdtemp(prefix='notify-')
        self.path = os.path.join(self._dir, 'notify.sock')
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)

    @property
    def env(self) -> dict:
        return {'NOTIFY_SOCKET': self.path}

    def receive(self, timeout: float) -> bytes | None:
        """The next datagram, or None after ``timeout`` seconds."""
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(4096)
        except socket.timeout:
            return None

    def close(self) -> None:
        self.sock.close()
        shutil.rmtree(self._dir, ignore_errors=True)


@pytest.fixture
def notify():
    listener = NotifySocket()
    yield listener
    listener.close()


def _start_service(cluster, tmp_path, url: str, notify: NotifySocket,
                   opts: dict, name: str = 'sched') -> daemons.Daemon:
    """``scheduler-service`` on ``url`` with systemd's NOTIFY_SOCKET."""
    db = 'sqlite:///%s' % (tmp_path / ('%s.sqlite' % name))
    saved = cluster.transport_url
    cluster.transport_url = url
    try:
        path = cluster.service_config(name, db, opts)
    finally:
        cluster.transport_url = saved
    daemon = daemons.Daemon('scheduler-service', ['--config-file', path],
                            str(tmp_path / ('%s.log' % name)),
                            env=notify.env)
    cluster.daemons.append(daemon)
    cluster.server_names.add(name)
    return daemon


def _lines(text: str, needle: str) -> list:
    return [line for line in text.splitlines() if needle in line]


def _log(daemon: daemons.Daemon) -> str:
    with open(daemon.log_path, errors='replace') as f:
        return f.read()


def _out(daemon: daemons.Daemon) -> str:
    with open(daemon.log_path + '.out', errors='replace') as f:
        return f.read()


def _assert_one_refusal_line(daemon, user: str, password: str) -> None:
    """One line in the log and one on stderr, naming broker and user."""
    for where, text in (('log', _log(daemon)), ('stderr', _out(daemon))):
        refused = _lines(text, 'refused the login')
        assert len(refused) == 1, '%s:\n%s' % (where, text[-3000:])
        assert '127.0.0.1:5672/' in refused[0], refused[0]
        assert repr(user) in refused[0], refused[0]
        assert 'Traceback' not in text, '%s:\n%s' % (where, text[-3000:])
        assert password not in text


REFUSED_LOGINS = [
    pytest.param('eventlet', 1, 'guest', id='eventlet-wrong-password'),
    pytest.param('threading', 2, 'nosuchuser-%s' % uuid.uuid4().hex[:6],
                 id='threading-2-workers-unknown-user'),
]


@pytest.mark.parametrize('executor, workers, user', REFUSED_LOGINS)
def test_a_refused_login_ends_the_service_with_one_line(
        cluster, tmp_path, notify, executor, workers, user):
    password = 'Wr0ng-%s' % uuid.uuid4().hex[:8]
    daemon = _start_service(
        cluster, tmp_path,
        'rabbit://%s:%s@127.0.0.1:5672/' % (user, password), notify,
        {'executor': executor, 'workers': workers})
    code = daemon.wait_exit(REFUSED_EXIT_WITHIN)
    assert code != 0
    assert notify.receive(0.5) is None, 'READY=1 for a service that ' \
                                        'never served'
    _assert_one_refusal_line(daemon, user, password)


@pytest.mark.parametrize('executor, workers', [('eventlet', 2),
                                               ('threading', 2),
                                               ('eventlet', 1)])
def test_ready_is_sent_once_every_worker_answers(cluster, tmp_path, notify,
                                                 executor, workers):
    # This process's connection is open before the service starts: the
    # call below goes out the moment READY=1 arrives.
    rpc.get_client(oslo_messaging.Target(topic=daemons.unique_topic('warm'))
                   ).cast(cluster.admin_ctxt, 'nothing')
    daemon = _start_service(cluster, tmp_path, cluster.transport_url,
                            notify, {'executor': executor,
                                     'workers': workers})
    message = notify.receive(90)
    assert message == b'READY=1', _log(daemon)[-3000:]
    # A call sent now reaches a queue that a worker consumes: before the
    # fix READY=1 came before any worker had declared one, and the call
    # was dropped (unroutable) and timed out.
    probe = rpcapi.SchedulerAPI(timeout=20)
    assert probe.get_version_info(cluster.admin_ctxt)
    serving = _lines(_log(daemon), 'Serving topic %s' % cluster.topic)
    assert len(serving) == workers, _log(daemon)[-3000:]
    assert notify.receive(1) is None, 'READY=1 is sent once'
    assert daemon.stop() == 0


def test_a_refused_login_ends_the_simulator_with_one_line(cluster,
                                                          tmp_path):
    password = 'Wr0ng-%s' % uuid.uuid4().hex[:8]
    cluster.transport_url = 'rabbit://guest:%s@127.0.0.1:5672/' % password
    sim = cluster.start_sim(hosts=2)
    assert sim.wait_exit(REFUSED_EXIT_WITHIN) != 0
    _assert_one_refusal_line(sim, 'guest', password)


def _run(script: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([daemons.console_script(script)] + list(args),
                          capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, cwd=daemons.REPO_ROOT)


def _unreadable_configs(tmp_path) -> list:
    broken = tmp_path / 'broken.conf'
    broken.write_text('[DEFAULT]\nthis is not an option line\n')
    return [str(tmp_path / 'missing.conf'), str(broken), str(tmp_path)]


@pytest.mark.parametrize('script', SCRIPTS)
def test_an_unreadable_config_file_is_one_line(tmp_path, script):
    extra = {'scheduler-compute-sim': ['--hosts', '1'],
             'scheduler-manage': ['hosts']}.get(script, [])
    for path in _unreadable_configs(tmp_path):
        done = _run(script, '--config-file', path, *extra)
        output = (done.stdout + done.stderr).strip()
        assert done.returncode != 0, output
        assert len(output.splitlines()) == 1, output
        assert path in output and 'Traceback' not in output, output


def _children(pid: int) -> set:
    """The processes ``pid`` forked (its workers)."""
    found = set()
    for task in os.listdir('/proc/%d/task' % pid):
        with open('/proc/%d/task/%s/children' % (pid, task)) as f:
            found.update(int(child) for child in f.read().split())
    return found


def test_sighup_under_threading_reloads_in_the_same_workers(cluster, conf,
                                                            tmp_path):
    db = 'sqlite:///%s' % (tmp_path / 'inventory.sqlite')
    extra = '\n[filter_scheduler]\nenabled_filters = ComputeFilter,RamFilter\n'
    scheduler = cluster.start_scheduler(
        db, scheduler_opts={'executor': 'threading', 'workers': 2},
        extra=extra)
    cluster.start_sim(hosts=3)
    wait_for_hosts(conf, db, 3)
    nowhere = make_spec(availability_zone='nowhere')
    assert cluster.api.select_destinations(cluster.ctxt, nowhere, uuids(1))
    workers = _children(scheduler.proc.pid)
    assert len(workers) == 2

    config_path = str(cluster.tmp / 'sched.conf')
    with open(config_path) as f:
        text = f.read()
    with open(config_path, 'w') as f:
        f.write(text.replace('enabled_filters = ComputeFilter,RamFilter',
                             'enabled_filters = ComputeFilter,'
                             'AvailabilityZoneFilter,RamFilter'))
    scheduler.proc.send_signal(signal.SIGHUP)
    reloaded = "filters ['ComputeFilter', 'AvailabilityZoneFilter', " \
               "'RamFilter']"
    daemons.wait_for(lambda: scheduler.log().count(reloaded) >= 2, 30,
                     what='both workers to log the reloaded filters')
    assert _children(scheduler.proc.pid) == workers, 'workers restarted'
    assert 'Caught SIGTERM' not in scheduler.log()
    # Either worker may take the call: both apply the new filter.
    for _ in range(4):
        with pytest.raises(exception.NoValidHost):
            cluster.api.select_destinations(cluster.ctxt, nowhere, uuids(1))
    assert scheduler.stop() == 0


@pytest.fixture
def tls_broker(tmp_path, rabbit_url):
    """The shared broker behind a TLS endpoint whose certificate a
    private CA signed (here: the certificate is its own CA)."""
    cert, key = tcp_proxy.certificate(tmp_path, 'ca')
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    proxy = tcp_proxy.TCPProxy(ssl_context=context).start()
    yield proxy, cert
    proxy.stop()


def test_the_simulator_joins_a_tls_broker_with_a_private_ca(
        cluster, conf, tmp_path, tls_broker):
    proxy, ca_file = tls_broker
    db = 'sqlite:///%s' % (tmp_path / 'inventory.sqlite')
    cluster.start_scheduler(db)
    # Only the simulator goes through TLS; the same broker behind it.
    cluster.transport_url = proxy.url()
    cluster.shared_config += ('[oslo_messaging_rabbit]\nssl = true\n'
                              'ssl_ca_file = %s\n\n' % ca_file)
    sim = cluster.start_sim(hosts=2)
    wait_for_hosts(conf, db, 2)
    # The host routing keys were bound over TLS too: a build reaches a
    # simulated host.
    daemons.wait_for(lambda: 'serves the casts of 2 simulated' in sim.log(),
                     30, what='the fleet bindings')
    assert not proxy.handshake_errors
    assert sim.alive()


def test_the_service_warns_of_a_report_interval_of_service_down_time(
        cluster, tmp_path):
    db = 'sqlite:///%s' % (tmp_path / 'inventory.sqlite')
    scheduler = cluster.start_scheduler(
        db, scheduler_opts={'report_interval': 6, 'service_down_time': 6})
    [warning] = _lines(scheduler.log(), 'flapping')
    assert 'WARNING' in warning and 'report_interval (6 s)' in warning


def test_a_refused_login_ends_the_demo_with_one_line(rabbit_url):
    password = 'Wr0ng-%s' % uuid.uuid4().hex[:8]
    done = _run('scheduler-demo', '--transport-url',
                'rabbit://guest:%s@127.0.0.1:5672/' % password)
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    refused = _lines(output, 'refused the login')
    assert len(refused) == 1, output
    assert "127.0.0.1:5672/ refused the login of user 'guest'" \
        in refused[0]
    assert 'Traceback' not in output and password not in output
