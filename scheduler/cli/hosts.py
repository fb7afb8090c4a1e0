"""``hosts list`` and ``hosts show``: what the inventory knows of each node.

Both read the inventory the schedulers flush to, so they work without a
running service (and show what a restarted scheduler would start from):
the last report of each node with the claims not yet reported laid over
it, and the host aggregates.  ``hosts`` alone is ``hosts list``.
"""

import datetime
import fnmatch
import sys

from oslo_db import exception as db_exc
import sqlalchemy as sa

from scheduler.cli import output
from scheduler.cli import parsers
from scheduler.db import api as db_api
from scheduler import exception
from scheduler.objects import host_state as host_state_obj
from scheduler.resources import liveness

COLUMNS = parsers.HOST_COLUMNS

#: Field/value rows of one node in ``hosts show``'s table, in order.
NODE_FIELDS = ['host', 'nodename', 'uuid', 'state', 'disabled',
               'disabled_reason', 'memory_mb', 'memory_mb_used',
               'free_ram_mb', 'local_gb', 'local_gb_used', 'free_disk_gb',
               'vcpus', 'vcpus_used', 'free_vcpus', 'cpu_allocation_ratio',
               'ram_allocation_ratio', 'disk_allocation_ratio',
               'hypervisor_type', 'hypervisor_version',
               'hypervisor_hostname', 'host_ip', 'availability_zones',
               'num_instances', 'num_io_ops', 'failed_builds', 'numa_cells',
               'pci_pools', 'last_report', 'last_report_s']

AGGREGATE_COLUMNS = ['name', 'uuid', 'availability_zone', 'metadata']

INSTANCE_COLUMNS = ['instance_uuid', 'nodename', 'status', 'reported',
                    'memory_mb', 'vcpus', 'disk_gb', 'project_id',
                    'updated_at']

#: Inventory failures worth one line rather than a traceback: no
#: database, no schema yet, a server that does not answer.
_INVENTORY_ERRORS = (db_exc.DBError, sa.exc.SQLAlchemyError,
                     exception.ConfigurationError)


def load_states() -> list:
    """Every node's state from the inventory, sorted by (host, nodename)."""
    from scheduler import host_manager
    manager = host_manager.HostManager()
    manager.load_from_inventory()
    return sorted(manager.get_all_host_states(), key=lambda s: s.key())


def _free_disk_gb(state) -> int:
    return state.local_gb - state.local_gb_used


def host_rows(states: list | None = None) -> list:
    """One row per node: the ``hosts list`` columns."""
    rows = []
    for state in load_states() if states is None else states:
        rows.append({
            'host': state.host, 'nodename': state.nodename,
            'state': liveness.state_name(state),
            'disabled': state.disabled,
            'free_ram_mb': state.free_ram_mb, 'memory_mb': state.memory_mb,
            'free_disk_gb': _free_disk_gb(state),
            'local_gb': state.local_gb,
            'free_vcpus': state.free_vcpus, 'vcpus': state.vcpus,
            'instances': state.num_instances,
            'aggregates': sorted(a.name for a in state.aggregates),
            'last_report_s': int(state.seconds_since_report()),
        })
    return rows


def _iso(timestamp: float | None) -> str | None:
    if timestamp is None:
        return None
    return datetime.datetime.fromtimestamp(
        timestamp, tz=datetime.timezone.utc).isoformat()


def _iso_naive_utc(value: datetime.datetime | None) -> str | None:
    """An inventory timestamp (naive UTC), written as UTC like the rest."""
    if value is None:
        return None
    return value.replace(tzinfo=datetime.timezone.utc).isoformat()


def _ratios(state) -> dict:
    """Per resource: the ratio filters use, what the compute reported,
    and whether an aggregate overrode it."""
    out = {}
    for resource in host_state_obj.RESOURCES:
        reported = getattr(state, '%s_allocation_ratio' % resource)
        effective = state.allocation_ratio(resource)
        out[resource] = {'effective': effective, 'reported': reported,
                         'overridden': effective != reported}
    return out


