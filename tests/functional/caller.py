"""A conductor-style caller in a fresh process, driven line by line.

The test writes ``call`` on the child's stdin; the child makes one
``select_destinations`` call with ``SchedulerAPI(timeout=...)`` and
writes the outcome as one JSON line: the chosen host, or the error's
type, whether it is a ``MessagingTimeout``, and the seconds it took.
``cast`` makes it cast one ``schedule_run_instance`` instead.
The child chooses its runtime as the console scripts do
(``SCHEDULER_EXECUTOR``, eventlet by default), before anything else.

    python -m tests.functional.caller_child --config-file caller.conf \\
        --timeout 3
"""

import json
import os
import subprocess
import sys
import threading

from tests.functional import daemons


class CallerProcess:
    """The test side: start the child, ask it to call, read the outcome."""

    def __init__(self, config_file: str, timeout: float,
                 executor: str = 'eventlet'):
        env = dict(os.environ, SCHEDULER_EXECUTOR=executor)
        env['PYTHONPATH'] = daemons.REPO_ROOT + os.pathsep + env.get(
            'PYTHONPATH', '')
        self.proc = subprocess.Popen(
            [sys.executable, '-m', 'tests.functional.caller_child',
             '--config-file', config_file, '--timeout', str(timeout)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, text=True, env=env,
            cwd=daemons.REPO_ROOT, start_new_session=True)

    def call(self, guard: float = 60, what: str = 'call') -> dict | None:
        """The outcome of one call (``what='cast'``: one cast), or None
        if none came within ``guard`` seconds (the call hangs)."""
        self.proc.stdin.write(what + '\n')
        self.proc.stdin.flush()
        line: list = []
        reader = threading.Thread(
            target=lambda: line.append(self.proc.stdout.readline()),
            daemon=True)
        reader.start()
        reader.join(guard)
        if not line or not line[0]:
            return None
        return json.loads(line[0])

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(10)
