"""RetryFilter: nodes already tried are not tried again."""

from scheduler.filters import retry as mod
from scheduler import objects
from tests.unit.filters.catalogue import host
from tests.unit.filters.catalogue import passing
from tests.unit.filters.catalogue import request


def _spec(hosts):
    return request(retry=objects.SchedulerRetry(num_attempts=2,
                                                hosts=hosts))


def test_tried_nodes_are_dropped():
    hosts = [host('h1'), host('h2', 'n1'), host('h2', 'n2')]
    spec = _spec([['h1', 'h1'], ['h2', 'n1']])
    flt = mod.RetryFilter()
    assert [(h.host, h.nodename) for h in flt.filter_all(hosts, spec)] == [
        ('h2', 'n2')]
    assert 'attempt 2' in flt.rejection_reason(hosts[0], spec)


def test_host_only_entry_drops_all_its_nodes():
    hosts = [host('h1', 'n1'), host('h1', 'n2'), host('h3')]
    assert passing(mod.RetryFilter(), hosts, _spec([['h1']])) == ['h3']


def test_first_attempt_skips():
    flt = mod.RetryFilter()
    assert flt.prepare(request()) is mod.base.SKIP
    assert flt.prepare(_spec([])) is mod.base.SKIP
