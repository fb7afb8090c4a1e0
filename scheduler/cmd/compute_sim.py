"""``scheduler-compute-sim``: a fleet of simulated compute hosts.

    scheduler-compute-sim --config-file scheduler.conf --hosts 20
    scheduler-compute-sim --config-file scheduler.conf \\
        --fleet etc/scheduler/fleet.example.json --control-dir /tmp/ctl

The hosts report on ``[scheduler] topic`` and serve ``run_instance`` /
``terminate_instance`` on ``[compute] topic`` (``scheduler.simulator``),
the whole fleet on one transport and one RPC server.  With
``--control-dir DIR``, touching ``DIR/<host>.down`` silences that host
until the file is removed.  The aggregates are cast once a scheduler
answers, so either may start first.

SIGTERM or SIGINT stops it at any point and it exits 0 (a stop still
held by the bus after twice ``STOP_GRACE`` ends it anyway, with every
thread's stack on stderr).  Exit status 1: a broker that refuses the
login, a fleet that cannot start, a fleet over the limits below or a
report interval not below ``service_down_time``; status 2: a scheduler
too old to hear its reports (``SchedulerTooOld``).  Options it does not
know go to oslo.config.
"""

import argparse
import faulthandler
import signal
import sys
import threading

from oslo_config import cfg
from oslo_log import log as logging

from scheduler import broker_login
from scheduler import cmd
from scheduler import config
from scheduler import exception
from scheduler.resources import liveness
from scheduler import rpc
from scheduler import simulator
from scheduler.simulator import fleet as fleet_mod
from scheduler.simulator import routing
from scheduler import urls

CONF = cfg.CONF
LOG = logging.getLogger('scheduler.cmd.compute_sim')

DEFAULT_PREFIX = 'compute'

#: Reports per second one simulator sends at most, by default: about
#: what one process can serialise and publish on two shared cores.
DEFAULT_MAX_REPORT_RATE = 1000

#: Transports without routing keys (``fake://``) run a server (and a
#: thread) per host: past this many, refuse.
MAX_SERVERS_PER_HOST = 1000

#: After SIGTERM/SIGINT, how long start-up and shutdown may take before
#: the process exits anyway (a broker that does not answer).
STOP_GRACE = 15.0

#: After both STOP_GRACE, how long the exit may take before the
#: watchdog ends the process.
EXIT_GRACE = 10.0

#: How often the main loop looks for a signal the handler recorded.
SIGNAL_POLL = 0.2


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
                        help='override [scheduler] report_interval; each '
                             'host reports once per interval, +/- 10%%, '
                             'spread over the interval')
    parser.add_argument('--max-report-rate', type=int, metavar='N',
                        default=DEFAULT_MAX_REPORT_RATE,
                        help='refuse a fleet that needs more than N '
                             'reports per second (hosts / report '
                             'interval); default %(default)s')
    parser.add_argument('--server-name', metavar='NAME',
                        help='the fleet RPC server name; its queue is '
                             '<[compute] topic>.NAME (default: fleet-<random '
                             'hex>, unique per process)')
    return parser


def host_prefix(explicit: str | None) -> tuple:
    """``(prefix, where it comes from)``: ``--prefix``, else ``[DEFAULT]
    host`` if the operator set it, else ``DEFAULT_PREFIX``.

    ``[DEFAULT] host`` defaults to this machine's name, which says
    nothing about simulated hosts: only a value someone chose is used.
    """
    if explicit:
        return explicit, '--prefix'
    location = CONF.get_location('host')
    if location is not None and location.location.is_user_controlled:
        return CONF.host, '[DEFAULT] host; choose another with --prefix'
    return DEFAULT_PREFIX, 'the default; choose one with --prefix'