def _numa_cells(state) -> list:
    topology = state.numa_topology
    if topology is None:
        return []
    # A compute may leave the usage out of a new cell: it defaults to 0.
    return [{'id': cell.id, 'cpus': len(cell.cpuset),
             'cpu_usage': cell.obj_get('cpu_usage', 0),
             'memory_mb': cell.memory,
             'memory_usage_mb': cell.obj_get('memory_usage', 0)}
            for cell in topology.cells]


def _pci_pools(state) -> list:
    return [{'vendor_id': pool.vendor_id, 'product_id': pool.product_id,
             'numa_node': pool.obj_get('numa_node'), 'count': pool.count,
             'tags': dict(pool.obj_get('tags') or {})}
            for pool in state.pci_pools]


def node_detail(state) -> dict:
    """Everything known of one node, JSON-friendly."""
    return {
        'host': state.host, 'nodename': state.nodename,
        'uuid': state.obj_get('uuid'),
        'state': liveness.state_name(state),
        'disabled': state.disabled,
        'disabled_reason': state.disabled_reason,
        'memory_mb': state.memory_mb,
        'memory_mb_used': state.memory_mb_used,
        'free_ram_mb': state.free_ram_mb,
        'local_gb': state.local_gb, 'local_gb_used': state.local_gb_used,
        'free_disk_gb': _free_disk_gb(state),
        'vcpus': state.vcpus, 'vcpus_used': state.vcpus_used,
        'free_vcpus': state.free_vcpus,
        'allocation_ratios': _ratios(state),
        'hypervisor_type': state.hypervisor_type,
        'hypervisor_version': state.hypervisor_version,
        'hypervisor_hostname': state.hypervisor_hostname,
        'host_ip': str(state.host_ip) if state.host_ip else None,
        'availability_zones': sorted(state.availability_zones),
        'num_instances': state.num_instances,
        'num_io_ops': state.num_io_ops,
        'failed_builds': state.failed_builds,
        'instance_uuids': sorted(state.instance_uuids),
        'numa_cells': _numa_cells(state),
        'pci_pools': _pci_pools(state),
        'last_report': _iso(state.received_at),
        'last_report_s': int(state.seconds_since_report()),
    }


def _aggregate(agg) -> dict:
    metadata = dict(agg.metadata)
    return {'name': agg.name, 'uuid': agg.obj_get('uuid'),
            'availability_zone': metadata.get(db_api.AVAILABILITY_ZONE_KEY),
            'metadata': metadata}


def _instances(states: list, placements: list) -> list:
    """The instances on the host: its placements in the inventory, and
    the instances its computes report that the inventory does not hold.

    ``status`` is the placement's (``claimed`` until the compute reports
    the instance, then ``active``; ``unlisted`` once reports stop listing
    it; ``resize_claimed``, ``resize_active`` for a resize on its own
    node), None without one; ``reported`` says
    whether the node's last report lists it.
    """
    reported = {(s.nodename, uuid) for s in states
                for uuid in s.reported_view().instance_uuids}
    rows = []
    for inst in placements:
        rows.append({
            'instance_uuid': inst['instance_uuid'],
            'nodename': inst['nodename'], 'status': inst['status'],
            'reported': (inst['nodename'], inst['instance_uuid']) in reported,
            'memory_mb': inst['memory_mb'], 'vcpus': inst['vcpus'],
            'disk_gb': inst['disk_gb'], 'project_id': inst['project_id'],
            'updated_at': _iso_naive_utc(inst['updated_at']),
        })
    placed = {(r['nodename'], r['instance_uuid']) for r in rows}
    for nodename, uuid in sorted(reported - placed):
        rows.append({'instance_uuid': uuid, 'nodename': nodename,
                     'status': None, 'reported': True, 'memory_mb': None,
                     'vcpus': None, 'disk_gb': None, 'project_id': None,
                     'updated_at': None})
    rows.sort(key=lambda r: (r['nodename'], r['instance_uuid']))
    return rows


