"""``hosts``: what the inventory knows about each compute node."""

import argparse

from scheduler.cli import output

COLUMNS = ['host', 'nodename', 'state', 'disabled', 'free_ram_mb',
           'memory_mb', 'free_disk_gb', 'local_gb', 'free_vcpus', 'vcpus',
           'instances', 'aggregates', 'last_report_s']


def host_rows() -> list:
    """One row per node, from the inventory (no running service needed)."""
    from scheduler import host_manager
    manager = host_manager.HostManager()
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
    return rows


def cmd_hosts(args) -> int:
    output.emit(host_rows(), COLUMNS, args.format)
    return 0


def register(subparsers, common: argparse.ArgumentParser) -> None:
    hosts = subparsers.add_parser(
        'hosts', parents=[common],
        help='hosts known to the inventory: up/down, free and total '
             'resources')
    hosts.set_defaults(func=cmd_hosts)
