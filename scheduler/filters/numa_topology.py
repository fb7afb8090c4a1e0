"""NUMATopologyFilter: each NUMA cell the instance asks for fits in its
own NUMA cell of the host, within the host's allocation ratios."""

from scheduler.filters import base
from scheduler.resources import numa


class NUMATopologyFilter(base.RequestScopedFilter):
    """Passes hosts where every NUMA cell of the instance's topology fits
    in a different host NUMA cell: no more vCPUs than the cell has CPUs
    nor more memory than it has, and the cell's usage plus the
    instance's within its CPUs x ``cpu_allocation_ratio`` and memory x
    ``ram_allocation_ratio`` (aggregate overrides included).  An
    instance without a NUMA topology passes every host; one with a
    topology passes only hosts that report theirs.

    Its ``host_limits`` are the ratios used, for the compute to
    enforce.  Runs for every instance of a request, since each placed
    instance uses cells (see ``scheduler.resources.numa.claim_numa``).

    On a rebuild the instance keeps its cells: skipped, as nova does
    since bug 1804502 (its API refuses a rebuild that changes them).
    """

    def prepare(self, spec_obj):
        topology = spec_obj.obj_get('numa_topology')
        if topology is None or not topology.cells:
            return base.SKIP
        return numa.wanted_cells(topology)

    def passes(self, host_state, wanted: list) -> base.Verdict:
        return numa.host_fit(host_state, wanted) is not None or \
            base.Rejected(lambda: _why_not(host_state, wanted))

    def host_limits(self, host_state, spec_obj) -> dict:
        """The ratios the compute must apply to the instance's cells."""
        if self.prepare(spec_obj) is base.SKIP:
            return {}
        return {'numa_topology': {
            'cpu_allocation_ratio': host_state.allocation_ratio('cpu'),
            'ram_allocation_ratio': host_state.allocation_ratio('ram')}}


def _why_not(host_state, wanted: list) -> str:
    topology = host_state.numa_topology
    if topology is None or not topology.cells:
        return 'reports no NUMA topology; the instance asks for one'
    cells = ', '.join(
        'cell %d: %d/%d CPUs, %d/%d MB used' % (
            c.id, c.cpu_usage, len(c.cpuset), c.memory_usage, c.memory)
        for c in topology.cells)
    asked = ', '.join('%d vCPUs + %d MB' % (vcpus, memory)
                      for _id, vcpus, memory in wanted)
    return ('instance NUMA cells (%s) do not fit in distinct host cells '
            '(%s) with cpu ratio %s, ram ratio %s'
            % (asked, cells, host_state.allocation_ratio('cpu'),
               host_state.allocation_ratio('ram')))
