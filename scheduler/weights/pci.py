"""PCIWeigher: keep hosts with PCI devices for the instances that need
them."""

from scheduler.resources import pci
from scheduler.weights import base
from scheduler.weights import non_negative


class PCIWeigher(non_negative.NonNegativeMultiplier, base.BaseHostWeigher):
    """Weighs hosts by their free PCI devices, fewer first.

    An instance without PCI requests prefers hosts with no (or few)
    devices, so that PCI hosts stay free for instances that need them.
    An instance with PCI requests prefers, among the hosts that can
    serve them, the one with the fewest free devices (a one-device
    request takes the one-device host and leaves the many-device host
    for larger requests); hosts that cannot serve them weigh least.

    ``pci_weight_multiplier`` must not be negative (that would push
    instances without PCI requests onto PCI hosts): the option refuses
    it, and a negative aggregate override is logged and read as 0.0.
    Useful with PciPassthroughFilter or NUMATopologyFilter enabled.
    """

    multiplier_option = 'pci_weight_multiplier'

    def weigh_columns(self, columns, spec_obj):
        """Minus the free devices for a request without PCI requests;
        else None (per host)."""
        return None if pci.wanted_devices(spec_obj) else -columns.pci_free

    def weigh_objects(self, weighed_hosts: list, spec_obj) -> list:
        hosts = [w.obj for w in weighed_hosts]
        if not hosts:
            return []
        free = [sum(pool.count for pool in host.pci_pools)
                for host in hosts]
        wanted = pci.wanted_devices(spec_obj)
        if not wanted:
            return [-f for f in free]
        bottom = -(max(free) + 1)
        return [-f if pci.fit_requests(host.pci_pools, wanted)
                is not None else bottom
                for host, f in zip(hosts, free)]
