"""IoOpsWeigher: light hosts first by default."""

from scheduler.weights import io_ops as mod
from tests.unit.filters.catalogue import aggregate
from tests.unit.filters.catalogue import host
from tests.unit.filters.catalogue import request
from tests.unit.weights.catalogue import contributions
from tests.unit.weights.catalogue import ranking


def _hosts(**kwargs):
    return [host('busy', num_io_ops=6, **kwargs), host('idle'),
            host('some', num_io_ops=2)]


def test_default_prefers_light_workload():
    assert ranking(mod.IoOpsWeigher(), _hosts(), request()) == [
        'idle', 'some', 'busy']
    assert contributions(mod.IoOpsWeigher(), _hosts(), request())[
        'busy'] == -1.0


def test_positive_multiplier_prefers_heavy_workload(conf):
    conf.config(io_ops_weight_multiplier=2.0, group='filter_scheduler')
    assert ranking(mod.IoOpsWeigher(), _hosts(), request()) == [
        'busy', 'some', 'idle']


def test_aggregate_override():
    agg = aggregate(io_ops_weight_multiplier='3.0')
    hosts = [host('busy', num_io_ops=6, aggregates=[agg]), host('idle')]
    assert contributions(mod.IoOpsWeigher(), hosts, request()) == {
        'busy': 3.0, 'idle': 0.0}
