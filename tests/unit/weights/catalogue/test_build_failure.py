"""BuildFailureWeigher: hosts with failures sink below everything."""

from scheduler import weights
from scheduler.weights import build_failure as mod
from scheduler.weights import ram
from tests.unit.filters.catalogue import aggregate
from tests.unit.filters.catalogue import host
from tests.unit.filters.catalogue import request
from tests.unit.weights.catalogue import contributions
from tests.unit.weights.catalogue import ranking


def test_failures_sink_hosts():
    hosts = [host('flaky', failed_builds=3), host('fine'),
             host('shaky', failed_builds=1)]
    assert ranking(mod.BuildFailureWeigher(), hosts, request()) == [
        'fine', 'shaky', 'flaky']
    weights_ = contributions(mod.BuildFailureWeigher(), hosts, request())
    assert weights_['fine'] - weights_['flaky'] == 1000000.0


def test_default_multiplier_outweighs_free_ram():
    hosts = [host('flaky', memory_mb=65536, failed_builds=1),
             host('fine', memory_mb=1024)]
    weighed = weights.HostWeightHandler().get_weighed_objects(
        [ram.RAMWeigher(), mod.BuildFailureWeigher()], hosts, request())
    assert [w.obj.host for w in weighed] == ['fine', 'flaky']


def test_multiplier_can_be_lowered(conf):
    conf.config(build_failure_weight_multiplier=0.5,
                group='filter_scheduler')
    hosts = [host('flaky', memory_mb=65536, failed_builds=1),
             host('fine', memory_mb=1024)]
    weighed = weights.HostWeightHandler().get_weighed_objects(
        [ram.RAMWeigher(), mod.BuildFailureWeigher()], hosts, request())
    assert [w.obj.host for w in weighed] == ['flaky', 'fine']


def test_aggregate_override():
    hosts = [host('flaky', failed_builds=1, aggregates=[
        aggregate(build_failure_weight_multiplier='0')]), host('fine')]
    assert contributions(mod.BuildFailureWeigher(), hosts, request())[
        'flaky'] == 0.0
