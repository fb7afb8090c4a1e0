"""Every ``scheduler-manage`` command's arguments, and nothing else.

The command modules (``requests``, ``hosts``, ``aggregates``, ``db``,
``config_check``, ``replay``) import the database, the objects, the
driver and filters, oslo.messaging: seconds of CPU on a busy machine.
Building the parser needs none of that, so it lives here, and each
command names its function as a ``Command``, whose module is imported
only when that command runs.  ``scheduler-manage --help`` (or
``hosts --help``, or a typing error) then imports none of them, and
``hosts list`` imports the inventory but not the bus or the replay.
``tests/unit/cli/test_lazy_imports.py`` keeps it so.
"""

import argparse
import functools
import importlib
import sys

from scheduler.cli import output
from scheduler.replay import limits

#: Seconds ``select`` and ``explain`` wait for an answer by default.
REQUEST_TIMEOUT = 30

#: Seconds ``config check`` waits for the database and brokers.
CHECK_TIMEOUT = 3.0

#: ``hosts list``'s columns, in order.
HOST_COLUMNS = ['host', 'nodename', 'state', 'disabled', 'free_ram_mb',
                'memory_mb', 'free_disk_gb', 'local_gb', 'free_vcpus',
                'vcpus', 'instances', 'aggregates', 'last_report_s']

#: ``hosts list --state``'s choices.
HOST_STATES = ('up', 'down', 'forced down', 'disabled')


class Command:
    """A command's function, named by module and attribute: the module
    is imported when the command runs, not when the parser is built."""

    def __init__(self, module: str, name: str) -> None:
        self.module = module
        self.name = name

    def __call__(self, args: argparse.Namespace) -> int:
        function = getattr(importlib.import_module(self.module), self.name)
        return function(args)

    def __repr__(self) -> str:
        return 'Command(%s.%s)' % (self.module, self.name)


_requests = functools.partial(Command, 'scheduler.cli.requests')
_hosts = functools.partial(Command, 'scheduler.cli.hosts')
_aggregates = functools.partial(Command, 'scheduler.cli.aggregates')
_db = functools.partial(Command, 'scheduler.cli.db')
_replay = functools.partial(Command, 'scheduler.cli.replay')


def add_common_options(common: argparse.ArgumentParser) -> None:
    """``--format`` and ``--timeout``, which every command takes."""
    common.add_argument('--format', choices=output.FORMATS,
                        default='table',
                        help='output format: a table fitted to the '
                             'terminal, json, yaml, or value (cells only, '
                             'for scripts)')
    common.add_argument('--timeout', type=float, metavar='SECONDS',
                        help='how long to wait for the scheduler service '
                             '(select, explain; default %d) or for the '
                             'database and brokers (config check; default '
                             '%g)' % (REQUEST_TIMEOUT, CHECK_TIMEOUT))


def register_all(subparsers, common: argparse.ArgumentParser) -> None:
    """Every command group, in the order ``--help`` lists them."""
    for register in (register_requests, register_hosts,
                     register_aggregates, register_db, register_config,
                     register_replay):
        register(subparsers, common)


# -- select, explain (scheduler.cli.requests) --------------------------

def _count(value: str) -> int:
    """An integer of at least 0: a size or a number of rows (a negative
    one is a typing error, not a request or a slice from the end)."""
    number = int(value)
    if number < 0:
        raise argparse.ArgumentTypeError('%s: must not be negative' % value)
    return number


def add_request_options(parser: argparse.ArgumentParser) -> None:
    """Options that describe the instances to place."""
    parser.add_argument('--vcpus', type=_count, default=1)
    parser.add_argument('--ram', type=_count, default=512, help='MiB')
    parser.add_argument('--disk', type=_count, default=1,
                        help='root disk, GiB')
    parser.add_argument('--ephemeral', type=_count, default=0, help='GiB')
    parser.add_argument('--swap', type=_count, default=0, help='MiB')
    parser.add_argument('--extra-spec', action='append', metavar='KEY=VALUE',
                        help='flavor extra spec (repeatable)')
    parser.add_argument('--image-property', action='append',
                        metavar='KEY=VALUE', help='image property')
    parser.add_argument('--hint', action='append', metavar='KEY=VALUE',
                        help='scheduler hint; repeat a key for a list')
    parser.add_argument('--availability-zone', '--az')
    parser.add_argument('--num-instances', '-n', type=int, default=1)
    parser.add_argument('--force-host', action='append')
    parser.add_argument('--ignore-host', action='append')
    parser.add_argument('--boot-from-volume', action='store_true',
                        help='the root disk is a volume, not local disk')
    parser.add_argument('--remote-address',
                        help='source address of the request (ip_scheduler)')
    parser.add_argument('--project', default='demo')
    parser.add_argument('--user', default='demo')
    parser.add_argument('--admin', action='store_true',
                        help='call as admin (NoValidHost then names filters)')


