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

    def passes(self, host_state, wanted: list) -> bool:
        pools = host_state.pci_pools
        return bool(pools) and pci.fit_requests(pools, wanted) is not None

    def rejection_reason(self, host_state, spec_obj) -> str:
        wanted = self.prepare(spec_obj)
        if wanted is base.SKIP:
            return 'did not pass'
        asked = '; '.join('%d x %s' % (count, specs)
                          for count, specs in wanted)
        have = ', '.join('%s:%s x%d' % (p.vendor_id, p.product_id, p.count)
                         for p in host_state.pci_pools) or 'no devices'
        return 'PCI requests %s not met by free devices (%s)' % (asked, have)
