"""IoOpsFilter: fewer than max_io_ops_per_host operations."""

from scheduler.filters import io_ops as mod
from tests.unit.filters.catalogue import host
from tests.unit.filters.catalogue import passing
from tests.unit.filters.catalogue import request


def test_default_limit_is_eight():
    hosts = [host('a', num_io_ops=7), host('b', num_io_ops=8)]
    flt = mod.IoOpsFilter()
    assert passing(flt, hosts, request()) == ['a']
    assert flt.rejection_reason(hosts[1], request()) == (
        '8 concurrent I/O operations >= max_io_ops_per_host 8')


def test_option(conf):
    conf.config(max_io_ops_per_host=2, group='filter_scheduler')
    hosts = [host('a', num_io_ops=1), host('b', num_io_ops=2)]
    assert passing(mod.IoOpsFilter(), hosts, request()) == ['a']


def test_placing_an_instance_counts(conf):
    conf.config(max_io_ops_per_host=1, group='filter_scheduler')
    h = host('a')
    flt = mod.IoOpsFilter()
    assert passing(flt, [h], request()) == ['a']
    h.consume_from_request(request())
    assert passing(flt, [h], request()) == []
    assert not flt.run_filter_once_per_request
