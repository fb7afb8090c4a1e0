"""nova 34's side of ``bench_nova.py``: runs in nova's own virtualenv.

nova and this project both register options such as
``[filter_scheduler] enabled_filters`` (with different defaults) on
oslo.config's global ``CONF``, so they cannot share a process; this
worker is started by ``bench_nova.py`` with nova's interpreter and
answers one JSON line per JSON line on its standard input:

* ``{"op": "load", "fleet": PATH}``: build nova ``HostState`` objects
  from the fleet file, through nova's own ``HostState.update`` with a
  ``ComputeNode``, a service record and the host's aggregates, exactly
  as nova's ``HostManager`` does after reading its database.
* ``{"op": "select", "spec": {...}, "uuids": [...]}``: place
  ``len(uuids)`` instances as nova's scheduler does without placement
  (``SchedulerManager._legacy_find_hosts``): for each instance nova's
  ``_get_sorted_hosts`` (``HostManager.get_filtered_hosts`` with the
  default ``enabled_filters``, then ``get_weighed_hosts`` with every
  weigher) and ``_consume_selected_host`` on the chosen host.  Only that
  loop is timed.  The consumed hosts are rebuilt afterwards (untimed),
  as nova re-reads its hosts from the database for every request.
  With ``"keep": true`` (the mixed workload) the consumed hosts keep
  what they took, as nova's database would show after the builds: the
  placed instances stay in ``HostState.instances`` (which the server
  group, ``different_host`` and ``same_host`` filters and the soft
  affinity weighers read) and the next placement answer sees the usage.
* ``{"op": "walk", "spec": {...}}``: run nova's enabled filters one by
  one for the first instance and say how many hosts each kept.
* ``{"op": "quit"}``.

``load`` takes ``filters`` (a list of nova filter class names) to run
instead of nova's default ``enabled_filters``: the mixed workload's
requests need the server group, hint and aggregate filters.

Which hosts the filters start from: nova 34 has no availability-zone or
RAM/disk/vCPU host filter any more; placement answers that before the
filters run (the ``map_az_to_placement_aggregate`` request filter and
allocation candidates).  With ``candidates: "placement"`` the worker
hands nova's filters what placement would answer (hosts of the
requested zone with room for the flavor by placement's rule, total x
ratio - used >= requested, computed untimed, at most
``max_placement_results`` hosts when that is not 0); with ``"all"``,
every host (nova then ignores the zone).  Placement's own cost (an
HTTP call and its SQL) is not part of either figure.

Only the standard library and nova are imported here: this project is
not installed in nova's virtualenv.
"""

import datetime
from importlib import metadata
import json
import os
import sys
import time
import traceback
import types
import warnings

# Notices at import, not about what is measured.
warnings.filterwarnings('ignore', category=DeprecationWarning)
warnings.filterwarnings('ignore', message=r'\s*Eventlet is deprecated')

# The answers go to the original stdout; anything a library prints goes
# to stderr instead, so that it cannot break the protocol.
_ANSWERS = os.fdopen(os.dup(sys.stdout.fileno()), 'w')
os.dup2(sys.stderr.fileno(), sys.stdout.fileno())

import nova.conf  # noqa: E402
from nova import context as nova_context  # noqa: E402
from nova import objects  # noqa: E402
from nova.scheduler import host_manager  # noqa: E402
from nova.scheduler import manager  # noqa: E402

CONF = nova.conf.CONF
CELL = '6b3bd7a6-97b4-4bb0-a6a6-1a4f6e0c2d5b'


class _HostManager(host_manager.HostManager):
    """nova's HostManager without its database: the benchmark hands it
    the hosts and aggregates that nova would read there."""

    def refresh_cells_caches(self) -> None:
        self.cells = {}

    def _init_aggregates(self) -> None:
        """Aggregates come from the fleet file (``update_aggregates``)."""

    def _init_instance_info(self, computes_by_cell=None) -> None:
        """The generated fleet has no instance records."""


def _time(value):
    if value is None:
        return None
    return datetime.datetime.fromisoformat(value)


