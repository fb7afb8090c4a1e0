"""Start-up pieces without a broker: readiness, refused logins, TLS
options of the side connections, report interval checks, config files.

The end-to-end behaviour (real daemons, RabbitMQ, sd_notify) is in
tests/functional/test_startup.py.
"""

import os
import signal
import socket
import ssl
import subprocess
import sys

from amqp import exceptions as amqp_exceptions
import pytest

from scheduler import broker_login
from scheduler import concurrency
from scheduler import config as config_mod
from scheduler import readiness
from scheduler.resources import liveness
from scheduler import rpc
from scheduler import service as service_mod
from tests.unit import test_concurrency
from tests.unit.test_concurrency import gc_defaults  # noqa: F401


# -- readiness ------------------------------------------------------------

@pytest.fixture
def notify_socket(tmp_path, monkeypatch):
    path = str(tmp_path / 'n.sock')
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(0.2)
    monkeypatch.setenv('NOTIFY_SOCKET', path)
    yield sock
    sock.close()


def _received(sock) -> list:
    got = []
    while True:
        try:
            got.append(sock.recv(100))
        except socket.timeout:
            return got


def test_ready_waits_for_every_worker(notify_socket):
    ready = readiness.Readiness(workers=2)
    # Taken from the environment: the launchers cannot notify early,
    # the workers never see it.
    assert 'NOTIFY_SOCKET' not in os.environ
    ready.handle('READY 101')
    ready.handle('READY 101')
    assert _received(notify_socket) == []
    ready.handle('READY 102')
    assert _received(notify_socket) == [b'READY=1']
    ready.handle('READY 103')  # a worker forked again later
    assert _received(notify_socket) == []


def test_a_worker_line_goes_through_the_pipe(notify_socket):
    ready = readiness.Readiness(workers=1)
    ready.worker_ready()
    line = os.read(ready._read_fd, 100).decode()
    assert line == 'READY %d\n' % os.getpid()


def test_a_fatal_line_stops_the_launching_process(monkeypatch):
    killed = []
    monkeypatch.setattr(readiness.os, 'kill',
                        lambda pid, signo: killed.append((pid, signo)))
    ready = readiness.Readiness(workers=2)
    ready.worker_failed('the broker\nrefused   us')
    line = os.read(ready._read_fd, 1000).decode().rstrip('\n')
    ready.handle(line)
    ready.handle('FATAL 7 another worker, same cause')
    assert ready.fatal == 'the broker refused us'
    assert killed == [(os.getpid(), signal.SIGTERM)]


def test_launched_wait_raises_what_a_worker_could_not_overcome(
        monkeypatch):
    monkeypatch.setattr(readiness.os, 'kill', lambda pid, signo: None)

    class Launcher:
        def wait(self):
            ready.handle('FATAL 5 refused')
            raise SystemExit(0)  # cotyledon's end of a graceful stop

    ready = readiness.Readiness(workers=1)
    with pytest.raises(service_mod.StartupFailed, match='refused'):
        service_mod.Launched(Launcher(), ready).wait()


# -- a refused login in a worker -----------------------------------------

class _RefusingServer:
    def start(self):
        raise amqp_exceptions.AccessRefused(
            'ACCESS_REFUSED - Login was refused using authentication '
            'mechanism AMQPLAIN. For details see the broker logfile.')


def test_a_worker_refused_by_the_broker_reports_it_once(
        monkeypatch, conf, inventory):
    conf.config(transport_url='rabbit://bob:Secret1@broker.example:5672/v1')
    monkeypatch.setattr(concurrency, 'EXECUTOR', 'threading')
    monkeypatch.setattr(rpc, 'get_server',
                        lambda *args, **kwargs: _RefusingServer())
    svc = service_mod.Service.create()
    svc.readiness = readiness.Readiness(workers=1)
    svc.start()
    line = os.read(svc.readiness._read_fd, 2000).decode()
    assert line.startswith('FATAL %d ' % os.getpid())
    assert "broker.example:5672/v1 refused the login of user 'bob'" in line
    assert 'ACCESS_REFUSED' in line and 'Secret1' not in line
    assert svc.servers == []
    svc.stop()


