"""``scheduler-demo``: three drivers place instances on a simulated fleet.

    scheduler-demo                  # one process on fake://, a few seconds
    scheduler-demo --debug          # the same, with the filter walk logged
    scheduler-demo --transport-url rabbit://guest:guest@127.0.0.1:5672/

For each driver (filter_scheduler, chance_scheduler, ip_scheduler) the
demo runs a scheduler service and a simulated fleet
(``scheduler.demo.scenario``), then acts as a conductor: it asks
``SchedulerAPI`` for destinations, casts ``schedule_run_instance``,
watches the simulated computes start the instances and terminates
them.  Every outcome is checked against what the driver should do; it
prints a table per driver and a summary, and exits 1 if a check failed.

By default everything runs in this process on ``fake://`` with SQLite
inventories in a temporary directory.  With a ``rabbit://``
``--transport-url`` the scheduler runs as ``scheduler-service`` and the
fleet as ``scheduler-compute-sim``, each driver's pair on its own topics
and inventory, with the run's own control exchange and auto-delete
queues (nothing is left on the broker).  On failure the processes' logs
are kept and their directory printed.
"""

import argparse
import contextlib
import logging as std_logging
import shutil
import sys
import tempfile
import time
import uuid

from oslo_config import cfg
from oslo_log import log as logging
import oslo_messaging

from scheduler.cli import output
from scheduler import cmd
from scheduler import config
from scheduler.demo import buses
from scheduler.demo import caller
from scheduler.demo import scenario as scenarios
from scheduler.simulator import fleet as fleet_mod

CONF = cfg.CONF


def setup_logging(debug: bool) -> None:
    """WARNING and up unless ``--debug``, which shows the filter walk."""
    logging.setup(CONF, 'scheduler')
    if debug:
        return
    names = [''] + [entry.split('=')[0] for entry in CONF.default_log_levels]
    for name in names:
        logger = std_logging.getLogger(name)
        if logger.level < std_logging.WARNING:
            logger.setLevel(std_logging.WARNING)
    # Refused builds are expected here and reported in the table.
    std_logging.getLogger('scheduler.simulator').setLevel(std_logging.ERROR)


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog='scheduler-demo',
        description='Run the filter, chance and IP schedulers against a '
                    'simulated fleet and check where they place instances.')
    parser.add_argument('--config-file', action='append', default=[],
                        help='configuration file (may be repeated): its '
                             'options (filters, weighers, [ip_scheduler], '
                             'logging...) apply to the demo\'s services; '
                             'the demo still sets topics, inventories and '
                             'state_path itself')
    parser.add_argument('--transport-url',
                        help='fake:// (the default, unless a config file '
                             'sets transport_url: everything in this '
                             'process) or a rabbit:// URL (separate '
                             'service and simulator processes)')
    parser.add_argument('--driver', action='append', choices=scenarios.DRIVERS,
                        help='run only this driver (may be repeated)')
    parser.add_argument('--keep', action='store_true',
                        help='keep the working directory (logs, '
                             'inventories, configuration files)')
    parser.add_argument('--debug', action='store_true',
                        help='log at DEBUG, including the filter walk')
    return parser


def main(argv: list | None = None) -> int:
    args = make_parser().parse_args(sys.argv[1:] if argv is None else argv)
    config.parse_args((['--debug'] if args.debug else [])
                      + cmd.config_args(args.config_file),
                      default_config_files=[], setup_logging=False,
                      prog='scheduler-demo')
    if not args.transport_url:
        # oslo.messaging's own default is rabbit://: only a URL the
        # operator wrote in a config file moves the demo off fake://.
        set_by_user = (CONF.get_location('transport_url').location
                       == cfg.Locations.user)
        args.transport_url = (CONF.transport_url if set_by_user
                              else 'fake://')
    setup_logging(args.debug)
    started = time.monotonic()
    spec = fleet_mod.parse(scenarios.DEMO_FLEET, source='demo fleet')
    workdir = tempfile.mkdtemp(prefix='scheduler-demo-')
    tag = uuid.uuid4().hex[:8]
    CONF.set_override('transport_url', args.transport_url)
    CONF.set_override('state_path', workdir)
    if args.transport_url.startswith('fake:'):
        bus = buses.LocalBus(spec, workdir, tag)
    else:
        bus = buses.RabbitBus(args.transport_url, workdir, tag,
                              args.debug, args.config_file)
    stream = sys.stdout
    zones = sorted({spec.availability_zone(h.name) for h in spec.hosts})
    stream.write('scheduler-demo: %d simulated hosts in zones %s; %s\n'
                 % (len(spec.hosts), ', '.join(zones), bus.describe()))
    callers, problems = [], []
    drivers = args.driver or list(scenarios.DRIVERS)
    try:
        bus.prepare(drivers)
        for driver in drivers:
            callers.append(caller.run_driver(bus, driver, spec, stream))
    except (scenarios.DemoError, oslo_messaging.MessagingException) as e:
        problems.append(str(e))
    finally:
        problems += bus.finish()
    elapsed = time.monotonic() - started

    stream.write('\nSummary\n')
    output.emit([{'driver': c.driver,
                  'requests': len(scenarios.scenario(c.driver)),
                  'instances placed': c.placed,
                  'expected errors': c.expected_errors,
                  'failed': len(c.failures),
                  'seconds': '%.1f' % c.seconds} for c in callers],
                ['driver', 'requests', 'instances placed', 'expected errors',
                 'failed', 'seconds'], stream=stream)
    failures = [f for c in callers for f in c.failures] + problems
    for failure in failures:
        stream.write('FAILED: %s\n' % failure)
    keep = args.keep or bool(failures and bus.has_logs)
    if keep:
        stream.write('Logs and inventories are in %s\n' % workdir)
    else:
        with contextlib.suppress(OSError):
            shutil.rmtree(workdir)
    if failures:
        stream.write('%d check(s) failed (%.1f s).\n' % (len(failures),
                                                         elapsed))
        return 1
    stream.write('Every check passed: %d drivers in %.1f s.\n'
                 % (len(callers), elapsed))
    return 0


if __name__ == '__main__':
    sys.exit(main())
