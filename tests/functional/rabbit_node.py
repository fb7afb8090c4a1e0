"""A RabbitMQ node of the tests' own, to stop and restart at will.

The shared broker on 5672 is everyone's: tests that restart a broker
start their own node here, on free loopback ports, with its own node
name, database and log directories and no plugins (no management
listener), and stop it at the end.  Without ``rabbitmq-server`` on
the machine the test is skipped loudly (a failure under ``CI=true``,
as for the other services: ``services.unreachable``).

Starting a node takes seconds of a busy machine, so the tests of a
module share one (``Share``): each test works in a virtual host of its
own, deleted after it with every queue and exchange in it, and finds
the node running whatever the test before it left.
"""

import json
import os
import shutil
import socket
import subprocess
import time
import uuid

import kombu

from tests.functional import services


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def _scripts() -> tuple[str, str]:
    """The node's own ``rabbitmq-server`` and ``rabbitmqctl`` scripts.

    Debian's ``/usr/sbin`` wrappers switch to the ``rabbitmq`` user,
    who cannot write the test's directories: the scripts they wrap
    (next to the resolved wrapper) run as whoever starts them.
    """
    found = shutil.which('rabbitmq-server')
    if found is None:
        services.unreachable('rabbitmq-server is not installed: the broker '
                             'restart tests need a RabbitMQ node of their '
                             'own')
    real_dir = os.path.dirname(os.path.realpath(found))
    server = os.path.join(real_dir, 'rabbitmq-server')
    ctl = os.path.join(real_dir, 'rabbitmqctl')
    if not (os.path.exists(server) and os.path.exists(ctl)):
        server, ctl = found, shutil.which('rabbitmqctl') or 'rabbitmqctl'
    return server, ctl


def _write_cookie(home: str) -> None:
    """Give the node and its CLI one Erlang cookie before either starts.

    Left to themselves, the server and the first ``rabbitmqctl`` both
    find no ``.erlang.cookie`` in the shared home, each makes one of its
    own, and the one that loses the race never reaches the other
    ("Erlang distribution failed") for as long as the node lives.
    """
    path = os.path.join(home, '.erlang.cookie')
    if os.path.exists(path):
        return
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
    with os.fdopen(fd, 'w') as f:
        f.write(uuid.uuid4().hex.upper())