SELECT_HELP = ('select destinations (a conductor-style '
               'select_destinations call). This RESERVES capacity: the '
               'chosen hosts hold a claim until their compute reports the '
               'instance or the claim expires ([scheduler] '
               'service_down_time); use --dry-run (or "explain") to look '
               'without reserving')


def register_requests(subparsers, common: argparse.ArgumentParser) -> None:
    sel = subparsers.add_parser('select', parents=[common], help=SELECT_HELP,
                                description=SELECT_HELP)
    add_request_options(sel)
    sel.add_argument('--alternates', action='store_true',
                     help='also return alternate hosts')
    sel.add_argument('--dry-run', action='store_true',
                     help='claim nothing: run "explain" for this request '
                          'instead')
    sel.add_argument('--max-hosts', type=_count, default=50,
                     help='with --dry-run: rejected and ranked hosts to '
                          'list (each)')
    sel.set_defaults(func=_requests('cmd_select'))

    exp = subparsers.add_parser(
        'explain', parents=[common],
        help='why each host passes or fails a request; nothing is claimed')
    add_request_options(exp)
    exp.add_argument('--max-hosts', type=_count, default=50,
                     help='rejected and ranked hosts to list (each)')
    exp.set_defaults(func=_requests('cmd_explain'))


# -- hosts (scheduler.cli.hosts) ---------------------------------------

def _sort_column(value: str) -> str:
    if value.lstrip('-') not in HOST_COLUMNS:
        raise argparse.ArgumentTypeError(
            'no column %r (one of %s)' % (value, ', '.join(HOST_COLUMNS)))
    return value


def _format_option(parser: argparse.ArgumentParser) -> None:
    """``--format`` after ``list``/``show``, not resetting one given before.

    argparse copies every default of a sub-command over the values parsed
    before it, so ``hosts --format json list`` would print a table with
    the shared option; this one sets nothing unless it is given.
    """
    parser.add_argument('--format', choices=output.FORMATS,
                        default=argparse.SUPPRESS, help='output format')


def register_hosts(subparsers, common: argparse.ArgumentParser) -> None:
    hosts = subparsers.add_parser(
        'hosts', parents=[common],
        help='hosts known to the inventory (alone: "hosts list")')
    hosts.set_defaults(func=_hosts('run'), hosts_func=_hosts('cmd_list'))
    sub = hosts.add_subparsers(dest='hosts_command',
                               metavar='{list,show,delete}')
    listing = sub.add_parser(
        'list', help='one row per node: up/down, free and total resources')
    _format_option(listing)
    listing.add_argument('--host', metavar='PATTERN',
                         help='only hosts or nodes matching this shell '
                              'pattern (compute-1*)')
    listing.add_argument('--state', choices=HOST_STATES,
                         help='only nodes in this state')
    listing.add_argument('--aggregate', metavar='NAME',
                         help='only hosts in this aggregate')
    listing.add_argument('--sort', default='host', metavar='COLUMN',
                         type=_sort_column,
                         help='sort by this column, descending with a '
                              'leading "-" (--sort=-free_ram_mb); default '
                              'host')
    listing.add_argument('--limit', type=_count, metavar='N',
                         help='at most N rows (0: all)')
    listing.add_argument('--summary', action='store_true',
                         help='only totals: nodes by state, free and total '
                              'resources, instances')
    listing.set_defaults(hosts_func=_hosts('cmd_list'))
    show = sub.add_parser(
        'show', help="everything known of one host's nodes, aggregates and "
                     'instances')
    show.add_argument('host')
    _format_option(show)
    show.set_defaults(hosts_func=_hosts('cmd_show'))
    delete = sub.add_parser(
        'delete', help='forget a host that stopped reporting (refused '
                       'while it has placements or still reports, unless '
                       '--force)')
    delete.add_argument('host', nargs='*',
                        help='the hosts to forget (any number)')
    delete.add_argument('--all-down', action='store_true',
                        help='also every host none of whose nodes '
                             'reported within service_down_time')
    delete.add_argument('--node', help='only this node of each host')
    delete.add_argument('--force', action='store_true',
                        help='also drop its placements, and delete it even '
                             'if it reported recently')
    delete.set_defaults(hosts_func=_hosts('cmd_delete'))


