"""``scheduler-compute-sim``: a fleet of simulated compute hosts.

    scheduler-compute-sim --config-file scheduler.conf --hosts 20
    scheduler-compute-sim --config-file scheduler.conf \\
        --fleet etc/scheduler/fleet.example.json --control-dir /tmp/ctl

The hosts report to the scheduler on ``[scheduler] topic`` and serve
``run_instance`` / ``terminate_instance`` on ``[compute] topic`` (see
``scheduler.simulator.agent``).  With ``--control-dir DIR``, touching
``DIR/<host>.down`` silences that host until the file is removed.
Start the scheduler first: the fleet casts its aggregates once, at
start.  Runs until SIGTERM or SIGINT, then stops its RPC servers and
exits 0.  Options it does not know (``--log-file``, ``--debug``, ...) go
to oslo.config.
"""

import argparse
import signal
import sys
import threading

from oslo_config import cfg
from oslo_log import log as logging

from scheduler import config
from scheduler import rpc
from scheduler import simulator
from scheduler.simulator import fleet as fleet_mod

CONF = cfg.CONF
LOG = logging.getLogger('scheduler.cmd.compute_sim')

DEFAULT_PREFIX = 'compute'


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog='scheduler-compute-sim',
        description='Run simulated compute hosts that report to the '
                    'scheduler and accept run_instance casts.',
        epilog='Other options (--log-file, --debug, ...) are passed to '
               'oslo.config.')
    parser.add_argument('--config-file', action='append', default=[],
                        help='configuration file (may be repeated)')
    parser.add_argument('--config-dir', action='append', default=[])
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument('--hosts', type=int, metavar='N',
                      help='simulate N identical hosts')
    what.add_argument('--fleet', metavar='FILE',
                      help='simulate the hosts of a JSON fleet file')
    parser.add_argument('--prefix',
                        help='host name prefix for --hosts (default: '
                             '[DEFAULT] host when set in a configuration '
                             'file, else %r)' % DEFAULT_PREFIX)
    parser.add_argument('--availability-zone', '--az',
                        help='put the --hosts hosts in this zone')
    parser.add_argument('--control-dir', metavar='DIR',
                        help='a file DIR/<host>.down silences that host')
    parser.add_argument('--report-interval', type=int, metavar='SECONDS',
                        help='override [scheduler] report_interval')
    return parser


def host_prefix(explicit: str | None) -> str:
    """``--prefix``, else ``[DEFAULT] host`` if the operator set it.

    ``[DEFAULT] host`` defaults to this machine's name, which says
    nothing about simulated hosts: only a value someone chose is used.
    """
    if explicit:
        return explicit
    location = CONF.get_location('host')
    if location is not None and location.location.is_user_controlled:
        return CONF.host
    return DEFAULT_PREFIX


def build_fleet(args) -> fleet_mod.FleetSpec:
    if args.fleet:
        return fleet_mod.load(args.fleet)
    group = {}
    if args.availability_zone:
        group['availability_zone'] = args.availability_zone
    return fleet_mod.uniform(args.hosts, prefix=host_prefix(args.prefix),
                             **group)


def main(argv: list | None = None) -> int:
    parser = make_parser()
    args, rest = parser.parse_known_args(sys.argv[1:] if argv is None
                                         else argv)
    conf_args = list(rest)
    for path in args.config_file:
        conf_args += ['--config-file', path]
    for path in args.config_dir:
        conf_args += ['--config-dir', path]
    config.parse_args(conf_args, prog='scheduler-compute-sim',
                      default_config_files=[] if args.config_file else None)
    if args.report_interval is not None:
        if args.report_interval < 1:
            parser.error('--report-interval must be at least 1')
        CONF.set_override('report_interval', args.report_interval,
                          group='scheduler')
    try:
        spec = build_fleet(args)
    except fleet_mod.FleetError as e:
        parser.error(str(e))

    stopping = threading.Event()

    def on_signal(signo, _frame):
        LOG.info('Caught %s, stopping', signal.Signals(signo).name)
        stopping.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    fleet = simulator.Fleet(spec, control_dir=args.control_dir)
    fleet.start(rpc.get_transport())
    try:
        while not stopping.wait(0.5):
            pass
    finally:
        fleet.stop()
        rpc.cleanup()
    LOG.info('Stopped %d simulated host(s)', len(fleet.hosts))
    return 0


if __name__ == '__main__':
    sys.exit(main())
