"""The soak's own RabbitMQ node, which it may stop and start at will.

The broker on 127.0.0.1:5672 is shared by everyone on the machine: the
soak never touches it.  It starts a node of its own, with its own
node name, AMQP and distribution ports, mnesia and log directories
and Erlang cookie (``HOME`` points into the soak's directory), runs
every daemon of the soak on it, and deletes it at the end.

``stop_app`` / ``start_app`` is the outage: the Erlang VM stays up,
every AMQP connection is closed and new ones are refused until the
application is started again, as when a broker restarts.
"""

import os
import shutil
import signal
import socket
import subprocess
import time
import uuid

#: The server and control scripts themselves, not the Debian wrappers
#: in /usr/sbin (they switch to the ``rabbitmq`` user and its cookie,
#: which would reach the shared node).
SERVER = '/usr/lib/rabbitmq/bin/rabbitmq-server'
CTL = '/usr/lib/rabbitmq/bin/rabbitmqctl'

#: Seconds to wait for the node (or its application) to answer.
START_TIMEOUT = 90


def free_port() -> int:
    """A TCP port nobody listens on now, on loopback."""
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


class OwnBroker:
    """One private RabbitMQ node under ``base_dir``."""

    def __init__(self, base_dir: str):
        self.base_dir = os.path.join(base_dir, 'rabbit')
        self.nodename = 'soak-%s@localhost' % uuid.uuid4().hex[:8]
        self.port = free_port()
        self.dist_port = free_port()
        self._proc: subprocess.Popen | None = None
        self._log = None

    @property
    def url(self) -> str:
        return 'rabbit://guest:guest@127.0.0.1:%d/' % self.port

    @property
    def amqp_url(self) -> str:
        return 'amqp://guest:guest@127.0.0.1:%d//' % self.port

    def _env(self) -> dict:
        home = os.path.join(self.base_dir, 'home')
        os.makedirs(home, exist_ok=True)
        config = os.path.join(self.base_dir, 'rabbitmq.conf')
        if not os.path.exists(config):
            with open(config, 'w') as f:
                # Loopback only; guest may log in from loopback.
                f.write('listeners.tcp.1 = 127.0.0.1:%d\n'
                        'loopback_users.guest = true\n' % self.port)
        plugins = os.path.join(self.base_dir, 'enabled_plugins')
        if not os.path.exists(plugins):
            with open(plugins, 'w') as f:
                f.write('[].\n')
        return dict(
            os.environ, HOME=home,
            RABBITMQ_NODENAME=self.nodename,
            RABBITMQ_NODE_IP_ADDRESS='127.0.0.1',
            RABBITMQ_NODE_PORT=str(self.port),
            RABBITMQ_DIST_PORT=str(self.dist_port),
            RABBITMQ_CONFIG_FILE=config[:-len('.conf')],
            RABBITMQ_ENABLED_PLUGINS_FILE=plugins,
            RABBITMQ_MNESIA_BASE=os.path.join(self.base_dir, 'mnesia'),
            RABBITMQ_LOG_BASE=os.path.join(self.base_dir, 'log'),
            RABBITMQ_PID_FILE=os.path.join(self.base_dir, 'node.pid'),
            RABBITMQ_ADVANCED_CONFIG_FILE=os.path.join(self.base_dir,
                                                       'advanced.config'))

    def ctl(self, *args: str, timeout: float = 60) -> str:
        """``rabbitmqctl -n <our node> args``; raises on failure."""
        out = subprocess.run([CTL, '-n', self.nodename] + list(args),
                             env=self._env(), capture_output=True,
                             text=True, timeout=timeout)
        if out.returncode:
            raise RuntimeError('rabbitmqctl %s: %s' % (' '.join(args),
                                                       out.stderr.strip()
                                                       or out.stdout))
        return out.stdout

    def start(self) -> 'OwnBroker':
        os.makedirs(self.base_dir, exist_ok=True)
        self._log = open(os.path.join(self.base_dir, 'server.out'), 'w')
        self._proc = subprocess.Popen(
            [SERVER], env=self._env(), stdin=subprocess.DEVNULL,
            stdout=self._log, stderr=subprocess.STDOUT,
            start_new_session=True)
        self._await()
        return self

    def _await(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if self._proc is not None and self._proc.poll() is not None:
                raise RuntimeError('the soak broker exited (%s); see %s'
                                   % (self._proc.returncode, self.base_dir))
            try:
                self.ctl('await_startup', timeout=30)
                return
            except (RuntimeError, subprocess.TimeoutExpired):
                if time.monotonic() > deadline:
                    raise
                time.sleep(1)

    def stop_app(self) -> None:
        """The outage begins: connections cut, new ones refused."""
        self.ctl('stop_app')

    def start_app(self) -> None:
        self.ctl('start_app')
        self.ctl('await_startup', timeout=60)

    def stop(self) -> None:
        """Stop the node and delete its files."""
        if self._proc is None:
            return
        try:
            self.ctl('stop', timeout=60)
        except Exception:  # then by signal
            pass
        try:
            self._proc.wait(30)
        except subprocess.TimeoutExpired:
            # The script and the Erlang VM it started: the node's own
            # session, nothing else.
            os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.wait(10)
        self._proc = None
        if self._log is not None:
            self._log.close()
        shutil.rmtree(os.path.join(self.base_dir, 'mnesia'),
                      ignore_errors=True)
