"""Console-script entry points.

Importing this package starts the concurrency runtime the configuration
asks for (eventlet, monkey-patched, by default; or native threads)
before anything else of the process runs: see ``scheduler.concurrency``.
"""

import logging as std_logging
import os
import sys

from scheduler import concurrency

concurrency.setup()


def config_args(config_files: list, config_dirs: tuple = ()) -> list:
    """``--config-file``/``--config-dir`` for oslo.config, from a
    command's own parser (which lists them in its ``--help``)."""
    return ([arg for path in config_files for arg in ('--config-file', path)]
            + [arg for path in config_dirs for arg in ('--config-dir', path)])


def exit_now(code: int) -> None:
    """End the process once everything it ran has stopped and closed.

    What the interpreter's own exit would still do is free, object by
    object, all the process imported and built (oslo, SQLAlchemy, a
    fleet's hosts): CPU-bound seconds on a loaded host, longer than a
    supervisor waits after SIGTERM.  Nothing of it needs doing: the log
    is flushed here.
    """
    std_logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
