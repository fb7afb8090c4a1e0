"""A tiny TCP proxy on 127.0.0.1 to simulate a broker outage.

The RabbitMQ broker is shared by every test and tool on the machine:
stopping it would break everyone's runs.  Instead, a daemon or a client
under test connects through this proxy, and the test ``stop()``s it
(every open connection is cut and new ones are refused, as when a
broker goes down) and ``start()``s it again on the same port.

With an ``ssl_context`` it also terminates TLS, standing in for a
broker's TLS listener (the local broker has none).

Plain native threads: the test process is not monkey-patched.
"""

import socket
import subprocess
import ssl
import threading
import time

_CHUNK = 65536


class TCPProxy:
    """Forwards 127.0.0.1:``port`` to ``upstream`` while started."""

    def __init__(self, upstream: tuple = ('127.0.0.1', 5672),
                 port: int = 0, ssl_context: ssl.SSLContext | None = None,
                 limit: int | None = None, delay: float = 0.0):
        self.upstream = upstream
        #: Seconds each chunk from the client waits before it is sent
        #: on: a slow network, or a busy database server.
        self.delay = delay
        self.port = port
        self.ssl_context = ssl_context
        #: Forward this many connections, then close every new one at
        #: once (a broker that goes away after the first login).
        self.limit = limit
        #: TLS handshakes that failed (wrong CA, plain AMQP, ...).
        self.handshake_errors: list = []
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self._sockets: set = set()
        self.accepted = 0

    @property
    def running(self) -> bool:
        return self._listener is not None

    def url(self, user: str = 'guest', password: str = 'guest',
            vhost: str = '') -> str:
        """A rabbit:// transport URL through the proxy."""
        return 'rabbit://%s:%s@127.0.0.1:%d/%s' % (user, password,
                                                   self.port, vhost)

    def start(self) -> 'TCPProxy':
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(('127.0.0.1', self.port))
        listener.listen(64)
        self.port = listener.getsockname()[1]
        with self._lock:
            self._listener = listener
        threading.Thread(target=self._accept, args=(listener,),
                         name='tcp-proxy-accept', daemon=True).start()
        return self

    def stop(self) -> None:
        """Refuse new connections and cut every open one."""
        with self._lock:
            listener, self._listener = self._listener, None
            open_sockets, self._sockets = self._sockets, set()
        if listener is not None:
            _close(listener)
        for sock in open_sockets:
            _close(sock)

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _addr = listener.accept()
            except OSError:
                return  # stopped
            if self.limit is not None and self.accepted >= self.limit:
                _close(client)
                continue
            if self.ssl_context is not None:
                try:
                    client.settimeout(10)
                    client = self.ssl_context.wrap_socket(client,
                                                          server_side=True)
                    client.settimeout(None)
                except OSError as e:  # ssl.SSLError is one
                    self.handshake_errors.append(e)
                    _close(client)
                    continue
            try:
                server = socket.create_connection(self.upstream, timeout=5)
                server.settimeout(None)
            except OSError:
                _close(client)
                continue
            with self._lock:
                if self._listener is not listener:
                    _close(client)
                    _close(server)
                    return
                self._sockets.update((client, server))
                self.accepted += 1
            for src, dst, delay in ((client, server, self.delay),
                                    (server, client, 0.0)):
                threading.Thread(target=self._pump, args=(src, dst, delay),
                                 name='tcp-proxy-pump', daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket,
              delay: float = 0.0) -> None:
        try:
            while True:
                data = src.recv(_CHUNK)
                if not data:
                    break
                if delay:
                    time.sleep(delay)
                dst.sendall(data)
        except OSError:
            pass
        with self._lock:
            self._sockets.discard(src)
            self._sockets.discard(dst)
        _close(src)
        _close(dst)


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()


def certificate(tmp_path, name: str) -> tuple:
    """A throw-away self-signed certificate for 127.0.0.1 (a private CA of
    its own), and its key."""
    cert, key = tmp_path / ('%s.crt' % name), tmp_path / ('%s.key' % name)
    subprocess.run(['openssl', 'req', '-x509', '-newkey', 'rsa:2048',
                    '-nodes', '-keyout', str(key), '-out', str(cert),
                    '-days', '1', '-subj', '/CN=127.0.0.1',
                    '-addext', 'subjectAltName=IP:127.0.0.1'],
                   check=True, capture_output=True, timeout=60)
    return str(cert), str(key)
