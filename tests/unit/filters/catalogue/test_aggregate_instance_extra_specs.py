"""AggregateInstanceExtraSpecsFilter, with the Trove blog's flavors."""

from scheduler.filters import aggregate_instance_extra_specs as mod
from tests.unit.filters.catalogue import aggregate
from tests.unit.filters.catalogue import host
from tests.unit.filters.catalogue import passing
from tests.unit.filters.catalogue import request


def _hosts():
    trove = aggregate('Trove', CPU='Trove')
    m4 = aggregate('M4', CPU='M4, M4-large', ssd='true', cores='16')
    return [host('trove-004', aggregates=[trove]),
            host('m4-001', aggregates=[m4]), host('loose')]


def _spec(**extra_specs):
    return request(flavor_fields={'extra_specs': extra_specs})


def test_scoped_spec_matches_aggregate_metadata():
    # The blog's t4.1CPU.512MB flavor.
    spec = _spec(**{'aggregate_instance_extra_specs:CPU': 'Trove'})
    flt = mod.AggregateInstanceExtraSpecsFilter()
    assert passing(flt, _hosts(), spec) == ['trove-004']
    reason = flt.rejection_reason(_hosts()[2], spec)
    assert 'no aggregate of the host sets CPU' in reason


def test_unscoped_keys_count_too():
    assert passing(mod.AggregateInstanceExtraSpecsFilter(), _hosts(),
                   _spec(ssd='true')) == ['m4-001']


def test_other_scopes_are_ignored():
    spec = _spec(**{'hw:cpu_policy': 'dedicated',
                    'capabilities:cpu_info:vendor': 'Intel'})
    flt = mod.AggregateInstanceExtraSpecsFilter()
    assert flt.prepare(spec) is mod.base.SKIP
    assert passing(flt, _hosts(), spec) == ['trove-004', 'm4-001', 'loose']


def test_comma_list_and_operators():
    flt = mod.AggregateInstanceExtraSpecsFilter()
    scoped = 'aggregate_instance_extra_specs:'
    assert passing(flt, _hosts(), _spec(**{scoped + 'CPU': 'M4-large'})) \
        == ['m4-001']
    assert passing(flt, _hosts(), _spec(
        **{scoped + 'CPU': '<or> Trove <or> M4'})) == ['trove-004', 'm4-001']
    assert passing(flt, _hosts(), _spec(**{scoped + 'cores': '>= 8'})) \
        == ['m4-001']
    assert passing(flt, _hosts(), _spec(**{scoped + 'cores': '>= 32'})) \
        == []


def test_every_spec_must_hold():
    spec = _spec(**{'aggregate_instance_extra_specs:CPU': 'M4',
                    'ssd': 'false'})
    flt = mod.AggregateInstanceExtraSpecsFilter()
    assert passing(flt, _hosts(), spec) == []
    assert 'ssd' in flt.rejection_reason(_hosts()[1], spec)
