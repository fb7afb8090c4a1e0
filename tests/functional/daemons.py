"""Starting the real daemons as processes, each with a real config file."""

import configparser
import os
import signal
import subprocess
import sys
import time
import uuid

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def console_script(name: str) -> str:
    """The installed console script ``name`` next to this interpreter."""
    path = os.path.join(os.path.dirname(sys.executable), name)
    if not os.path.exists(path):
        raise RuntimeError('%s is not installed next to %s; install the '
                           'package (pip install -e .)' % (name,
                                                           sys.executable))
    return path


def write_config(path: str, sections: dict) -> str:
    """Write ``{section: {option: value}}`` as an ini file."""
    parser = configparser.ConfigParser(interpolation=None)
    for section, options in sections.items():
        if section != 'DEFAULT':
            parser.add_section(section)
        for key, value in options.items():
            if isinstance(value, (list, tuple)):
                value = ','.join(value)
            parser.set(section, key, str(value))
    with open(path, 'w') as f:
        parser.write(f)
    return path


#: Seconds the broker keeps a stopped process's reply and fanout queues
#: (oslo.messaging's default keeps them 30 minutes).
TRANSIENT_QUEUES_TTL = 60

#: Every name ``unique_topic`` gave in this process: what this test
#: session may have declared on the shared broker, and no other process
#: can have (the session-end check looks for them).
UNIQUE_NAMES: set = set()


def unique_topic(prefix: str) -> str:
    name = '%s-%s' % (prefix, uuid.uuid4().hex[:10])
    UNIQUE_NAMES.add(name)
    return name


def own_names(names, unique=None) -> list:
    """Of ``names`` (on a broker), those named after one of ``unique``
    (``UNIQUE_NAMES``): the name itself, or it followed by ``_`` or
    ``.``, as oslo.messaging and the tests derive queues and exchanges
    from a topic.  No other process uses these."""
    unique = UNIQUE_NAMES if unique is None else unique
    prefixes = tuple('%s%s' % (name, sep) for name in unique
                     for sep in '_.')
    return sorted(name for name in names
                  if name in unique or name.startswith(prefixes))


#: When set, the control exchange of every daemon and command started
#: with a ``write_multi_config`` file, unless its text names another.
#: The functional tests set one per session (tests/functional/conftest.py)
#: and delete it at its end: on the default name (``scheduler``) it
#: would be shared with every other process on the broker, none of which
#: could tell when it is free to go.
CONTROL_EXCHANGE: str | None = None


def write_multi_config(path: str, text: str) -> str:
    """Write a config file verbatim (for multi-valued options), with
    ``TRANSIENT_QUEUES_TTL``: every daemon and command a test starts
    leaves its reply queue behind when it stops, which the broker then
    deletes a minute later.  ``CONTROL_EXCHANGE``, if set, comes first,
    so that a ``control_exchange`` in ``text`` wins."""
    with open(path, 'w') as f:
        if CONTROL_EXCHANGE:
            f.write('[DEFAULT]\ncontrol_exchange = %s\n\n'
                    % CONTROL_EXCHANGE)
        f.write(text)
        f.write('\n[oslo_messaging_rabbit]\nrabbit_transient_queues_ttl = '
                '%d\n' % TRANSIENT_QUEUES_TTL)
    return path


class Daemon:
    """A console script running as a child process, logging to a file."""

    def __init__(self, name: str, args: list, log_path: str,
                 env: dict | None = None, bin_dir: str | None = None):
        """``env``: variables added to this process's environment;
        ``bin_dir``: run another installation's script (an older
        release's virtualenv), which must not import this checkout."""
        self.name = name
        self.log_path = log_path
        env = dict(os.environ, **(env or {}))
        if bin_dir is None:
            script, cwd = console_script(name), REPO_ROOT
            # Test-only plugins (tests.unit.fixtures...) import from the
            # repo.
            env['PYTHONPATH'] = REPO_ROOT + os.pathsep + env.get(
                'PYTHONPATH', '')
        else:
            script, cwd = os.path.join(bin_dir, name), bin_dir
            env.pop('PYTHONPATH', None)
        self._out = open(log_path + '.out', 'w')
        self._terminated = False
        self.proc = subprocess.Popen(
            [script] + args, stdin=subprocess.DEVNULL,
            stdout=self._out, stderr=subprocess.STDOUT, env=env,
            cwd=cwd, start_new_session=True)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log(self) -> str:
        text = ''
        for path in (self.log_path, self.log_path + '.out'):
            if os.path.exists(path):
                with open(path, errors='replace') as f:
                    text += f.read()
        return text

    def terminate(self) -> None:
        """SIGTERM, once: oslo.service ends a graceful stop at the second."""
        if not self._terminated and self.alive():
            self.proc.send_signal(signal.SIGTERM)
            self._terminated = True

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM and wait; SIGKILL if it does not stop in ``timeout`` s.

        The SIGKILL goes to the daemon's whole process group (it has its
        own session): workers it forked must not outlive the test.
        """
        self.terminate()
        if self.alive():
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self._kill_group()
                self.proc.wait(10)
        self._kill_group()
        self._out.close()
        return self.proc.returncode

    def _kill_group(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def wait_exit(self, timeout: float = 60) -> int:
        return self.proc.wait(timeout)


def wait_for(predicate, timeout: float, interval: float = 0.2,
             what: str = 'condition'):
    """Poll ``predicate`` until it returns a true value; return it."""
    deadline = time.monotonic() + timeout
    last_error = None
    while time.monotonic() < deadline:
        try:
            value = predicate()
            if value:
                return value
        except Exception as e:  # keep polling; report the last error
            last_error = e
        time.sleep(interval)
    raise AssertionError('timed out after %ss waiting for %s (last error: %r)'
                         % (timeout, what, last_error))


#: How to stop the daemons of the running test (its cluster's
#: ``stop_all``).  A fixture whose resource they use to the end (a
#: throw-away database, a proxy to the broker) calls them before it
#: takes the resource away: pytest tears such a fixture down first when
#: the test asked for it after the cluster.
_STOPPERS: list = []


def add_stopper(stop) -> None:
    _STOPPERS.append(stop)


def remove_stopper(stop) -> None:
    _STOPPERS.remove(stop)


def stop_daemons_first() -> None:
    """Stop the running test's daemons before a resource they use goes."""
    for stop in reversed(_STOPPERS):
        stop()
