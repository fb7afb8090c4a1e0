"""NUMA arithmetic: fitting an instance's cells into a host's, and usage.

Used by NUMATopologyFilter (does it fit?), the host manager's claims
(take the cells) and the laying of unreported claims over a new report.
"""

from oslo_log import log as logging

LOG = logging.getLogger(__name__)


def wanted_cells(instance_topology) -> list:
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


def host_fit(host_state, wanted: list):
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
    wanted = wanted_cells(instance_topology)
    cells = host_fit(host_state, wanted)
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
