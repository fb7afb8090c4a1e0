"""RAM, disk and vCPU: what one instance asks for and what a host has.

nova's rules, in one place for RamFilter, DiskFilter, VCPUFilter, the
weighers and the claims:

* swap counts as disk; the root disk does not when the instance boots
  from a volume;
* a host's free disk is the smaller of what its totals say and the
  ``disk_available_least`` its compute reports (what the disk images
  can really still grow into);
* overcommit lets instances share a host's resources, but never makes
  one instance larger than the host: an instance asking for more RAM,
  disk or vCPUs than the host physically has is refused whatever the
  allocation ratio.
"""


#: The scheduler hint nova sets on a rebuild request: the instance keeps
#: its host and the resources it holds there.
REBUILD_HINT = '_nova_check_type'


def request_is_rebuild(spec_obj) -> bool:
    """Whether ``spec_obj`` is nova's rebuild check: the scheduler hint
    ``_nova_check_type`` with the single value ``rebuild`` (the request
    asks for no new resources, so the resource filters and the claim
    skip it)."""
    getter = getattr(spec_obj, 'obj_get', None)
    hints = (getter('scheduler_hints') if getter else None) or {}
    return list(hints.get(REBUILD_HINT) or []) == ['rebuild']


def resources_of(spec_obj) -> tuple:
    """``(memory_mb, vcpus, disk_gb)`` one instance of ``spec_obj`` uses.

    Swap counts as disk, rounded up to whole GiB; the root disk does not
    count when the instance boots from a volume.
    """
    flavor = spec_obj.flavor
    disk_gb = flavor.ephemeral_gb + (flavor.swap + 1023) // 1024
    if not spec_obj.obj_get('is_bfv', False):
        disk_gb += flavor.root_gb
    return flavor.memory_mb, flavor.vcpus, disk_gb


def requested_disk_mb(spec_obj) -> int:
    """Root (unless booted from volume) + ephemeral + swap, in MiB."""
    flavor = spec_obj.flavor
    disk_gb = flavor.ephemeral_gb
    if not spec_obj.obj_get('is_bfv', False):
        disk_gb += flavor.root_gb
    return disk_gb * 1024 + flavor.swap


def free_disk_gb(host_state) -> int:
    """Free local disk in GiB: totals minus usage, capped by
    ``disk_available_least`` when the compute reports it (as nova's
    host manager does)."""
    free = host_state.local_gb - host_state.local_gb_used
    least = getattr(host_state, 'disk_available_least', None)
    if least is not None:
        free = min(free, least)
    return free


def usable_ram_mb(host_state) -> float:
    """RAM left to place under overcommit: total x ratio - used."""
    return (host_state.memory_mb * host_state.allocation_ratio('ram')
            - host_state.memory_mb_used)


def usable_vcpus(host_state) -> float:
    """vCPUs left to place under overcommit: total x ratio - used."""
    return (host_state.vcpus * host_state.allocation_ratio('cpu')
            - host_state.vcpus_used)


def usable_disk_mb(host_state) -> float:
    """Disk left to place under overcommit, in MiB (``usable`` of the
    totals and the free disk)."""
    return usable(host_state.local_gb * 1024,
                  host_state.allocation_ratio('disk'),
                  free_disk_gb(host_state) * 1024)


def usable(total: float, ratio: float, free: float) -> float:
    """What is left to place under overcommit: total x ratio - used,
    where used is total - free."""
    return total * ratio - (total - free)


def larger_than_host(requested: float, total: float) -> bool:
    """nova's guard: an instance may overcommit against other instances,
    never against itself."""
    return requested > total