class Fleet:
    """nova's view of the generated fleet, and how to rebuild a host."""

    def __init__(self, data: dict, candidates: str, max_results: int):
        self.hm = _HostManager()
        self.hm.update_aggregates([
            objects.Aggregate(id=a['id'], uuid=a['uuid'], name=a['name'],
                              hosts=list(a['hosts']),
                              metadata=dict(a['metadata']))
            for a in data['aggregates']])
        self.records = data['hosts']
        self.states = [self._state(r) for r in self.records]
        self.index = {(r['host'], r['nodename']): i
                      for i, r in enumerate(self.records)}
        self.zones = [set(r['zones']) for r in self.records]
        self.candidates = candidates
        self.max_results = max_results
        self._placement: dict = {}
        self.shim = types.SimpleNamespace(host_manager=self.hm)

    def _state(self, r: dict):
        """One nova HostState, filled by nova's own ``update``."""
        updated = _time(r['updated_at'])
        compute = objects.ComputeNode(
            uuid=r['uuid'], host=r['host'],
            hypervisor_hostname=r['nodename'],
            memory_mb=r['memory_mb'], memory_mb_used=r['memory_mb_used'],
            free_ram_mb=r['memory_mb'] - r['memory_mb_used'],
            local_gb=r['local_gb'], local_gb_used=r['local_gb_used'],
            free_disk_gb=r['local_gb'] - r['local_gb_used'],
            disk_available_least=r['disk_available_least'],
            vcpus=r['vcpus'], vcpus_used=r['vcpus_used'],
            hypervisor_type=r['hypervisor_type'],
            hypervisor_version=r['hypervisor_version'],
            host_ip=r['host_ip'], cpu_info=json.dumps(r['cpu_info']),
            supported_hv_specs=[objects.HVSpec.from_list(list(s))
                                for s in r['supported_instances']],
            stats=dict(r['stats'], num_instances=str(r['num_instances']),
                       io_workload=str(r['num_io_ops']),
                       failed_builds=str(r['failed_builds'])),
            metrics='[]', numa_topology=None,
            pci_device_pools=objects.PciDevicePoolList(objects=[]),
            cpu_allocation_ratio=r['cpu_allocation_ratio'],
            ram_allocation_ratio=r['ram_allocation_ratio'],
            disk_allocation_ratio=r['disk_allocation_ratio'],
            updated_at=updated)
        service = {'id': 1, 'host': r['host'], 'binary': 'nova-compute',
                   'topic': 'compute', 'report_count': 1,
                   'disabled': r['disabled'],
                   'disabled_reason': r['disabled_reason'],
                   'forced_down': r['forced_down'],
                   'last_seen_up': updated, 'created_at': updated,
                   'updated_at': updated}
        state = self.hm.host_state_cls(r['host'], r['nodename'], CELL)
        state.update(compute, service,
                     self.hm._get_aggregates_info(r['host']), {})
        return state

    def placement_answer(self, spec_obj) -> list:
        """The hosts placement would return for ``spec_obj``."""
        if self.candidates == 'all':
            return list(self.states)
        flavor = spec_obj.flavor
        # A server booted from volume asks placement for no root disk.
        root = 0 if spec_obj.is_bfv else flavor.root_gb
        want = (spec_obj.availability_zone, flavor.vcpus, flavor.memory_mb,
                root + flavor.ephemeral_gb)
        found = self._placement.get(want)
        if found is None:
            zone, vcpus, ram, disk = want
            found = []
            for i, r in enumerate(self.records):
                if zone and zone not in self.zones[i]:
                    continue
                if (r['vcpus'] * r['cpu_allocation_ratio'] - r['vcpus_used']
                        < vcpus or
                        r['memory_mb'] * r['ram_allocation_ratio']
                        - r['memory_mb_used'] < ram or
                        r['local_gb'] * r['disk_allocation_ratio']
                        - r['local_gb_used'] < disk):
                    continue
                found.append(i)
                if self.max_results and len(found) >= self.max_results:
                    break
            self._placement[want] = found
        return [self.states[i] for i in found]

    def _kept(self, chosen: list, spec_obj) -> None:
        """The chosen hosts' usage recorded for the next placement
        answer, which is worked out again from then on."""
        flavor = spec_obj.flavor
        disk = (0 if spec_obj.is_bfv else flavor.root_gb) + \
            flavor.ephemeral_gb
        for state in chosen:
            r = self.records[self.index[(state.host, state.nodename)]]
            r['memory_mb_used'] += flavor.memory_mb
            r['vcpus_used'] += flavor.vcpus
            r['local_gb_used'] += disk
        if chosen:
            self._placement.clear()

    def select(self, spec_obj, uuids: list, keep: bool = False) -> dict:
        hosts = self.placement_answer(spec_obj)
        given = len(hosts)
        chosen, passed = [], None
        sorted_hosts = manager.SchedulerManager._get_sorted_hosts
        consume = manager.SchedulerManager._consume_selected_host
        c0, t0 = time.thread_time(), time.perf_counter()
        for index, uuid in enumerate(uuids):
            spec_obj.instance_uuid = uuid
            spec_obj.obj_reset_changes(['instance_uuid'])
            hosts = sorted_hosts(self.shim, spec_obj, hosts, index)
            if passed is None:
                passed = len(hosts)
            if not hosts:
                break
            consume(hosts[0], spec_obj, instance_uuid=uuid)
            chosen.append(hosts[0])
        seconds = time.perf_counter() - t0
        cpu = time.thread_time() - c0
        if keep:
            self._kept(chosen, spec_obj)
        else:
            for state in chosen:
                i = self.index[(state.host, state.nodename)]
                self.states[i] = self._state(self.records[i])
        return {'seconds': seconds, 'cpu_seconds': cpu, 'given': given,
                'passed': passed or 0,
                'chosen': [s.host for s in chosen]}

    def walk(self, spec_obj) -> dict:
        hosts = self.placement_answer(spec_obj)
        steps = []
        for flt in self.hm.enabled_filters:
            if not flt.run_filter_for_index(0):
                continue
            before = len(hosts)
            hosts = list(flt.filter_all(hosts, spec_obj))
            steps.append([type(flt).__name__, before, len(hosts)])
        return {'steps': steps}