# -- aggregate (scheduler.cli.aggregates) ------------------------------

def register_aggregates(subparsers, common: argparse.ArgumentParser) -> None:
    agg = subparsers.add_parser('aggregate', help='manage host aggregates')
    sub = agg.add_subparsers(dest='aggregate_command', required=True)

    def command(name, func, help_text):
        parser = sub.add_parser(name, parents=[common], help=help_text)
        parser.set_defaults(func=_aggregates('run'),
                            aggregate_func=_aggregates(func))
        return parser

    p = command('create', 'cmd_create', 'create an aggregate')
    p.add_argument('name')
    p.add_argument('--zone', help='availability zone of its hosts')
    p.add_argument('--property', action='append', metavar='KEY=VALUE')
    p = command('set', 'cmd_set', 'rename, re-zone or set properties')
    p.add_argument('aggregate', help='name, uuid or id')
    p.add_argument('--name')
    p.add_argument('--zone', help='new zone ("" removes it)')
    p.add_argument('--property', action='append', metavar='KEY=VALUE')
    p = command('unset', 'cmd_unset', 'remove properties')
    p.add_argument('aggregate')
    p.add_argument('--property', action='append', metavar='KEY',
                   required=True)
    p = command('add-host', 'cmd_add_host',
                'add a host (refused if unknown, or if it would then be in '
                'two availability zones)')
    p.add_argument('aggregate')
    p.add_argument('host')
    p.add_argument('--allow-unknown', action='store_true',
                   help='add a host that has not reported yet')
    p = command('remove-host', 'cmd_remove_host', 'remove a host')
    p.add_argument('aggregate')
    p.add_argument('host')
    p = command('delete', 'cmd_delete', 'delete an aggregate')
    p.add_argument('aggregate')
    command('list', 'cmd_list', 'list aggregates')
    p = command('show', 'cmd_show', 'show one aggregate')
    p.add_argument('aggregate')


# -- db (scheduler.cli.db) --------------------------------------------

def register_db(subparsers, common: argparse.ArgumentParser) -> None:
    db = subparsers.add_parser('db', help="the inventory's schema")
    sub = db.add_subparsers(dest='db_command', required=True)
    sync = sub.add_parser(
        'sync', parents=[common],
        help='upgrade the schema of [database] connection (run before '
             'starting a new release)')
    sync.add_argument('--version', metavar='REV',
                      help='revision to upgrade to (default: the newest)')
    sync.set_defaults(func=_db('cmd_sync'))
    version = sub.add_parser(
        'version', parents=[common],
        help='the revision the schema is at, and the newest one')
    version.set_defaults(func=_db('cmd_version'))


# -- config check (scheduler.cli.config_check) -------------------------

def register_config(subparsers, common: argparse.ArgumentParser) -> None:
    config = subparsers.add_parser(
        'config', help='check the configuration given by --config-file')
    sub = config.add_subparsers(dest='config_command', required=True)
    check = sub.add_parser(
        'check', parents=[common],
        help='load the driver, filters and weighers, reach the database, '
             'parse the transport URL; every problem is listed; exit 1 if '
             'any check fails')
    check.add_argument('--check-bus', action='store_true',
                       help='also log in to every broker of transport_url '
                            '(AMQP login, TLS with the configured CA)')
    check.add_argument('--services', type=int, default=1, metavar='N',
                       help='how many scheduler services (each with the '
                            'workers of this configuration) share the '
                            'database: the connections check warns when '
                            'they may need more connections than the '
                            'server allows (default 1)')
    check.set_defaults(
        func=Command('scheduler.cli.config_check', 'cmd_check'))


