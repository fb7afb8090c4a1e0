"""PciPassthroughFilter: the host has free PCI devices for every PCI
request of the instance."""

from scheduler.filters import base
from scheduler.resources import pci


class PciPassthroughFilter(base.RequestScopedFilter):
    """Passes hosts whose PCI device pools hold enough free devices for
    every PCI request of the instance (``pci_requests``, built from the
    flavor's PCI aliases and SR-IOV ports): each request's ``count``
    devices matching one of its spec dicts by vendor_id, product_id,
    NUMA node or tags, summed over the pools.  Requests without PCI
    devices pass every host.

    Runs for every instance of a request, since each placed instance
    uses devices (see ``scheduler.resources.pci.claim_pci``).
    """

    def prepare(self, spec_obj):
        return pci.wanted_devices(spec_obj) or base.SKIP

    def passes(self, host_state, wanted: list) -> base.Verdict:
        pools = host_state.pci_pools
        if pools and pci.fit_requests(pools, wanted) is not None:
            return True
        return base.Rejected(
            lambda: 'PCI requests %s not met by free devices (%s)' % (
                '; '.join('%d x %s' % (count, specs)
                          for count, specs in wanted),
                ', '.join('%s:%s x%d' % (p.vendor_id, p.product_id, p.count)
                          for p in pools or ()) or 'no devices'))