def request_spec(data: dict, ctxt):
    """nova's RequestSpec for our spec, built as nova's API builds it."""
    flavor = objects.Flavor(
        id=1, flavorid='bench', name='bench', memory_mb=data['memory_mb'],
        vcpus=data['vcpus'], root_gb=data['root_gb'],
        ephemeral_gb=data['ephemeral_gb'], swap=data['swap'],
        extra_specs=dict(data['extra_specs']), rxtx_factor=1.0,
        vcpu_weight=0, is_public=True, disabled=False, description=None)
    group = data.get('instance_group')
    if group is not None:
        group = objects.InstanceGroup(
            uuid=group['uuid'], name=group['name'], policy=group['policy'],
            policies=[group['policy']], members=list(group['members']),
            hosts=list(group['hosts']), rules={})
    image = data['image_properties']
    filter_properties = {
        'ignore_hosts': data['ignore_hosts'],
        'force_hosts': data['force_hosts'],
        'force_nodes': data['force_nodes'],
        'scheduler_hints': data['scheduler_hints'] or {}}
    spec_obj = objects.RequestSpec.from_components(
        ctxt, data['uuid'],
        None if image is None else {'properties': dict(image)},
        flavor, None, None, filter_properties, group,
        data['availability_zone'], project_id=data['project_id'],
        user_id=data['user_id'])
    spec_obj.num_instances = data['num_instances']
    spec_obj.is_bfv = bool(data.get('is_bfv'))
    return spec_obj


def _answer(payload: dict) -> None:
    _ANSWERS.write(json.dumps(payload) + '\n')
    _ANSWERS.flush()


def main() -> None:
    objects.register_all()
    CONF([], project='nova', default_config_files=[])
    # As the project's side does: a fleet loaded minutes ago is still up.
    CONF.set_override('service_down_time', 86400)
    ctxt = nova_context.get_admin_context()
    fleet = None
    for line in sys.stdin:
        msg = json.loads(line)
        op = msg['op']
        if op == 'quit':
            break
        try:
            if op == 'load':
                t0 = time.perf_counter()
                with open(msg['fleet']) as f:
                    data = json.load(f)
                if msg.get('filters'):
                    CONF.set_override('enabled_filters', msg['filters'],
                                      group='filter_scheduler')
                fleet = Fleet(data, msg['candidates'],
                              msg['max_placement_results'])
                _answer({'hosts': len(fleet.states),
                         'load_s': time.perf_counter() - t0,
                         'nova': metadata.version('nova'),
                         'filters': [type(f).__name__
                                     for f in fleet.hm.enabled_filters],
                         'weighers': [type(w).__name__
                                      for w in fleet.hm.weighers]})
            elif op == 'select':
                _answer(fleet.select(request_spec(msg['spec'], ctxt),
                                     msg['uuids'], msg.get('keep', False)))
            elif op == 'walk':
                _answer(fleet.walk(request_spec(msg['spec'], ctxt)))
            else:
                _answer({'error': 'unknown op %r' % op})
        except Exception as e:
            # The caller shows it and stops; a NoValidHost is no crash.
            _answer({'error': '%s: %s' % (type(e).__name__, e),
                     'trace': traceback.format_exc()})


if __name__ == '__main__':
    main()
