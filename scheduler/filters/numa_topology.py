"""NUMATopologyFilter: each NUMA cell the instance asks for fits in its
own NUMA cell of the host, within the host's allocation ratios."""

from oslo_log import log as logging

from scheduler.filters import base

LOG = logging.getLogger(__name__)


def _wanted_cells(instance_topology) -> list:
    """``[(guest cell id, vCPUs, memory MB)]`` of an instance topology."""
    return [(cell.id, len(cell.cpuset), cell.memory)
            for cell in instance_topology.cells]


def _cell_fits(host_cell, vcpus: int, memory: int, cpu_ratio: float,
               ram_ratio: float) -> bool:
    pcpus = len(host_cell.cpuset)
    if vcpus > pcpus or memory > host_cell.memory:
        # Oversubscription shares a cell; it never makes it larger.
        return False
    return (host_cell.cpu_usage + vcpus <= pcpus * cpu_ratio
            and host_cell.memory_usage + memory
            <= host_cell.memory * ram_ratio)


def fit_cells(host_cells: list, wanted: list, cpu_ratio: float,
              ram_ratio: float) -> list | None:
    """Give each wanted cell a distinct host cell it fits in, or None.

    ``wanted`` is ``[(guest cell id, vCPUs, memory MB)]``; the answer
    is the host cell of each, in order.  Which guest cell fits which
    host cell is a bipartite graph: augmenting paths find a complete
    matching whenever one exists (trying host cells in order, so the
    answer is deterministic), where a greedy first fit could miss it.
    """
    if len(wanted) > len(host_cells):
        return None
    fits = [[j for j, cell in enumerate(host_cells)
             if _cell_fits(cell, vcpus, memory, cpu_ratio, ram_ratio)]
            for _id, vcpus, memory in wanted]
    owner = [None] * len(host_cells)

    def place(i: int, seen: list) -> bool:
        for j in fits[i]:
            if seen[j]:
                continue
            seen[j] = True
            if owner[j] is None or place(owner[j], seen):
                owner[j] = i
                return True
        return False

    for i in range(len(wanted)):
        if not fits[i] or not place(i, [False] * len(host_cells)):
            return None
    chosen = [None] * len(wanted)
    for j, i in enumerate(owner):
        if i is not None:
            chosen[i] = host_cells[j]
    return chosen


def _host_fit(host_state, wanted: list):
    topology = host_state.numa_topology
    if topology is None or not topology.cells:
        return None
    return fit_cells(list(topology.cells), wanted,
                     host_state.allocation_ratio('cpu'),
                     host_state.allocation_ratio('ram'))


def claim_numa(host_state, spec_obj) -> list:
    """Consume one instance's NUMA cells on ``host_state``.

    Call after placing an instance of ``spec_obj`` (the filter passed
    the host).  Returns ``[(host cell id, vCPUs, memory MB)]`` used, to
    keep with the claim and hand to ``release_numa``: the cells must be
    given back exactly, whatever fits later.  ``[]`` when the request
    has no NUMA topology or the host no longer fits it (logged).
    """
    instance_topology = spec_obj.obj_get('numa_topology')
    if instance_topology is None or not instance_topology.cells:
        return []
    wanted = _wanted_cells(instance_topology)
    cells = _host_fit(host_state, wanted)
    if cells is None:
        LOG.warning('%s: the instance NUMA topology no longer fits; its '
                    'cells are not consumed', host_state)
        return []
    used = [(cell.id, vcpus, memory)
            for cell, (_id, vcpus, memory) in zip(cells, wanted)]
    apply_numa_usage(host_state, used)
    return used


def apply_numa_usage(host_state, used: list, sign: int = 1) -> None:
    """Add (``sign=1``) or give back (``sign=-1``) recorded cell usage.

    ``used`` is what ``claim_numa`` returned.  Adding it again is how a
    claim the compute has not reported yet is laid over a new report.
    """
    topology = host_state.numa_topology
    if topology is None or not used:
        return
    by_id = {cell.id: cell for cell in topology.cells}
    for cell_id, vcpus, memory in used:
        cell = by_id.get(cell_id)
        if cell is not None:
            cell.cpu_usage = max(0, cell.cpu_usage + sign * vcpus)
            cell.memory_usage = max(0, cell.memory_usage + sign * memory)


def release_numa(host_state, used: list) -> None:
    """Give back what ``claim_numa`` returned."""
    apply_numa_usage(host_state, used, sign=-1)


class NUMATopologyFilter(base.RequestScopedFilter):
    """Passes hosts where every NUMA cell of the instance's topology fits
    in a different host NUMA cell: no more vCPUs than the cell has CPUs
    nor more memory than it has, and the cell's usage plus the
    instance's within its CPUs x ``cpu_allocation_ratio`` and memory x
    ``ram_allocation_ratio`` (aggregate overrides included).  An
    instance without a NUMA topology passes every host; one with a
    topology passes only hosts that report theirs.

    Its ``host_limits`` are the ratios used, for the compute to
    enforce.  Runs for every instance of a request, since
    each placed instance uses cells (see ``claim_numa``).
    """

    def prepare(self, spec_obj):
        topology = spec_obj.obj_get('numa_topology')
        if topology is None or not topology.cells:
            return base.SKIP
        return _wanted_cells(topology)

    def passes(self, host_state, wanted: list) -> bool:
        return _host_fit(host_state, wanted) is not None

    def host_limits(self, host_state, spec_obj) -> dict:
        """The ratios the compute must apply to the instance's cells."""
        if self.prepare(spec_obj) is base.SKIP:
            return {}
        return {'numa_topology': {
            'cpu_allocation_ratio': host_state.allocation_ratio('cpu'),
            'ram_allocation_ratio': host_state.allocation_ratio('ram')}}

    def rejection_reason(self, host_state, spec_obj) -> str:
        wanted = self.prepare(spec_obj)
        if wanted is base.SKIP:
            return 'did not pass'
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
