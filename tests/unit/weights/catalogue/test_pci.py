"""PCIWeigher: the guide's three hosts (one device, many, none)."""

from oslo_config import cfg
import pytest

from scheduler import objects
from scheduler.weights import pci as mod
from tests.unit.filters.catalogue import aggregate
from tests.unit.filters.catalogue import host
from tests.unit.filters.catalogue import request
from tests.unit.weights.catalogue import contributions
from tests.unit.weights.catalogue import ranking

NIC = {'vendor_id': '8086', 'product_id': '1520'}


def _pool(count):
    return objects.PciDevicePool(vendor_id='8086', product_id='1520',
                                 numa_node=0, tags={}, count=count)


def _hosts(**kwargs):
    return [host('many', pci_pools=[_pool(4), _pool(4)], **kwargs),
            host('single', pci_pools=[_pool(1)]),
            host('none')]


def _spec(count):
    return request(pci_requests=[objects.InstancePCIRequest(
        count=count, spec=[NIC], alias_name='nic')])


def test_single_device_request_prefers_the_single_device_host():
    assert ranking(mod.PCIWeigher(), _hosts(), _spec(1))[0] == 'single'


def test_multi_device_request_prefers_the_many_device_host():
    assert ranking(mod.PCIWeigher(), _hosts(), _spec(2))[0] == 'many'


def test_no_pci_request_keeps_pci_hosts_free():
    assert ranking(mod.PCIWeigher(), _hosts(), request()) == [
        'none', 'single', 'many']


def test_host_that_cannot_serve_weighs_least():
    assert ranking(mod.PCIWeigher(), _hosts(), _spec(1))[-1] == 'none'


def test_negative_option_is_refused(conf):
    with pytest.raises(ValueError):
        conf.config(pci_weight_multiplier=-1.0, group='filter_scheduler')
    assert cfg.CONF.filter_scheduler.pci_weight_multiplier == 1.0


def test_negative_aggregate_override_is_clipped_and_logged(caplog):
    agg = aggregate(pci_weight_multiplier='-5')
    hosts = _hosts(aggregates=[agg])
    weigher = mod.PCIWeigher()
    assert weigher.weight_multipliers(hosts) == [0.0, 1.0, 1.0]
    assert weigher.weight_multiplier(hosts[0]) == 0.0
    assert contributions(weigher, hosts, request())['many'] == 0.0
    assert 'only positive multipliers are allowed' in caplog.text
