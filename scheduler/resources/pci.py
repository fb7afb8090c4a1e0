"""PCI arithmetic: matching requests to a host's device pools, and usage.

Used by PciPassthroughFilter, PCIWeigher and the host manager's claims.
"""

from oslo_log import log as logging

LOG = logging.getLogger(__name__)

#: Hexadecimal ids: ``8086`` and ``8086`` but also ``0x8086``/``8086``
#: written in either case must match.
_HEX_KEYS = ('vendor_id', 'product_id')


def _normal(key: str, value):
    if value is None:
        return None
    value = str(value).strip()
    if key in _HEX_KEYS:
        value = value.lower()
        if value.startswith('0x'):
            value = value[2:]
    return value


def pool_properties(pool) -> dict:
    """What a request spec may match in a pool: ids, NUMA node, tags."""
    props = {key: _normal(key, value)
             for key, value in (pool.obj_get('tags') or {}).items()}
    props['vendor_id'] = _normal('vendor_id', pool.vendor_id)
    props['product_id'] = _normal('product_id', pool.product_id)
    numa_node = pool.obj_get('numa_node')
    props['numa_node'] = None if numa_node is None else str(numa_node)
    return props


def pool_key(pool) -> tuple:
    """Identifies a pool across reports (its position may change)."""
    return (pool.vendor_id, pool.product_id, pool.obj_get('numa_node'),
            tuple(sorted((pool.obj_get('tags') or {}).items())))


def wanted_devices(spec_obj) -> list:
    """``[(count, [spec dict, ...])]`` of the request's PCI requests.

    A request is met by ``count`` devices each matching any of its spec
    dicts; a spec dict matches a pool when every key equals the pool's
    (``vendor_id``, ``product_id``, ``numa_node`` or a tag such as
    ``physical_network``).
    """
    wanted = []
    for request in spec_obj.obj_get('pci_requests') or []:
        count = request.count
        if count <= 0:
            continue
        specs = [{key: _normal(key, value) for key, value in spec.items()}
                 for spec in request.spec]
        wanted.append((count, specs))
    return wanted


def _matches(specs: list, props: dict) -> bool:
    return any(all(props.get(key) == value for key, value in spec.items())
               for spec in specs)


def fit_requests(pools: list, wanted: list) -> list | None:
    """``[(pool index, devices)]`` taken for ``wanted``, or None.

    Requests are served in order from the pools they match; a request
    takes first from the pools fewest later requests could use, so that
    a broad request does not eat the only devices a narrow one fits.
    """
    props = [pool_properties(pool) for pool in pools]
    free = [pool.count for pool in pools]
    matching = [[j for j, p in enumerate(props) if _matches(specs, p)]
                for _count, specs in wanted]
    taken = []
    for i, (count, _specs) in enumerate(wanted):
        later = matching[i + 1:]
        order = sorted(matching[i],
                       key=lambda j: sum(j in m for m in later))
        if sum(free[j] for j in order) < count:
            return None
        for j in order:
            use = min(free[j], count)
            if use:
                free[j] -= use
                count -= use
                taken.append((j, use))
            if not count:
                break
    return taken


def claim_pci(host_state, spec_obj) -> list:
    """Consume one instance's PCI devices on ``host_state``.

    Returns ``[(pool key, devices)]`` to keep with the claim and hand to
    ``release_pci``; ``[]`` when nothing was requested or the host no
    longer has the devices (logged).  Pools are replaced by changed
    copies, never changed in place: a HostView shares its pool objects
    with the compute's report, which must stay as it was sent.
    """
    wanted = wanted_devices(spec_obj)
    if not wanted:
        return []
    pools = host_state.pci_pools
    taken = fit_requests(pools, wanted)
    if taken is None:
        LOG.warning('%s: the requested PCI devices are no longer free; '
                    'none consumed', host_state)
        return []
    by_key: dict = {}
    for j, count in taken:
        key = pool_key(pools[j])
        by_key[key] = by_key.get(key, 0) + count
    used = list(by_key.items())
    apply_pci_usage(host_state, used)
    return used


def apply_pci_usage(host_state, used: list, sign: int = 1) -> None:
    """Take (``sign=1``) or give back (``sign=-1``) recorded devices.

    ``used`` is what ``claim_pci`` returned; pools are found by their
    key, not their position, so this works on a newer report too (how a
    claim the compute has not reported yet is laid over a new report).
    Counts never go below zero.  Pools are replaced by changed copies,
    as in ``claim_pci``.
    """
    if not used:
        return
    pools = list(host_state.pci_pools)
    index: dict = {}
    for j, pool in enumerate(pools):
        index.setdefault(pool_key(pool), []).append(j)
    for key, count in used:
        for j in index.get(key, ()):
            if not count:
                break
            pool = pools[j].obj_clone()
            if sign > 0:
                change = min(count, pool.count)
                pool.count -= change
            else:
                change = count
                pool.count += change
            count -= change
            pools[j] = pool
    host_state.pci_pools = pools


def release_pci(host_state, used: list) -> None:
    """Give back what ``claim_pci`` returned."""
    apply_pci_usage(host_state, used, sign=-1)
