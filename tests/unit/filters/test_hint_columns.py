"""DifferentHostFilter and SameHostFilter over columns: the hint's
instances are looked up in the column store's instance index, not in
every candidate's list, and the answer is the same as host by host."""

import pytest

from scheduler import columns
from scheduler.filters import different_host
from scheduler.filters import same_host
from scheduler import plugin_testing
from tests.unit import fixtures

UUID1 = 'a0cf03a5-d921-4877-bb5c-86d26cf818e1'
UUID2 = '8c19174f-4220-44f0-824a-cd1eeef10287'
FILTERS = [different_host.DifferentHostFilter, same_host.SameHostFilter]


def _hosts():
    return fixtures.hosts(
        fixtures.report('h1', instance_uuids=[UUID1]),
        fixtures.report('h2', instance_uuids=[UUID2, 'other']),
        fixtures.report('h3', instance_uuids=['other']),
        fixtures.report('h4'))


@pytest.mark.parametrize('cls', FILTERS)
@pytest.mark.parametrize('hint', [[UUID1], [UUID1, UUID2], [UUID2],
                                  ['gone'], [UUID2, 'gone']])
def test_columns_agree_with_host_by_host(cls, hint):
    spec = fixtures.request(scheduler_hints={cls.__module__.rsplit(
        '.', 1)[1]: hint})
    flt = cls()
    plugin_testing.check_filter(flt, _hosts(), spec)
    # The check above is vacuous without a vector form.
    assert columns.vector_form(flt, 'filter_columns',
                               columns.FILTER_METHODS) is not None
