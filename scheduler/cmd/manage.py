"""``scheduler-manage``: the operator's and caller's command line.

Each command group lives in its own module of ``scheduler.cli``:

* ``select`` / ``explain``: ask the scheduler service, as a conductor
  does (``scheduler.cli.requests``);
* ``hosts list`` / ``hosts show HOST``: what the inventory knows of
  each node (``scheduler.cli.hosts``); ``hosts`` alone lists;
* ``aggregate ...``: manage host aggregates (``scheduler.cli.aggregates``);
* ``db sync`` / ``db version``: the inventory's schema
  (``scheduler.cli.db``);
* ``config check``: check a configuration before a restart or SIGHUP
  (``scheduler.cli.config_check``).

Every command takes ``--format json`` for scripts.
"""

import argparse
import sys

from oslo_config import cfg

from scheduler.cli import aggregates
from scheduler.cli import config_check
from scheduler.cli import db
from scheduler.cli import hosts
from scheduler.cli import requests
from scheduler import config

COMMAND_MODULES = (requests, hosts, aggregates, db, config_check)


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog='scheduler-manage',
        description='Operate and query the scheduler service.')
    parser.add_argument('--config-file', action='append', default=[],
                        help='configuration file (may be repeated)')
    parser.add_argument('--config-dir', action='append', default=[])
    parser.add_argument('--debug', action='store_true')
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument('--format', choices=['table', 'json'],
                        default='table', help='output format')
    sub = parser.add_subparsers(dest='command', required=True)
    for module in COMMAND_MODULES:
        module.register(sub, common)
    return parser


def main(argv: list | None = None) -> int:
    try:
        return _main(argv)
    except cfg.Error as e:
        # A malformed or unreadable config file: one line, no traceback.
        sys.stderr.write('scheduler-manage: configuration error: %s\n' % e)
        return 2
    except BrokenPipeError:
        # Output piped into head(1) and the like.
        return 0


def _main(argv: list | None) -> int:
    args = make_parser().parse_args(sys.argv[1:] if argv is None else argv)
    conf_args = []
    for path in args.config_file:
        conf_args += ['--config-file', path]
    for path in args.config_dir:
        conf_args += ['--config-dir', path]
    if args.debug:
        conf_args.append('--debug')
    config.parse_args(conf_args, prog='scheduler-manage',
                      default_config_files=[] if args.config_file else None,
                      command_line_tool=True)
    return args.func(args)


if __name__ == '__main__':
    sys.exit(main())
