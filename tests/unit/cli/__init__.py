"""Running ``scheduler-manage`` in the test process.

``Manage`` drives ``scheduler.cmd.manage.main`` as the console script
does, with two differences that keep the rest of the test run as it
was:

* ``scheduler.cmd`` is imported with ``SCHEDULER_NO_MONKEY_PATCH`` set:
  importing it greens the standard library for eventlet otherwise;
* the configuration is parsed without setting up logging: oslo.log
  would replace the root logger's handlers and levels for every later
  test.

The configuration file passed with ``--config-file`` is the test's own
(empty unless a test writes one), never one from ``/etc``.  The ``conf``
fixture's overrides (``transport_url = fake://``, ``state_path``, the
``inventory`` fixture's database) outlive the parse, and win over the
file: a test that sets one of those in the file clears its override.
"""

import json
import typing

from scheduler import config
from tests.unit import fixtures


def import_manage():
    """``scheduler.cmd.manage``, imported without greening the process."""
    return fixtures.import_unpatched('scheduler.cmd.manage')


class Result(typing.NamedTuple):
    """What one command did: its exit code and what it printed."""

    code: int
    out: str
    err: str

    def json(self):
        return json.loads(self.out)


class Manage:
    """Call as ``manage('hosts', 'show', 'h1', config='[DEFAULT]...')``."""

    def __init__(self, monkeypatch, capsys, tmp_path):
        self.module = import_manage()
        self.capsys = capsys
        self.config_file = tmp_path / 'manage.conf'
        self.config_file.write_text('')
        real_parse = config.parse_args

        def parse_args(argv, default_config_files=None, setup_logging=True,
                       prog=None, command_line_tool=False):
            real_parse(argv, default_config_files=default_config_files,
                       setup_logging=False, prog=prog)

        monkeypatch.setattr(config, 'parse_args', parse_args)

    def __call__(self, *argv: str, config: str | None = None) -> Result:
        if config is not None:
            self.config_file.write_text(config)
        self.capsys.readouterr()
        code = self.module.main(['--config-file', str(self.config_file)]
                                + list(argv))
        out, err = self.capsys.readouterr()
        return Result(code, out, err)
