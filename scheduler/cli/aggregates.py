"""``aggregate ...``: manage host aggregates in the inventory.

Nonsense is refused before anything is written, as nova refuses it:
adding a host the inventory has never heard of (``--allow-unknown``
adds one before it first reports), and any change that would put a
host in two availability zones (adding a host, or giving an aggregate
a zone that one of its hosts already has from another aggregate).

Every change is written to the inventory first, then announced to the
running schedulers with a fanout cast (``update_aggregates`` /
``delete_aggregate``) so that every worker applies it at once; a
scheduler that misses the cast re-reads aggregates on its next periodic
task.
"""

import sys

from oslo_log import log as logging

from scheduler.cli import output
from scheduler import context as ctx_mod
from scheduler.db import api as db_api
from scheduler import exception
from scheduler import objects

LOG = logging.getLogger(__name__)

COLUMNS = ['id', 'uuid', 'name', 'availability_zone', 'hosts', 'metadata']


#: Tries of the announcement after the first while the broker is
#: unreachable (oslo.messaging waits 1 s, then 3 s): the command ends.
ANNOUNCE_RETRY = 2


def _announce(changed: dict | None = None, deleted: dict | None = None):
    """Tell running schedulers; the inventory is already right."""
    from scheduler import rpc
    from scheduler import rpcapi
    try:
        rpc.check_broker(timeout=5)
        api = rpcapi.SchedulerAPI(timeout=10, cast_retry=ANNOUNCE_RETRY)
        ctxt = ctx_mod.get_admin_context()
        if changed is not None:
            api.update_aggregates(ctxt, [objects.Aggregate.from_row(changed)])
        if deleted is not None:
            api.delete_aggregate(ctxt, objects.Aggregate.from_row(deleted))
    except Exception as e:  # the bus may be down; the periodic task heals
        failure = e
    else:
        return
    # Outside the handler: oslo.log would append the exception again.
    LOG.warning('Saved, but could not notify the schedulers (%s); they '
                'will pick the change up within [scheduler] '
                'periodic_task_interval', failure)


def _show(args, agg: dict) -> int:
    if output.structured(args.format):
        output.emit_data(args.format, agg)
    else:
        output.emit([{'field': k, 'value': agg.get(k)} for k in COLUMNS],
                    ['field', 'value'])
    return 0


def check_zones(aggregate: dict, hosts, zone: str | None) -> None:
    """Refuse ``hosts`` in ``aggregate`` with ``zone`` when one of them
    is in another aggregate with another zone.

    Checked here rather than in the database layer: the simulator's and
    the schedulers' own aggregate updates go straight to the inventory.
    Two operators changing zones at the same instant can still race.
    """
    if not zone:
        return
    for other in db_api.aggregate_get_all():
        other_zone = other.get('availability_zone')
        if other['id'] == aggregate.get('id') or not other_zone \
                or other_zone == zone:
            continue
        for host in sorted(set(hosts) & set(other['hosts'])):
            raise exception.AggregateZoneConflict(
                host=host, zone=zone, aggregate=aggregate['name'],
                other_zone=other_zone, other=other['name'])


def check_host_known(host: str) -> None:
    """Refuse a host no compute has reported as (a typo, most often)."""
    known = {report['host'] for report in db_api.host_reports_get_all()}
    if host not in known:
        raise exception.AggregateHostUnknown(host=host)


def _zone_after(args, agg: dict) -> str | None:
    """The zone ``aggregate set`` leaves the aggregate in."""
    properties = output.key_values(args.property, '--property')
    if 'availability_zone' in properties:
        return properties['availability_zone'] or None
    if args.zone is not None:
        return args.zone or None
    return agg.get('availability_zone')


def cmd_create(args) -> int:
    agg = db_api.aggregate_create(
        args.name, availability_zone=args.zone,
        metadata=output.key_values(args.property, '--property'))
    _announce(changed=agg)
    return _show(args, agg)


def cmd_set(args) -> int:
    agg = db_api.aggregate_get(args.aggregate)
    check_zones(agg, agg['hosts'], _zone_after(args, agg))
    if args.name or args.zone is not None:
        kwargs = {}
        if args.name:
            kwargs['name'] = args.name
        if args.zone is not None:
            kwargs['availability_zone'] = args.zone or None
        agg = db_api.aggregate_update(agg['id'], **kwargs)
    if args.property:
        agg = db_api.aggregate_metadata_set(
            agg['id'], output.key_values(args.property, '--property'))
    _announce(changed=agg)
    return _show(args, agg)


def cmd_unset(args) -> int:
    agg = db_api.aggregate_metadata_unset(args.aggregate, args.property)
    _announce(changed=agg)
    return _show(args, agg)


def cmd_add_host(args) -> int:
    current = db_api.aggregate_get(args.aggregate)
    if not args.allow_unknown:
        check_host_known(args.host)
    check_zones(current, [args.host], current.get('availability_zone'))
    agg = db_api.aggregate_host_add(args.aggregate, args.host)
    _announce(changed=agg)
    return _show(args, agg)


def cmd_remove_host(args) -> int:
    agg = db_api.aggregate_host_remove(args.aggregate, args.host)
    _announce(changed=agg)
    return _show(args, agg)


def cmd_delete(args) -> int:
    agg = db_api.aggregate_get(args.aggregate)
    db_api.aggregate_delete(agg['id'])
    _announce(deleted=agg)
    if output.structured(args.format):
        output.emit_data(args.format, {'deleted': agg['name'],
                                       'uuid': agg['uuid']})
    else:
        print('Deleted aggregate %s' % agg['name'])
    return 0


def cmd_list(args) -> int:
    output.emit(db_api.aggregate_get_all(), COLUMNS, args.format)
    return 0


def cmd_show(args) -> int:
    return _show(args, db_api.aggregate_get(args.aggregate))


def run(args) -> int:
    """Run an aggregate command; inventory errors are one clear line."""
    try:
        return args.aggregate_func(args)
    except exception.SchedulerException as e:
        sys.stderr.write(output.error_line(e) + '\n')
        return 1
