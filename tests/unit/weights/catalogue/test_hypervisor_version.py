"""HypervisorVersionWeigher: newer hypervisors first by default."""

from scheduler.weights import hypervisor_version as mod
from tests.unit.filters.catalogue import host
from tests.unit.filters.catalogue import request
from tests.unit.weights.catalogue import ranking


def _hosts():
    # libvirt 7.1.123 is reported as 700100123, as the guide says.
    return [host('old', hypervisor_version=6000000),
            host('new', hypervisor_version=700100123),
            host('unknown')]


def test_newer_first():
    assert ranking(mod.HypervisorVersionWeigher(), _hosts(), request()) \
        == ['new', 'old', 'unknown']


def test_negative_multiplier_prefers_older(conf):
    conf.config(hypervisor_version_weight_multiplier=-1.0,
                group='filter_scheduler')
    assert ranking(mod.HypervisorVersionWeigher(), _hosts(), request()) \
        == ['unknown', 'old', 'new']
