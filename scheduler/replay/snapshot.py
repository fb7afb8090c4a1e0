"""A fleet as a replay starts from: hosts, their usage, aggregates.

``take()`` reads it from the inventory (what ``scheduler-manage
snapshot`` writes): each node's last report with the claims not yet
reported laid over it, so that the replay starts from what the filters
saw; the aggregates; and the size of every instance placed, so that a
release in the trace frees what the instance held.

``load()`` reads a snapshot file, or a simulator fleet file
(``scheduler.simulator.fleet``: empty hosts), into a ``Fleet``.
"""

import dataclasses
import datetime
import json

from scheduler import objects

FORMAT = 'scheduler-fleet-snapshot'
VERSION = 1


class SnapshotError(ValueError):
    """The fleet cannot be read; the message says which file and why."""


@dataclasses.dataclass
class Fleet:
    """Reports (``objects.HostState``), aggregates (``objects.Aggregate``)
    and the instances already there: uuid -> ``(host, nodename,
    memory_mb, vcpus, disk_gb)``."""

    reports: list
    aggregates: list
    instances: dict = dataclasses.field(default_factory=dict)
    source: str = ''


def _aggregate_dict(agg) -> dict:
    return {'name': agg.name, 'uuid': agg.obj_get('uuid'),
            'hosts': sorted(agg.hosts), 'metadata': dict(agg.metadata)}


def take() -> dict:
    """The inventory's fleet now, as a snapshot document."""
    from scheduler.db import api as db_api
    from scheduler import host_manager

    manager = host_manager.HostManager()
    manager.load_from_inventory()
    placements = db_api.instance_get_all()
    reports = []
    for state in sorted(manager.get_all_host_states(),
                        key=lambda s: s.key()):
        report = state.reported_view().report.obj_clone()
        listed = set(report.instance_uuids)
        for p in placements:
            if ((p['host'], p['nodename']) == state.key()
                    and p['instance_uuid'] not in listed):
                # A claim the compute has not reported yet: the replay
                # starts with it in place, as the filters saw it.
                report.apply_claim(p['memory_mb'], p['vcpus'],
                                   p['disk_gb'], p['instance_uuid'])
        if state.disabled:
            report.disabled = True
        reports.append(report.obj_to_primitive())
    return {
        'format': FORMAT, 'version': VERSION,
        'taken_at': datetime.datetime.now(
            datetime.timezone.utc).isoformat(),
        'reports': reports,
        'aggregates': [_aggregate_dict(a) for a in manager.aggregates()],
        'instances': {p['instance_uuid']: [p['host'], p['nodename'],
                                           p['memory_mb'], p['vcpus'],
                                           p['disk_gb']]
                      for p in placements},
    }


def from_fleet_spec(spec, source: str = 'fleet') -> Fleet:
    """A ``scheduler.simulator.fleet.FleetSpec``: empty hosts."""
    from scheduler.simulator import agent
    return Fleet([agent.build_host_state(h) for h in spec.hosts],
                 spec.aggregates(), {}, source)


def parse(data: dict, source: str = 'snapshot') -> Fleet:
    """A snapshot document or a fleet file's document."""
    if not isinstance(data, dict):
        raise SnapshotError('%s: not a JSON object' % source)
    if 'groups' in data:
        from scheduler.simulator import fleet as fleet_mod
        try:
            return from_fleet_spec(fleet_mod.parse(data, source=source),
                                   source)
        except fleet_mod.FleetError as e:
            raise SnapshotError(str(e))
    if data.get('format') != FORMAT:
        raise SnapshotError('%s: neither a fleet snapshot ("scheduler-'
                            'manage snapshot") nor a fleet file' % source)
    try:
        reports = [objects.HostState.obj_from_primitive(p)
                   for p in data['reports']]
        aggregates = [objects.Aggregate(
            id=None, uuid=a.get('uuid'), name=a['name'],
            hosts=list(a['hosts']), metadata=dict(a['metadata']))
            for a in data.get('aggregates', [])]
    except Exception as e:
        raise SnapshotError('%s: unreadable: %s' % (source, e))
    instances = {uuid: tuple(v)
                 for uuid, v in (data.get('instances') or {}).items()}
    return Fleet(reports, aggregates, instances, source)


def load(path: str) -> Fleet:
    try:
        with open(path, encoding='utf-8') as f:
            data = json.load(f)
    except OSError as e:
        raise SnapshotError('%s: cannot read: %s' % (path, e.strerror or e))
    except json.JSONDecodeError as e:
        raise SnapshotError('%s: not valid JSON: line %d: %s'
                            % (path, e.lineno, e.msg))
    return parse(data, source=path)
