"""AggregateTypeAffinityFilter: the guide's m1.nano,m1.small example."""

from scheduler.filters import aggregate_type_affinity as mod
from tests.unit.filters.catalogue import aggregate
from tests.unit.filters.catalogue import host
from tests.unit.filters.catalogue import passing
from tests.unit.filters.catalogue import request


def _hosts():
    return [host('nano', aggregates=[aggregate(instance_type='m1.nano')]),
            host('both', aggregates=[
                aggregate(instance_type='m1.nano,m1.small')]),
            host('any')]


def test_flavor_named_in_the_list():
    flt = mod.AggregateTypeAffinityFilter()
    spec = request(flavor_fields={'name': 'm1.small'})
    assert passing(flt, _hosts(), spec) == ['both', 'any']
    assert 'm1.small' in flt.rejection_reason(_hosts()[0], spec)


def test_single_name():
    spec = request(flavor_fields={'name': 'm1.nano'})
    assert passing(mod.AggregateTypeAffinityFilter(), _hosts(), spec) == [
        'nano', 'both', 'any']


def test_unlisted_flavor_only_on_unrestricted_hosts():
    spec = request(flavor_fields={'name': 'm1.large'})
    assert passing(mod.AggregateTypeAffinityFilter(), _hosts(), spec) == [
        'any']


def test_any_aggregate_naming_the_flavor_is_enough():
    h = host('h', aggregates=[aggregate(instance_type='m1.nano'),
                              aggregate(instance_type='m1.small')])
    spec = request(flavor_fields={'name': 'm1.small'})
    assert passing(mod.AggregateTypeAffinityFilter(), [h], spec) == ['h']
