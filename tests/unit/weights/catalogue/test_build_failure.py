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


def test_scored_as_nova_failed_builds_times_a_negative_multiplier():
    hosts = [host('flaky', failed_builds=4), host('fine'),
             host('shaky', failed_builds=2)]
    weigher = mod.BuildFailureWeigher()
    assert weigher.weight_multiplier(None) == -1000000.0
    weighed = weights.HostWeightHandler().get_weighed_objects(
        [weigher], hosts, request(), explain=True)
    details = {w.obj.host: w.details['BuildFailureWeigher']
               for w in weighed}
    assert details['flaky'].raw == 4 and details['flaky'].normalized == 1.0
    assert details['shaky'].normalized == 0.5
    assert details['fine'].raw == 0 and details['fine'].contribution == 0


def test_healthy_hosts_score_zero_whatever_their_aggregate_multiplier():
    # The defect: with -failed_builds and a positive multiplier, healthy
    # hosts got +multiplier, so a healthy host in an aggregate with a
    # small multiplier ranked below a host with failures.
    quiet = aggregate('quiet', build_failure_weight_multiplier='1')
    hosts = [host('healthy-small', aggregates=[quiet]), host('healthy'),
             host('flaky', failed_builds=1)]
    scores = contributions(mod.BuildFailureWeigher(), hosts, request())
    assert scores['healthy-small'] == 0.0 and scores['healthy'] == 0.0
    assert scores['flaky'] == -1000000.0
    assert ranking(mod.BuildFailureWeigher(), hosts, request())[-1] == \
        'flaky'


def test_aggregate_override():
    hosts = [host('flaky', failed_builds=1, aggregates=[
        aggregate(build_failure_weight_multiplier='0')]), host('fine')]
    assert contributions(mod.BuildFailureWeigher(), hosts, request())[
        'flaky'] == 0.0
