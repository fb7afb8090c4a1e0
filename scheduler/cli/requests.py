"""``select`` and ``explain``: ask the scheduler service, as a conductor does.
"""

import sys
import uuid

from scheduler.cli import output
from scheduler.cli import parsers
from scheduler import context as ctx_mod
from scheduler import exception
from scheduler import objects
from scheduler import rpc
from scheduler import rpcapi


#: Seconds ``select`` and ``explain`` wait for an answer by default.
DEFAULT_TIMEOUT = parsers.REQUEST_TIMEOUT


def scheduler_api(args) -> rpcapi.SchedulerAPI:
    """A SchedulerAPI for this command, once the broker takes a
    connection (oslo.messaging would retry for ever)."""
    timeout = args.timeout = int(args.timeout or DEFAULT_TIMEOUT)
    rpc.check_broker(timeout=min(timeout, 5))
    return rpcapi.SchedulerAPI(timeout=timeout)


def build_spec(args) -> objects.RequestSpec:
    """A RequestSpec from the request options."""
    hints: dict = {}
    for pair in args.hint or []:
        key, _, value = pair.partition('=')
        hints.setdefault(key.strip(), []).append(value.strip())
    return objects.RequestSpec(
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
        ignore_hosts=args.ignore_host or None,
        is_bfv=args.boot_from_volume)


def _context(args) -> ctx_mod.RequestContext:
    # Only admins may force a host (scheduler.trust): an operator who
    # asks for one acts as an admin.
    admin = bool(args.admin or args.force_host)
    return ctx_mod.RequestContext(
        user_id=args.user, project_id=args.project,
        remote_address=args.remote_address, is_admin=admin,
        roles=['admin'] if admin else [])


#: After a NoValidHost from ``select``: where to see why.
EXPLAIN_HINT = ('To see which filter removed each host: the same command '
                'with "explain --admin" in place of "select" (it claims '
                'nothing).\n')


def cmd_select(args) -> int:
    if args.dry_run:
        return cmd_explain(args)
    spec = build_spec(args)
    uuids = [str(uuid.uuid4()) for _ in range(args.num_instances)]
    api = scheduler_api(args)
    try:
        result = api.select_destinations(
            _context(args), spec, uuids, return_objects=True,
            return_alternates=args.alternates)
    except exception.SchedulerException as e:
        sys.stderr.write(output.error_line(e) + '\n')
        if isinstance(e, exception.NoValidHost):
            sys.stderr.write(EXPLAIN_HINT)
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
    if args.format == 'table':
        sys.stderr.write('Claimed: until the compute reports the instance '
                         'or the claim expires ([scheduler] '
                         'service_down_time). "select --dry-run" claims '
                         'nothing.\n')
    return 0


def cmd_explain(args) -> int:
    api = scheduler_api(args)
    try:
        result = api.explain(_context(args), build_spec(args))
    except exception.SchedulerException as e:
        sys.stderr.write(output.error_line(e) + '\n')
        return 1
    if output.structured(args.format):
        output.emit_data(args.format, result)
        return 0
    out = sys.stdout
    out.write('Driver %(driver)s: %(hosts_known)d host(s) known, '
              '%(candidates)d candidate(s), %(passed)d passed the filters'
              '%(forced)s\n' % dict(result, forced=' (forced hosts, filters '
                                    'skipped)' if result['forced'] else ''))
    if result['filters']:
        out.write('\nFilters, in order:\n')
        output.emit(result['filters'], ['name', 'hosts_in', 'hosts_out',
                                        'removed'])
    rejected = sorted(result['rejected'].items())
    if rejected:
        shown = rejected[:args.max_hosts]
        out.write('\nRejected hosts (%d%s):\n' % (
            len(rejected), ', first %d shown' % len(shown)
            if len(shown) < len(rejected) else ''))
        output.emit([{'host': h, 'filter': r['filter'], 'reason': r['reason']}
                     for h, r in shown], ['host', 'filter', 'reason'])
    if result['ranking']:
        # A big fleet ranks thousands of hosts: the table shows the best
        # --max-hosts of them (--format json gives all).
        ranking = result['ranking']
        shown = ranking[:args.max_hosts]
        weighers = sorted({k for r in shown for k in r['contributions']})
        out.write('\nRanking (best first%s):\n' % (
            ', first %d of %d shown' % (len(shown), len(ranking))
            if len(shown) < len(ranking) else ''))
        output.emit([dict(r, **r['contributions']) for r in shown],
                    ['host', 'nodename', 'weight'] + weighers)
    elif not args.admin:
        out.write('\n(per-host reasons and the ranking are shown to admins: '
                  'add --admin)\n')
    return 0