class RabbitNode:
    """One RabbitMQ node in ``base_dir``; ``url`` reaches it as guest."""

    def __init__(self, base_dir: str):
        self._server, self._ctl = _scripts()
        self.base = base_dir
        self.port = _free_port()
        self.name = 'sched-test-%s@localhost' % uuid.uuid4().hex[:8]
        home = os.path.join(base_dir, 'home')
        for sub in ('home', 'mnesia', 'log'):
            os.makedirs(os.path.join(base_dir, sub), exist_ok=True)
        _write_cookie(home)
        plugins = os.path.join(base_dir, 'enabled_plugins')
        with open(plugins, 'w') as f:
            f.write('[].\n')
        config = os.path.join(base_dir, 'rabbitmq')
        with open(config + '.conf', 'w') as f:
            # Overrides the machine's listener (the shared 5672).
            f.write('listeners.tcp.1 = 127.0.0.1:%d\n'
                    'loopback_users.guest = true\n' % self.port)
        self.env = dict(
            os.environ, HOME=home, RABBITMQ_NODENAME=self.name,
            RABBITMQ_NODE_IP_ADDRESS='127.0.0.1',
            RABBITMQ_NODE_PORT=str(self.port),
            RABBITMQ_DIST_PORT=str(_free_port()),
            RABBITMQ_MNESIA_BASE=os.path.join(base_dir, 'mnesia'),
            RABBITMQ_LOG_BASE=os.path.join(base_dir, 'log'),
            RABBITMQ_ENABLED_PLUGINS_FILE=plugins,
            RABBITMQ_CONFIG_FILE=config,
            RABBITMQ_PID_FILE=os.path.join(base_dir, 'node.pid'))
        self._out = None
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return self.url_of('')

    def url_of(self, vhost: str) -> str:
        """The transport URL of ``vhost`` on this node ('' the default)."""
        return 'rabbit://guest:guest@127.0.0.1:%d/%s' % (self.port, vhost)

    def ctl(self, *args, timeout: float = 60,
            check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run([self._ctl, '-q', '-n', self.name] + list(args),
                              env=self.env, capture_output=True, text=True,
                              timeout=timeout, check=check)

    def start(self, timeout: float = 120) -> 'RabbitNode':
        self._out = open(os.path.join(self.base, 'server.out'), 'a')
        self.proc = subprocess.Popen(
            [self._server], env=self.env, stdin=subprocess.DEVNULL,
            stdout=self._out, stderr=subprocess.STDOUT,
            start_new_session=True)
        self._await_startup(timeout)
        return self

    def _await_startup(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError('rabbitmq-server exited (%s); see %s'
                                     % (self.proc.returncode, self.base))
            done = self.ctl('await_startup', timeout=timeout, check=False)
            if done.returncode == 0:
                return
            if time.monotonic() > deadline:
                raise AssertionError('RabbitMQ node %s did not start: %s'
                                     % (self.name, done.stderr))
            time.sleep(0.5)

    def stop_app(self) -> None:
        """The broker goes down: connections closed, transient queues
        gone; the Erlang node stays up for ``start_app``."""
        self.ctl('stop_app')

    def start_app(self, timeout: float = 120) -> None:
        """The broker back up.  ``start_app`` returns once the broker
        application has booted, its listener included: a connection
        confirms it, cheaper than another ``rabbitmqctl`` (an Erlang VM
        of its own, seconds of a busy machine)."""
        self.ctl('start_app', timeout=timeout)
        deadline = time.monotonic() + timeout
        while not self.running():
            if time.monotonic() > deadline:
                raise AssertionError('RabbitMQ node %s takes no connection '
                                     'after start_app' % self.name)
            time.sleep(0.2)

    def consumers(self, queue: str, vhost: str = '') -> int:
        """Consumers of ``queue`` in ``vhost`` (0 when it does not
        exist)."""
        try:
            with kombu.Connection(self.url_of(vhost).replace(
                    'rabbit://', 'amqp://', 1), connect_timeout=5) as conn:
                return conn.default_channel.queue_declare(
                    queue=queue, passive=True).consumer_count
        except Exception:  # not there (yet)
            return 0

    def running(self) -> bool:
        """Whether the broker takes a connection now (quicker than
        ``rabbitmqctl``, which boots an Erlang VM of its own)."""
        if self.proc is None or self.proc.poll() is not None:
            return False
        try:
            with kombu.Connection(self.url.replace('rabbit://', 'amqp://',
                                                   1),
                                  connect_timeout=5) as conn:
                conn.connect()
            return True
        except Exception:  # down, starting or hung
            return False

    def ensure_running(self, timeout: float = 120) -> None:
        """The node up with its broker application running, whatever a
        test left: its application stopped (``start_app``), or the node
        gone or not answering (started again, killed first)."""
        if self.running():
            return
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.start_app(timeout)
                return
            except (subprocess.SubprocessError, AssertionError):
                pass
        self.stop()
        self.start(timeout)

    def stop(self) -> None:
        if self.proc is None:
            return
        try:
            self.ctl('stop', timeout=60, check=False)
        except subprocess.TimeoutExpired:
            pass  # not answering: killed below
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, 9)
            self.proc.wait(10)
        self.proc = None
        if self._out is not None:
            self._out.close()


class Share:
    """One test's share of a node: a virtual host of its own.

    What a test declares (queues, exchanges, quorum queues with their
    messages) lives in its virtual host and goes with it, so that the
    next test on the node starts from nothing, as on a node of its own.
    Stopping and starting the broker is the node's, as before.
    """

    def __init__(self, node: RabbitNode):
        self.node = node
        self.vhost = 'test-%s' % uuid.uuid4().hex[:12]
        node.ensure_running()
        # The virtual host and guest's rights on it in one command (each
        # boots an Erlang VM of its own: seconds of a busy machine).
        path = os.path.join(node.base, '%s.json' % self.vhost)
        with open(path, 'w') as f:
            json.dump({'vhosts': [{'name': self.vhost}],
                       'permissions': [{'user': 'guest', 'vhost': self.vhost,
                                        'configure': '.*', 'write': '.*',
                                        'read': '.*'}]}, f)
        node.ctl('import_definitions', path)

    @property
    def url(self) -> str:
        return self.node.url_of(self.vhost)

    def stop_app(self) -> None:
        self.node.stop_app()

    def start_app(self, timeout: float = 120) -> None:
        self.node.start_app(timeout)

    def consumers(self, queue: str) -> int:
        return self.node.consumers(queue, self.vhost)

    def queue_types(self) -> dict:
        """Each queue of the virtual host by name: its type."""
        listed = self.node.ctl('list_queues', '-p', self.vhost,
                               'name', 'type').stdout
        return dict(line.split('\t')[:2] for line in listed.splitlines()
                    if '\t' in line)

    def close(self) -> None:
        """Delete the virtual host; a node that cannot (hung) is
        stopped, and the next test starts it again."""
        try:
            self.node.ensure_running()
            self.node.ctl('delete_vhost', self.vhost)
        except (subprocess.SubprocessError, AssertionError) as e:
            print('RabbitMQ node %s stopped: %s' % (self.node.name, e))
            self.node.stop()