@pytest.mark.usefixtures('gc_defaults')
def test_a_starting_worker_tunes_the_garbage_collector(
        monkeypatch, conf, inventory):
    monkeypatch.setattr(concurrency, 'EXECUTOR', 'threading')
    monkeypatch.setattr(rpc, 'get_server',
                        lambda *args, **kwargs: _RefusingServer())
    svc = service_mod.Service.create()
    svc.readiness = readiness.Readiness(workers=1)
    svc.start()
    test_concurrency.assert_collector_tuned()
    svc.stop()


def test_is_refusal_sees_through_wrapping():
    try:
        try:
            raise amqp_exceptions.NotAllowed('NOT_ALLOWED - vhost v1')
        except Exception as e:
            raise RuntimeError('wrapped') from e
    except RuntimeError as outer:
        assert broker_login.is_refusal(outer)
    assert not broker_login.is_refusal(ConnectionRefusedError())


def test_check_gives_up_after_its_attempts(monkeypatch, conf):
    conf.config(transport_url='rabbit://guest:Wr0ng@127.0.0.1:5672/')
    attempts = []

    class Refusing:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def connect(self):
            attempts.append(1)
            raise amqp_exceptions.AccessRefused('ACCESS_REFUSED - no')

    monkeypatch.setattr(rpc, 'amqp_connection', lambda *a, **k: Refusing())
    with pytest.raises(broker_login.LoginRefused) as err:
        broker_login.check(attempts=3, interval=0)
    assert len(attempts) == 3
    assert err.value.broker == '127.0.0.1:5672/'
    assert err.value.user == 'guest'
    assert 'Wr0ng' not in str(err.value)


def test_check_leaves_an_unreachable_broker_to_the_transport(
        monkeypatch, conf):
    conf.config(transport_url='rabbit://guest:guest@127.0.0.1:5672/')

    def unreachable(*args, **kwargs):
        raise ConnectionRefusedError(111, 'refused')
    monkeypatch.setattr(rpc, 'amqp_connection', unreachable)
    broker_login.check(attempts=3, interval=0)  # no error, no wait


# -- TLS options of the connections made beside oslo.messaging -----------

def test_the_side_connection_gets_the_ca_certificate_and_key(conf):
    conf.config(transport_url='rabbit://guest:guest@broker.example:5671/')
    conf.config(ssl=True, ssl_ca_file='/etc/ca.pem',
                ssl_cert_file='/etc/client.pem',
                ssl_key_file='/etc/client.key',
                group='oslo_messaging_rabbit')
    connection = rpc.amqp_connection()
    assert connection.ssl == {
        'ca_certs': '/etc/ca.pem', 'cert_reqs': ssl.CERT_REQUIRED,
        'certfile': '/etc/client.pem', 'keyfile': '/etc/client.key',
        'server_hostname': 'broker.example'}


def test_tls_from_the_url_query_and_without_a_ca(conf):
    conf.config(transport_url='rabbit://guest:guest@broker.example:5671/'
                              '?ssl=1')
    assert rpc.amqp_connection().ssl is True
    conf.config(transport_url='rabbit://guest:guest@broker.example:5672/')
    assert rpc.amqp_connection().ssl is False


# -- report interval against service_down_time --------------------------

@pytest.mark.parametrize('interval, down, expected', [
    (10, 60, None), (30, 60, None), (31, 60, False), (60, 60, True),
    (90, 60, True)])
def test_interval_problem(interval, down, expected):
    problem = liveness.interval_problem(interval, down)
    assert (problem[0] if problem else None) is expected


# -- rabbit_interval_max set back high -----------------------------------

_STARTS_AND_FAILS = '''
import sys
import scheduler.cmd  # the runtime first, as the console script does
from scheduler.cmd import service
service.main(['--config-file', sys.argv[1]])
'''


@pytest.mark.parametrize('interval_max, warned', [(None, 0), (5, 0),
                                                  (6, 1), (30, 1)])