def host_detail(host: str) -> dict:
    """``hosts show``'s answer; raises HostNotFound for an unknown host."""
    states = [s for s in load_states() if s.host == host]
    if not states:
        raise exception.HostNotFound(host=host)
    return {
        'host': host,
        'nodes': [node_detail(s) for s in states],
        'aggregates': sorted((_aggregate(a) for a in states[0].aggregates),
                             key=lambda a: a['name']),
        'instances': _instances(states, db_api.instance_get_all(host=host)),
    }


def _node_cells(node: dict) -> dict:
    """A node's values as the table shows them."""
    cells = dict(node)
    for resource, ratio in node['allocation_ratios'].items():
        cells['%s_allocation_ratio' % resource] = (
            '%(effective)g (aggregate; the compute reports %(reported)g)'
            if ratio['overridden'] else '%(effective)g') % ratio
    cells['numa_cells'] = ['cell %(id)d: %(cpus)d cpus, %(memory_mb)d MB'
                           % c for c in node['numa_cells']]
    cells['pci_pools'] = ['%(vendor_id)s:%(product_id)s x%(count)d' % p
                          for p in node['pci_pools']]
    return cells


def _print_detail(detail: dict) -> None:
    out = sys.stdout
    for index, node in enumerate(detail['nodes']):
        if index:
            out.write('\n')
        cells = _node_cells(node)
        output.emit([{'field': f, 'value': cells.get(f)}
                     for f in NODE_FIELDS], ['field', 'value'])
    for key, columns in (('aggregates', AGGREGATE_COLUMNS),
                         ('instances', INSTANCE_COLUMNS)):
        out.write('\n%s:\n' % key.capitalize())
        if detail[key]:
            output.emit(detail[key], columns)
        else:
            out.write('(none)\n')


def select_rows(rows: list, host: str | None = None,
                state: str | None = None, aggregate: str | None = None,
                sort: str = 'host', limit: int | None = None) -> list:
    """``hosts list``'s rows filtered, sorted and cut.

    ``host`` is a shell pattern matched against host and node names;
    ``sort`` a column, descending with a leading ``-``; the sort is
    stable, so rows equal in it stay in (host, nodename) order.
    """
    if host:
        rows = [r for r in rows if fnmatch.fnmatchcase(r['host'], host)
                or fnmatch.fnmatchcase(r['nodename'], host)]
    if state == 'disabled':
        rows = [r for r in rows if r['disabled']]
    elif state:
        rows = [r for r in rows if r['state'] == state]
    if aggregate:
        rows = [r for r in rows if aggregate in r['aggregates']]
    column = sort.lstrip('-')
    rows = sorted(rows, key=lambda r: _sort_key(r[column]),
                  reverse=sort.startswith('-'))
    return rows if limit is None else rows[:limit]


def _sort_key(value):
    # Lists (aggregates) and booleans sort as text; None first.
    if value is None:
        return (0, '')
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (1, value)
    return (2, str(value))


def summary(rows: list) -> list:
    """Field/value rows: the nodes by state, and the fleet's resources."""
    out = [{'field': 'nodes', 'value': len(rows)},
           {'field': 'hosts', 'value': len({r['host'] for r in rows})}]
    for state in parsers.HOST_STATES:
        count = (sum(1 for r in rows if r['disabled']) if state == 'disabled'
                 else sum(1 for r in rows if r['state'] == state))
        out.append({'field': 'nodes %s' % state, 'value': count})
    for free, total in (('free_ram_mb', 'memory_mb'),
                        ('free_vcpus', 'vcpus'),
                        ('free_disk_gb', 'local_gb')):
        out.append({'field': free, 'value': sum(r[free] for r in rows)})
        out.append({'field': total, 'value': sum(r[total] for r in rows)})
    out.append({'field': 'instances',
                'value': sum(r['instances'] for r in rows)})
    return out


def cmd_list(args) -> int:
    rows = host_rows()
    limit = getattr(args, 'limit', None)
    selected = select_rows(rows, getattr(args, 'host', None),
                           getattr(args, 'state', None),
                           getattr(args, 'aggregate', None),
                           getattr(args, 'sort', 'host'))
    if getattr(args, 'summary', False):
        output.emit(summary(selected), ['field', 'value'], args.format)
        return 0
    output.emit(selected[:limit] if limit else selected, COLUMNS,
                args.format)
    if limit and len(selected) > limit:
        # On stderr: the table (or JSON) on stdout stays whole.
        sys.stderr.write('(%d of %d matching node(s); --limit 0 for all)\n'
                         % (limit, len(selected)))
    return 0


