"""PciPassthroughFilter: enough matching devices over the pools;
claim_pci / release_pci consume and give back."""

from scheduler.filters import pci_passthrough as mod
from scheduler.resources import pci
from scheduler import objects
from tests.unit.filters.catalogue import host
from tests.unit.filters.catalogue import passing
from tests.unit.filters.catalogue import request

NIC = {'vendor_id': '8086', 'product_id': '1520'}


def _pool(vendor='8086', product='1520', count=1, numa_node=0, **tags):
    return objects.PciDevicePool(vendor_id=vendor, product_id=product,
                                 numa_node=numa_node, tags=tags,
                                 count=count)


def _spec(*requests):
    return request(pci_requests=[
        objects.InstancePCIRequest(count=count, spec=specs,
                                   alias_name=None)
        for count, specs in requests])


def _hosts():
    return [host('one', pci_pools=[_pool(count=1)]),
            host('many', pci_pools=[_pool(count=2, numa_node=0),
                                    _pool(count=2, numa_node=1),
                                    _pool('10de', '1db4', count=1)]),
            host('none')]


def test_no_request_skips():
    flt = mod.PciPassthroughFilter()
    assert flt.prepare(request()) is mod.base.SKIP
    assert passing(flt, _hosts(), request()) == ['one', 'many', 'none']


def test_count_summed_over_pools():
    flt = mod.PciPassthroughFilter()
    assert passing(flt, _hosts(), _spec((1, [NIC]))) == ['one', 'many']
    assert passing(flt, _hosts(), _spec((4, [NIC]))) == ['many']
    assert passing(flt, _hosts(), _spec((5, [NIC]))) == []
    reason = flt.rejection_reason(_hosts()[2], _spec((1, [NIC])))
    assert 'no devices' in reason


def test_spec_matches_ids_case_insensitively_and_tags():
    h = host('h', pci_pools=[_pool('8086', '154D', count=2,
                                   physical_network='physnet1')])
    flt = mod.PciPassthroughFilter()
    assert passing(flt, [h], _spec((1, [{'vendor_id': '0x8086',
                                         'product_id': '154d'}]))) == ['h']
    assert passing(flt, [h], _spec((1, [{
        'vendor_id': '8086', 'physical_network': 'physnet1'}]))) == ['h']
    assert passing(flt, [h], _spec((1, [{
        'vendor_id': '8086', 'physical_network': 'physnet2'}]))) == []


def test_any_spec_of_a_request_will_do():
    gpu = {'vendor_id': '10de', 'product_id': '1db4'}
    spec = _spec((2, [gpu, {'vendor_id': 'ffff'}]))
    assert passing(mod.PciPassthroughFilter(), _hosts(), spec) == []
    spec = _spec((1, [{'vendor_id': 'ffff'}, gpu]))
    assert passing(mod.PciPassthroughFilter(), _hosts(), spec) == ['many']


def test_several_requests_share_the_pools():
    h = host('h', pci_pools=[_pool(count=1, numa_node=0),
                             _pool(count=1, numa_node=1)])
    broad = (1, [NIC])
    narrow = (1, [dict(NIC, numa_node='0')])
    flt = mod.PciPassthroughFilter()
    # The broad request must leave node 0's device to the narrow one.
    assert passing(flt, [h], _spec(broad, narrow)) == ['h']
    assert passing(flt, [h], _spec(broad, broad, narrow)) == []


def test_claim_and_release_copy_the_pools():
    h = _hosts()[0]
    report_pool = h.report.pci_pools[0]
    spec = _spec((1, [NIC]))
    flt = mod.PciPassthroughFilter()
    used = pci.claim_pci(h, spec)
    assert used and h.pci_pools[0].count == 0
    assert report_pool.count == 1
    assert passing(flt, [h], spec) == []
    pci.release_pci(h, used)
    assert h.pci_pools[0].count == 1
    assert passing(flt, [h], spec) == ['one']
    assert pci.claim_pci(h, request()) == []
    assert not flt.run_filter_once_per_request


def test_recorded_usage_lays_over_a_new_report():
    old = host('h', pci_pools=[_pool(count=2, numa_node=0),
                               _pool(count=2, numa_node=1)])
    used = pci.claim_pci(old, _spec((3, [NIC])))
    assert sum(p.count for p in old.pci_pools) == 1
    # The next report lists the pools in another order.
    new = host('h', pci_pools=[_pool(count=2, numa_node=1),
                               _pool(count=2, numa_node=0)])
    pci.apply_pci_usage(new, used)
    assert sorted(p.count for p in new.pci_pools) == [0, 1]
    pci.release_pci(new, used)
    assert [p.count for p in new.pci_pools] == [2, 2]


def test_usage_never_goes_negative():
    h = host('h', pci_pools=[_pool(count=1)])
    pci.apply_pci_usage(h, [(pci.pool_key(h.pci_pools[0]), 5)])
    assert h.pci_pools[0].count == 0