def check_limits(spec: fleet_mod.FleetSpec, interval: float,
                 max_rate: int) -> str | None:
    """Why this fleet cannot run in one process, or None."""
    count = len(spec.hosts)
    rate = count / interval
    if rate > max_rate:
        return ('%d hosts reporting every %s s need %.0f reports/s, more '
                'than --max-report-rate %d: set --report-interval to at '
                'least %d, or split the fleet over several simulators'
                % (count, interval, rate, max_rate,
                   -(-count // max_rate)))
    if routing.needs_server_per_host(CONF) and \
            count > MAX_SERVERS_PER_HOST:
        return ('transport %s runs one RPC server per simulated host: at '
                'most %d hosts (got %d); use a rabbit:// transport_url, '
                'which serves any fleet with one server'
                % (urls.masked_url(CONF.transport_url),
                   MAX_SERVERS_PER_HOST, count))
    return None


def build_fleet(args) -> fleet_mod.FleetSpec:
    if args.fleet:
        return fleet_mod.load(args.fleet)
    group = {}
    if args.availability_zone:
        group['availability_zone'] = args.availability_zone
    return fleet_mod.uniform(args.hosts, prefix=host_prefix(args.prefix)[0],
                             **group)


def main(argv: list | None = None) -> int:
    parser = make_parser()
    args, rest = parser.parse_known_args(sys.argv[1:] if argv is None
                                         else argv)
    config.parse_args(rest + cmd.config_args(args.config_file,
                                             args.config_dir),
                      prog='scheduler-compute-sim',
                      default_config_files=[] if args.config_file else None)
    if args.report_interval is not None:
        if args.report_interval < 1:
            parser.error('--report-interval must be at least 1')
        CONF.set_override('report_interval', args.report_interval,
                          group='scheduler')
    if args.max_report_rate < 1:
        parser.error('--max-report-rate must be at least 1')
    if args.hosts is not None and args.hosts < 1:
        parser.error('--hosts must be at least 1')
    try:
        spec = build_fleet(args)
    except fleet_mod.FleetError as e:
        parser.error(str(e))
    problem = check_limits(spec, CONF.scheduler.report_interval,
                           args.max_report_rate)
    if problem:
        parser.error(problem)
    interval_problem = liveness.interval_problem(
        CONF.scheduler.report_interval, CONF.scheduler.service_down_time)
    if interval_problem:
        flaps, text = interval_problem
        if flaps:
            parser.error('%s (set --report-interval, or the scheduler\'s '
                         'service_down_time in this file too)' % text)
        LOG.warning('%s', text)

    fleet = simulator.Fleet(spec, control_dir=args.control_dir,
                            server_name=args.server_name)
    stopping = threading.Event()
    #: The signals received; the main loop acts on them.
    caught: list = []

    def on_signal(signo, _frame):
        # Only an append: a handler runs between two bytecodes of
        # whatever the main thread (any green thread, under eventlet)
        # was doing, maybe inside ``Event.wait`` holding that event's
        # lock: setting an event or logging here could wait on a lock
        # that code holds, forever.
        caught.append(signo)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    names = [h.name for h in spec.hosts]
    LOG.info('Starting %(count)d simulated host(s) %(first)s..%(last)s '
             '(name prefix from %(origin)s) on transport %(url)s',
             {'count': len(names), 'first': names[0], 'last': names[-1],
              'origin': host_prefix(args.prefix)[1] if args.hosts
              else 'the fleet file',
              'url': urls.masked_url(CONF.transport_url)})

    failures: list = []

    def start():
        try:
            # A wrong password or virtual host is one line and exit 1,
            # not a traceback (see scheduler.broker_login).
            broker_login.check()
            fleet.start(rpc.get_transport())
        except broker_login.LoginRefused as e:
            failures.append(str(e))
            stopping.set()
        except exception.SchedulerTooOld as e:
            fleet.fatal = e
            stopping.set()
        except Exception as e:
            if broker_login.is_refusal(e):
                failures.append(str(broker_login.describe(e)))
            else:
                LOG.exception('The fleet could not start')
                failures.append('the fleet could not start: %s' % e)
            stopping.set()

    starter = threading.Thread(target=start, name='fleet-start',
                               daemon=True)
    starter.start()
    while not stopping.wait(SIGNAL_POLL):
        if caught:
            LOG.info('Caught %s, stopping', signal.Signals(caught[0]).name)
            fleet.request_stop()
            break
        if fleet.fatal is not None:
            break
    # Whatever holds the stop or the interpreter's exit after it (a
    # thread it joins, a native call that never returns, a frozen
    # event loop), the process ends: faulthandler's watchdog is a C
    # thread, and it writes every thread's stack to stderr first.
    faulthandler.dump_traceback_later(2 * STOP_GRACE + EXIT_GRACE,
                                      exit=True)
    # Start-up notices the stop between hosts; a broker that does not
    # answer can hold it longer: then exit without waiting for it.
    stopped = _within(STOP_GRACE, starter.join) and _within(
        STOP_GRACE, lambda: (fleet.stop(), rpc.cleanup()))
    if failures and stopped:
        config.exit_on_startup_error('scheduler-compute-sim', failures[0])
    LOG.info('Stopped %d simulated host(s)', len(fleet.hosts))
    if not stopped:
        if failures:
            LOG.error('Cannot start: %s', failures[0])
        LOG.warning('Exiting without a clean shutdown: the bus did not '
                    'answer within %d s', STOP_GRACE)
        cmd.exit_now(1 if failures else 0)
    if fleet.fatal is not None:
        # One line, no traceback: what to change is in the message.
        LOG.error('%s', fleet.fatal)
    cmd.exit_now(0 if fleet.fatal is None else 2)
    return 0  # not reached


def _within(seconds: float, action) -> bool:
    """Run ``action`` in a thread; whether it finished within ``seconds``."""
    thread = threading.Thread(target=action, daemon=True)
    thread.start()
    thread.join(seconds)
    return not thread.is_alive()


if __name__ == '__main__':
    sys.exit(main())