def cmd_show(args) -> int:
    detail = host_detail(args.host)
    if output.structured(args.format):
        output.emit_data(args.format, detail)
    else:
        _print_detail(detail)
    return 0


def delete_hosts(hosts: list, nodename: str | None = None,
                 force: bool = False, all_down: bool = False) -> tuple:
    """Forget hosts (or one node of each) in the inventory.

    Returns ``(deleted, refused)``: a dict of what went per deleted
    host, and the ``HostNotFound``/``HostInUse`` error of each refused
    one.  A host is refused while it holds placements, or while it
    still reports (within ``[scheduler] service_down_time``): a running
    compute would come back with its next report, and its instances
    would no longer be counted.  ``force`` drops its placements too
    (their resources are free again everywhere).  ``all_down`` adds
    every host none of whose nodes reported within that time.  The
    inventory is read once for all of them, so a fleet is cleaned in
    one command.  Running schedulers forget a deleted node that stopped
    reporting at their next periodic check.
    """
    from oslo_config import cfg

    from scheduler.db import usage

    def _mine(row, host):
        return row['host'] == host and nodename in (None, row['nodename'])

    reports = db_api.host_reports_get_all()
    usage_rows = usage.usage_get_all()
    placements = db_api.instance_get_all()
    cutoff = datetime.datetime.utcnow() - datetime.timedelta(
        seconds=cfg.CONF.scheduler.service_down_time)
    fresh = {r['host'] for r in reports
             if r['updated_at'] is not None and r['updated_at'] > cutoff}
    wanted = list(dict.fromkeys(hosts))
    if all_down:
        wanted += sorted({r['host'] for r in reports} - fresh
                         - set(wanted))
    deleted, refused = {}, {}
    for host in wanted:
        nodes = [r for r in reports if _mine(r, host)]
        held = [p for p in placements if _mine(p, host)]
        if not nodes and not any(_mine(r, host) for r in usage_rows):
            refused[host] = exception.HostNotFound(host=host)
        elif held and not force:
            refused[host] = exception.HostInUse(host=host, count=len(held))
        elif host in fresh and not force:
            refused[host] = exception.HostInUse(
                host=host, count=0,
                message='Host %s reported less than service_down_time '
                        'ago; stop its compute service first, or force '
                        'the deletion.' % host)
        else:
            dropped = usage.release([p['instance_uuid'] for p in held])
            deleted[host] = {
                'host': host, 'nodes': db_api.host_delete(host, nodename),
                'usage_rows': usage.delete_nodes(host, nodename),
                'placements': len(dropped)}
    return deleted, refused


def cmd_delete(args) -> int:
    if not args.host and not args.all_down:
        sys.stderr.write('hosts delete: name at least one host, or '
                         '--all-down\n')
        return 2
    deleted, refused = delete_hosts(args.host, args.node, args.force,
                                    args.all_down)
    for result in deleted.values():
        sys.stdout.write('Deleted host %(host)s: %(nodes)d node(s), '
                         '%(placements)d placement(s)\n' % result)
    for error in refused.values():
        sys.stderr.write(output.error_line(error) + '\n')
    if len(deleted) + len(refused) > 1:
        sys.stdout.write('%d host(s) deleted, %d refused\n'
                         % (len(deleted), len(refused)))
    return 1 if refused else 0


def run(args) -> int:
    """Run a hosts command; an unknown host or a missing inventory is one
    line on stderr and exit code 1, not a traceback."""
    try:
        return args.hosts_func(args)
    except (exception.HostNotFound, exception.HostInUse) as e:
        sys.stderr.write(output.error_line(e) + '\n')
        return 1
    except _INVENTORY_ERRORS as e:
        line = output.error_line(e).splitlines()[0]
        sys.stderr.write('%s\n(is [database] connection right, and has '
                         '"scheduler-manage db sync" run?)\n' % line)
        return 1