def test_a_long_reconnection_pause_is_warned_once_at_start(
        tmp_path, interval_max, warned):
    """The service starts as far as its driver (which does not exist
    here, so that it stops there with one line): the warning comes
    before, once."""
    log = tmp_path / 'service.log'
    config = tmp_path / 'service.conf'
    config.write_text(
        '[DEFAULT]\ntransport_url = fake:/\nlog_file = %s\n\n'
        '[scheduler]\ndriver = nothere\n\n[database]\n'
        'connection = sqlite:///%s\n%s' % (
            log, tmp_path / 'inventory.sqlite',
            '' if interval_max is None else
            '\n[oslo_messaging_rabbit]\nrabbit_interval_max = %d\n'
            % interval_max))
    done = subprocess.run(
        [sys.executable, '-c', _STARTS_AND_FAILS, str(config)],
        capture_output=True, text=True, timeout=120,
        stdin=subprocess.DEVNULL,
        env=dict(os.environ, SCHEDULER_NO_MONKEY_PATCH='1'))
    assert done.returncode == 1, done.stderr[-3000:]
    text = log.read_text()
    assert 'nothere' in text, text[-3000:]
    lines = [line for line in text.splitlines()
             if 'rabbit_interval_max is' in line]
    assert len(lines) == warned, text[-3000:]
    if warned:
        assert 'WARNING' in lines[0]
        assert 'rabbit_interval_max is %d s (more than %d s)' % (
            interval_max, config_mod.RECONNECT_INTERVAL_WARN_ABOVE) \
            in lines[0]


# -- configuration files -------------------------------------------------

def test_a_missing_config_file_is_one_line(tmp_path):
    missing = str(tmp_path / 'nowhere.conf')
    done = subprocess.run(
        [sys.executable, '-c',
         'from scheduler import concurrency, config; '
         'config.parse_args(["--config-file", %r], prog="x")' % missing],
        capture_output=True, text=True, timeout=60,
        env=dict(os.environ, SCHEDULER_NO_MONKEY_PATCH='1'))
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == [
        'x: configuration error: Failed to find some config files: %s'
        % missing]


# -- a worker refused after the launch: the whole service ends ----------

_REFUSED_WORKER = '''
import sys
import scheduler.cmd  # the runtime first, as the console script does
from amqp import exceptions
from scheduler import broker_login, rpc
from scheduler.cmd import service


class Refusing:
    def start(self):
        raise exceptions.AccessRefused(
            'ACCESS_REFUSED - Login was refused using authentication '
            'mechanism AMQPLAIN. For details see the broker logfile.')


# The check before the launch passed; the workers' logins do not.
broker_login.check = lambda *args, **kwargs: None
rpc.get_server = lambda *args, **kwargs: Refusing()
service.main(['--config-file', sys.argv[1]])
'''


@pytest.mark.parametrize('executor, workers', [('eventlet', 1),
                                               ('eventlet', 2),
                                               ('threading', 2)])
def test_workers_refused_by_the_broker_end_the_service(
        tmp_path, notify_socket, executor, workers):
    log = tmp_path / 'service.log'
    config = tmp_path / 'service.conf'
    config.write_text(
        '[DEFAULT]\ntransport_url = rabbit://carol:Pw1@127.0.0.1:5672/\n'
        'log_file = %s\n\n[scheduler]\nworkers = %d\n\n[database]\n'
        'connection = sqlite:///%s\n' % (log, workers,
                                         tmp_path / 'inventory.sqlite'))
    done = subprocess.run(
        [sys.executable, '-c', _REFUSED_WORKER, str(config)],
        capture_output=True, text=True, timeout=120,
        stdin=subprocess.DEVNULL,
        env=dict(os.environ, SCHEDULER_EXECUTOR=executor))
    assert done.returncode == 1, done.stderr[-3000:]
    text = log.read_text()
    refused = [line for line in text.splitlines()
               if "refused the login of user 'carol'" in line]
    assert len(refused) == 1, text[-3000:]
    assert 'Traceback' not in text
    assert _received(notify_socket) == [], 'READY=1 without a worker'
    assert done.stderr.strip().splitlines()[-1].startswith(
        "scheduler-service: the message broker 127.0.0.1:5672/ refused")


# -- the launching process, once the service has stopped ----------------

_STOPPED_SERVICE = '''
import atexit
import logging
import sys
import scheduler.cmd  # the runtime first, as the console script does
from scheduler import broker_login
from scheduler import service as service_mod
from scheduler.cmd import service


class Stopped:
    """A launcher whose workers have all exited (SIGTERM came)."""

    def wait(self):
        logging.getLogger('scheduler.cmd.service').info('workers gone')
        return 0


broker_login.check = lambda *args, **kwargs: None
service_mod.launch = lambda server, workers=None: Stopped()
atexit.register(lambda: sys.stderr.write('interpreter teardown ran\\n'))
service.main(['--config-file', sys.argv[1]])
'''


