"""``scheduler-manage``: the operator's and caller's command line.

Each command group lives in its own module of ``scheduler.cli``; their
arguments are all in ``scheduler.cli.parsers``.  Any failure is one line
on stderr (``scheduler.cli.errors``) and a non-zero exit; ``--debug``
adds the traceback.
"""

import argparse
import sys
import traceback

# Only the parser here: each command's module (and the database, the
# driver and filters, oslo.messaging it needs) is imported when that
# command runs, by scheduler.cli.parsers.Command.  Importing this module
# greens the process first (scheduler.cmd: eventlet's monkey patching),
# which has to come before anything else imports threading or socket.
from scheduler.cli import parsers


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog='scheduler-manage',
        description='Operate and query the scheduler service.',
        # A command's own options (replay --config) must not be taken
        # for abbreviations of these (--config-file, --config-dir).
        allow_abbrev=False)
    parser.add_argument('--config-file', action='append', default=[],
                        help='configuration file (may be repeated)')
    parser.add_argument('--config-dir', action='append', default=[])
    parser.add_argument('--debug', action='store_true',
                        help='debug logging, and the traceback of an error')
    common = argparse.ArgumentParser(add_help=False)
    parsers.add_common_options(common)
    sub = parser.add_subparsers(dest='command', required=True)
    parsers.register_all(sub, common)
    return parser


def main(argv: list | None = None) -> int:
    args = make_parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        return _main(args)
    except BrokenPipeError:
        # Output piped into head(1) and the like.
        return 0
    except KeyboardInterrupt:
        return 130
    except Exception as e:
        from scheduler.cli import errors
        if args.debug:
            traceback.print_exc()
        sys.stderr.write('scheduler-manage: %s\n'
                         % errors.describe(e, getattr(args, 'timeout',
                                                      None)))
        return errors.exit_code(e)


def _main(args) -> int:
    from scheduler import cmd
    from scheduler import config
    conf_args = cmd.config_args(args.config_file, args.config_dir)
    if args.debug:
        conf_args.append('--debug')
    config.parse_args(conf_args, prog='scheduler-manage',
                      default_config_files=[] if args.config_file else None,
                      command_line_tool=True)
    return args.func(args)


if __name__ == '__main__':
    sys.exit(main())
