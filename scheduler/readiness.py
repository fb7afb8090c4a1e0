"""When the service tells systemd it is ready, and when start-up failed.

``READY=1`` (``Type=notify``) means "serving".  oslo.service and
cotyledon send it as soon as the launcher runs, before a worker has even
connected to the broker, so the launching process takes
``NOTIFY_SOCKET`` out of its environment (the launchers and workers
never see it) and keeps it here.  Each worker, once its RPC servers
consume their queues, writes ``READY <pid>`` on a pipe made before the
fork; ``READY=1`` goes once every worker has.  A worker that no restart
will cure (the broker refused its login) writes ``FATAL <pid> <one
line>``: the launching process logs it, stops the service as SIGTERM
would and exits non-zero, rather than respawn workers that fail alike.
One short line per write: POSIX keeps it whole (below ``PIPE_BUF``).
"""

import os
import signal
import socket
import threading

from oslo_log import log as logging

LOG = logging.getLogger(__name__)

NOTIFY_ENV = 'NOTIFY_SOCKET'

#: A fatal line is cut there: every write stays below PIPE_BUF.
MAX_LINE = 2000


def notify_systemd(address: str | None, message: bytes) -> bool:
    """Send ``message`` to systemd's notification socket ``address``."""
    if not address:
        return False
    if address.startswith('@'):  # an abstract socket
        address = '\0' + address[1:]
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        sock.connect(address)
        sock.sendall(message)
        return True
    except OSError as e:
        LOG.warning('Could not notify systemd (%s): %s', address, e)
        return False
    finally:
        sock.close()


class Readiness:
    """Made by the launching process before its workers fork.

    ``worker_ready`` and ``worker_failed`` are called by workers (the
    launching process itself when it runs the service in-process);
    ``watch`` runs in the launching process.
    """

    def __init__(self, workers: int, what: str = 'scheduler-service'):
        self.workers = workers
        self.what = what
        self._notify_socket = os.environ.pop(NOTIFY_ENV, None)
        self._read_fd, self._write_fd = os.pipe()
        self._owner = os.getpid()
        #: The fatal line, once a worker sent one (launching process).
        self.fatal: str | None = None
        #: Workers (pids) that said they serve (launching process).
        self.serving: set = set()
        self.announced = False
        self._watcher: threading.Thread | None = None

    # -- in a worker --------------------------------------------------

    def worker_ready(self) -> None:
        """This worker's RPC servers consume: count it as serving."""
        self._send('READY %d' % os.getpid())

    def worker_failed(self, message: str) -> None:
        """This worker cannot start, and no restart would help."""
        line = ' '.join(str(message).split())[:MAX_LINE]
        self._send('FATAL %d %s' % (os.getpid(), line))

    def _send(self, line: str) -> None:
        try:
            os.write(self._write_fd,
                     (line + '\n').encode('utf-8', 'replace'))
        except OSError as e:  # the launching process is gone
            LOG.debug('Could not tell the launching process %s: %s',
                      line.split()[0], e)

    # -- in the launching process -------------------------------------

    def watch(self) -> None:
        """Read what the workers say, in a thread of its own."""
        if self._watcher is None:
            self._watcher = threading.Thread(
                target=self._watch, name='readiness', daemon=True)
            self._watcher.start()

    def _watch(self) -> None:
        pending = b''
        while True:
            try:
                chunk = os.read(self._read_fd, 4096)
            except OSError as e:
                LOG.debug('Readiness pipe closed: %s', e)
                return
            if not chunk:
                return
            pending += chunk
            *lines, pending = pending.split(b'\n')
            for line in lines:
                self.handle(line.decode('utf-8', 'replace'))

    def handle(self, line: str) -> None:
        """One line from a worker (see the module docstring)."""
        kind, _, rest = line.partition(' ')
        pid_text, _, text = rest.partition(' ')
        try:
            pid = int(pid_text)
        except ValueError:
            LOG.debug('Unreadable readiness line: %r', line)
            return
        if kind == 'READY':
            self.serving.add(pid)
            if not self.announced and len(self.serving) >= self.workers:
                self.announced = True
                LOG.info('%(what)s is serving: %(count)d worker(s) '
                         'consume their queues', {'what': self.what,
                                                  'count': self.workers})
                notify_systemd(self._notify_socket, b'READY=1')
        elif kind == 'FATAL' and self.fatal is None:
            self.fatal = text
            LOG.error('Cannot start: %s', text)
            # The launcher's own SIGTERM handling stops every worker
            # (and the in-process service) as on "systemctl stop".
            os.kill(self._owner, signal.SIGTERM)