@pytest.mark.parametrize('executor', ['eventlet', 'threading'])
def test_the_launching_process_ends_without_the_interpreter_teardown(
        tmp_path, executor):
    """Once the workers have exited, the launching process flushes its
    log and ends: the interpreter's teardown (collecting and freeing
    all it built) took seconds of a loaded host's stop, after the
    workers had already gone.  Its atexit handlers are the witness."""
    log = tmp_path / 'service.log'
    config = tmp_path / 'service.conf'
    config.write_text(
        '[DEFAULT]\ntransport_url = rabbit://u:p@127.0.0.1:5672/\n'
        'log_file = %s\n\n[database]\nconnection = sqlite:///%s\n'
        % (log, tmp_path / 'inventory.sqlite'))
    done = subprocess.run(
        [sys.executable, '-c', _STOPPED_SERVICE, str(config)],
        capture_output=True, text=True, timeout=120,
        stdin=subprocess.DEVNULL,
        env=dict(os.environ, SCHEDULER_EXECUTOR=executor))
    assert done.returncode == 0, done.stderr[-3000:]
    assert 'workers gone' in log.read_text()
    assert 'interpreter teardown ran' not in done.stderr


# -- the inventory at start-up: away, or upgraded by a newer release ------

def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def _start_service(tmp_path, database: str, extra: str = ''):
    """``scheduler-service`` with ``database``; it never gets as far as
    the broker (nothing listens on port 1)."""
    config = tmp_path / 'service.conf'
    config.write_text(
        '[DEFAULT]\ntransport_url = rabbit://guest:guest@127.0.0.1:1/\n\n'
        '[database]\nconnection = %s\n%s' % (database, extra))
    return subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), 'scheduler-service'),
         '--config-file', str(config)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        timeout=120, env=dict(os.environ, SCHEDULER_NO_MONKEY_PATCH='1'))


@pytest.mark.parametrize('url', [
    'postgresql+psycopg2://scheduler@127.0.0.1:%d/scheduler',
    'mysql+pymysql://scheduler@127.0.0.1:%d/scheduler'])
def test_a_database_away_at_start_is_waited_for_then_one_line(
        tmp_path, url):
    # The admin guide and the systemd unit: an unreachable database is
    # retried [database] max_retries times, retry_interval apart.
    done = _start_service(tmp_path, url % _free_port(),
                          'max_retries = 3\nretry_interval = 1\n')
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 1, done.stdout
    assert 'Traceback' not in done.stdout
    waits = [line for line in lines if 'WARNING' in line]
    assert len(waits) == 2, lines
    assert 'attempt 1 of 3' in waits[0] and 'retry in 1 s' in waits[0]
    assert waits[0].count('Connection refused') == 1, waits[0]
    assert [line for line in lines if 'ERROR' in line or 'CRITICAL' in line
            ] == [lines[-1]]
    assert 'Cannot start: the inventory database is unreachable after 3 ' \
           'attempts' in lines[-1]
    assert 'Connection refused' in lines[-1]


def test_a_schema_newer_than_this_release_refuses_in_one_line(tmp_path):
    from scheduler.db import migration
    database = 'sqlite:///%s' % (tmp_path / 'inventory.sqlite')
    migration.db_sync(connection=database)
    import sqlite3
    with sqlite3.connect(str(tmp_path / 'inventory.sqlite')) as db:
        db.execute("UPDATE alembic_version SET version_num = 'f00dfeed1234'")
    done = _start_service(tmp_path, database)
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 1, done.stdout
    assert len(lines) == 1, lines
    assert ('Cannot start: the inventory schema is at revision '
            'f00dfeed1234, which this release does not know (its newest is '
            '%s)' % migration.head()) in lines[0]


def test_an_inventory_file_that_cannot_be_made_is_one_line(tmp_path):
    """A SQLite inventory under a directory the service cannot create
    (its state directory missing or not its own): one line at once."""
    done = _start_service(
        tmp_path, 'sqlite:////proc/no-such-dir/inventory.sqlite',
        'max_retries = 50\nretry_interval = 10\n')
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 1, done.stdout
    assert len(lines) == 1, lines
    assert 'Cannot start: the inventory database cannot be used' in lines[0]
    assert '/proc/no-such-dir' in lines[0]
