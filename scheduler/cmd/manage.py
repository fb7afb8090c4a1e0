"""``scheduler-manage``: the operator's and caller's command line.

Commands:

* ``select``: ask the scheduler service for destinations, as a conductor
  does (a ``select_destinations`` RPC call);
* ``hosts``: the hosts the inventory knows, up or down, with free and
  total resources.
"""

import argparse
import sys
import uuid

from oslo_config import cfg

from scheduler.cli import output
from scheduler import config
from scheduler import context as ctx_mod
from scheduler import exception
from scheduler import objects
from scheduler import rpcapi

CONF = cfg.CONF


def build_spec(args) -> objects.RequestSpec:
    """A RequestSpec from ``select``'s command-line options."""
    hints: dict = {}
    for pair in args.hint or []:
        key, _, value = pair.partition('=')
        hints.setdefault(key.strip(), []).append(value.strip())
    spec = objects.RequestSpec(
        project_id=args.project, user_id=args.user,
        num_instances=args.num_instances,
        flavor=objects.Flavor(
            flavorid=None, name=None, memory_mb=args.ram, vcpus=args.vcpus,
            root_gb=args.disk, ephemeral_gb=args.ephemeral, swap=args.swap,
            extra_specs=output.key_values(args.extra_spec, '--extra-spec')),
        image=objects.ImageMeta(properties=output.key_values(
            args.image_property, '--image-property')),
        availability_zone=args.availability_zone,
        scheduler_hints=hints or None,
        force_hosts=args.force_host or None,
        ignore_hosts=args.ignore_host or None)
    return spec


def cmd_select(args) -> int:
    spec = build_spec(args)
    uuids = [str(uuid.uuid4()) for _ in range(args.num_instances)]
    ctxt = ctx_mod.RequestContext(
        user_id=args.user, project_id=args.project,
        remote_address=args.remote_address,
        is_admin=args.admin, roles=['admin'] if args.admin else [])
    api = rpcapi.SchedulerAPI(timeout=args.timeout)
    try:
        result = api.select_destinations(
            ctxt, spec, uuids, return_objects=True,
            return_alternates=args.alternates)
    except exception.SchedulerException as e:
        sys.stderr.write('%s: %s\n' % (type(e).__name__, e))
        return 1
    rows = []
    for index, (inst, alts) in enumerate(zip(uuids, result)):
        first = alts[0]
        rows.append({
            'instance': index, 'instance_uuid': inst,
            'host': first.service_host, 'nodename': first.nodename,
            'availability_zone': first.availability_zone,
            'weight': first.obj_get('weight'),
            'alternates': [a.service_host for a in alts[1:]],
            'limits': first.limits.to_dict() if first.limits else {},
        })
    output.emit(rows, ['instance', 'instance_uuid', 'host', 'nodename',
                       'availability_zone', 'weight', 'alternates',
                       'limits'], args.format)
    return 0


def cmd_hosts(args) -> int:
    from scheduler.host_manager import HostManager
    manager = HostManager()
    manager.load_from_inventory()
    rows = []
    for state in sorted(manager.get_all_host_states(), key=lambda s: s.key()):
        rows.append({
            'host': state.host, 'nodename': state.nodename,
            'state': 'up' if state.is_up() else 'down',
            'disabled': state.disabled,
            'free_ram_mb': state.free_ram_mb, 'memory_mb': state.memory_mb,
            'free_disk_gb': state.local_gb - state.local_gb_used,
            'local_gb': state.local_gb,
            'free_vcpus': state.free_vcpus, 'vcpus': state.vcpus,
            'instances': state.num_instances,
            'aggregates': sorted(a.name for a in state.aggregates),
            'last_report_s': int(state.seconds_since_report()),
        })
    output.emit(rows, ['host', 'nodename', 'state', 'disabled',
                       'free_ram_mb', 'memory_mb', 'free_disk_gb', 'local_gb',
                       'free_vcpus', 'vcpus', 'instances', 'aggregates',
                       'last_report_s'], args.format)
    return 0


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

    sel = sub.add_parser('select', parents=[common], help='select destinations for instances '
                         '(a conductor-style select_destinations call)')
    sel.add_argument('--vcpus', type=int, default=1)
    sel.add_argument('--ram', type=int, default=512, help='MiB')
    sel.add_argument('--disk', type=int, default=1, help='root disk, GiB')
    sel.add_argument('--ephemeral', type=int, default=0, help='GiB')
    sel.add_argument('--swap', type=int, default=0, help='MiB')
    sel.add_argument('--extra-spec', action='append', metavar='KEY=VALUE')
    sel.add_argument('--image-property', action='append',
                     metavar='KEY=VALUE')
    sel.add_argument('--hint', action='append', metavar='KEY=VALUE',
                     help='scheduler hint; repeat a key for a list')
    sel.add_argument('--availability-zone', '--az')
    sel.add_argument('--num-instances', '-n', type=int, default=1)
    sel.add_argument('--alternates', action='store_true',
                     help='also return alternate hosts')
    sel.add_argument('--force-host', action='append')
    sel.add_argument('--ignore-host', action='append')
    sel.add_argument('--remote-address',
                     help='source address of the request (ip_scheduler)')
    sel.add_argument('--project', default='demo')
    sel.add_argument('--user', default='demo')
    sel.add_argument('--admin', action='store_true',
                     help='call as admin (NoValidHost then names filters)')
    sel.add_argument('--timeout', type=int, default=30)
    sel.set_defaults(func=cmd_select)

    hosts = sub.add_parser('hosts', parents=[common], help='hosts known to the inventory')
    hosts.set_defaults(func=cmd_hosts)
    return parser


def main(argv: list | None = None) -> int:
    parser = make_parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    conf_args = []
    for path in args.config_file:
        conf_args += ['--config-file', path]
    for path in args.config_dir:
        conf_args += ['--config-dir', path]
    if args.debug:
        conf_args.append('--debug')
    config.parse_args(conf_args, prog='scheduler-manage',
                      default_config_files=[] if args.config_file else None)
    return args.func(args)


if __name__ == '__main__':
    sys.exit(main())