# -- snapshot, replay, capacity (scheduler.cli.replay) ------------------

def _explain_count(text: str) -> int:
    """``--explain``: a count, or ``all`` (every request)."""
    if text == 'all':
        return sys.maxsize
    try:
        count = int(text)
    except ValueError:
        count = -1
    if count < 0:
        raise argparse.ArgumentTypeError('a number of requests or "all", '
                                         'not %r' % text)
    return count


REPLAY_HELP = ('replay a recorded trace offline against a fleet snapshot '
               'under one or more configurations, and compare them '
               '("replay demo": on a generated fleet and trace)')


def register_replay(subparsers, common: argparse.ArgumentParser) -> None:
    snap = subparsers.add_parser(
        'snapshot', parents=[common],
        help='write the fleet as the inventory has it now (hosts, usage, '
             'aggregates, instances), for "replay --fleet"')
    snap.add_argument('--output', '-o', required=True, metavar='FILE')
    snap.set_defaults(func=_replay('cmd_snapshot'))

    rep = subparsers.add_parser('replay', parents=[common],
                                help=REPLAY_HELP, description=REPLAY_HELP)
    rep.add_argument('mode', nargs='?', choices=['demo'],
                     help='"demo": a generated fleet and trace against the '
                          'shipped spread and pack configurations')
    rep.add_argument('--fleet', metavar='FILE',
                     help='a fleet snapshot ("scheduler-manage snapshot") '
                          'or a simulator fleet file')
    rep.add_argument('--trace', action='append', metavar='FILE',
                     help='trace file ([trace] path); repeat, or use a '
                          'shell pattern, for several workers or rotated '
                          'files: merged in time order')
    rep.add_argument('--config', action='append', metavar='FILE',
                     help='a configuration to replay under (repeat to '
                          'compare); named after its file')
    rep.add_argument('--json', metavar='FILE', help='write the comparison')
    rep.add_argument('--html', metavar='FILE',
                     help='write the self-contained HTML report')
    rep.add_argument('--seed', type=int, default=0,
                     help='seed of the random choices (host_subset_size, '
                          'ties; the demo\'s fleet and trace)')
    rep.add_argument('--explain', type=_explain_count,
                     default=limits.DEFAULT_EXPLAINED, metavar='N|all',
                     help='requests explained in full (per-host filter '
                          'results and weights), sampled over the trace, '
                          'besides up to %d refusals; "all": every request '
                          '(about twice the time, and a report several '
                          'times bigger); default %%(default)s'
                          % limits.MAX_EXPLAINED_REFUSALS)
    rep.add_argument('--hosts', type=int, default=100,
                     help='demo: hosts in the generated fleet')
    rep.add_argument('--requests', type=int, default=1500,
                     help='demo: requests in the generated trace')
    rep.add_argument('--quiet', action='store_true',
                     help='no progress lines on stderr')
    rep.set_defaults(func=_replay('cmd_replay'))

    cap = subparsers.add_parser(
        'capacity', parents=[common],
        help='how many more instances of each flavor fit now, per '
             'availability zone and in total, through the configured '
             'filters and weighers')
    cap.add_argument('--flavor', action='append', metavar='NAME',
                     help='NAME:MB:VCPUS:DISK_GB, or a flavor name of '
                          'the trace (repeatable; default: every flavor of '
                          'the trace)')
    cap.add_argument('--trace', action='append', metavar='FILE',
                     help='a trace to take flavors from (repeatable, shell '
                          'patterns allowed); default: the files recorded '
                          'at [trace] path, if any')
    cap.add_argument('--fleet', metavar='FILE',
                     help='count on this snapshot or fleet file instead of '
                          'the inventory')
    cap.add_argument('--limit', type=int, default=limits.DEFAULT_LIMIT,
                     help='stop counting a flavor and zone at this many '
                          '(shown as ">= N")')
    cap.add_argument('--quiet', action='store_true')
    cap.set_defaults(func=_replay('cmd_capacity'))
