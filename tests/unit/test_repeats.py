"""A request decided from the last one of the same shape decides as one
decided from scratch.

The property test runs a random fleet through a random story: requests
drawn from a few shapes (so that shapes repeat), each one placed and
kept, and between them reports that change a host's usage or state, a
clock that makes hosts stale, aggregates whose multiplier overrides
come and go, claims given back and new nodes.  Before each request the
per-host path decides it on the same state (then gives its claims
back); the columnar path, with the decisions it kept, must give the
same filter walk and the same placements, alternates and weights.
"""

from hypothesis import HealthCheck
from hypothesis import Phase
from hypothesis import event
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import numpy as np
import pytest

from scheduler import columns
from scheduler.drivers import filter_scheduler
from scheduler import exception
from scheduler import filters
from scheduler import metrics
from scheduler import objects
from scheduler import repeats
from scheduler.resources import liveness
from tests.unit import fixtures
from tests.unit import test_columns as equivalence
from tests.unit import test_metrics

NOW = equivalence.NOW


@pytest.fixture(autouse=True)
def _clock():
    liveness.set_clock(lambda: NOW)
    yield
    liveness.set_clock(None)


class _Counted:
    """Counts how a ``Repeats`` answered: from a kept decision or not."""

    def __init__(self, monkeypatch):
        self.again = self.afresh = 0
        again, afresh = repeats.Repeat._again, repeats.Repeat._afresh

        def counted_again(repeat, *args):
            ranked = again(repeat, *args)
            self.again += ranked is not None
            return ranked

        def counted_afresh(repeat, *args):
            self.afresh += 1
            return afresh(repeat, *args)

        monkeypatch.setattr(repeats.Repeat, '_again', counted_again)
        monkeypatch.setattr(repeats.Repeat, '_afresh', counted_afresh)


def _changed_report(base, draw):
    """``base`` with new usage or state, as its next report says."""
    report = base.obj_clone()
    report.memory_mb_used = draw(st.sampled_from([0, 512, 1024, 3072]))
    report.vcpus_used = draw(st.integers(0, 4))
    report.num_io_ops = draw(st.integers(0, 3))
    report.failed_builds = draw(st.sampled_from([0, 0, 1]))
    report.disabled = draw(st.integers(0, 5)) == 0
    return report


@settings(max_examples=100, deadline=None, derandomize=True,
          phases=[Phase.explicit, Phase.reuse, Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(fleet=equivalence.fleets(), data=st.data())
@pytest.mark.parametrize('stack_max', [columns._STACK_MAX, 0],
                         ids=['stacked', 'weigher_by_weigher'])
def test_kept_decisions_decide_as_decisions_from_scratch(
        conf, monkeypatch, stack_max, fleet, data):
    monkeypatch.setattr(columns, '_STACK_MAX', stack_max)
    counted = _Counted(monkeypatch)
    reports, ages, aggregates = fleet
    equivalence._configure(conf, data.draw)
    manager = equivalence._manager(reports, ages, aggregates)
    driver = filter_scheduler.FilterScheduler(manager)
    hosts = sorted({r.host for r in reports})
    shapes = data.draw(st.lists(equivalence.requests(hosts), min_size=1,
                                max_size=2))
    for spec in shapes:
        # Ignored hosts are decided from scratch: mostly left out.
        if data.draw(st.integers(0, 3)):
            spec.ignore_hosts = []
    clock = [NOW]
    uuid = [0]
    placed = []
    for _step in range(data.draw(st.integers(4, 16))):
        action = data.draw(st.sampled_from(
            ['request'] * 6
            + ['report', 'clock', 'clock', 'aggregate', 'release', 'node']))
        if action == 'report':
            i = data.draw(st.integers(0, len(reports) - 1))
            reports[i] = _changed_report(reports[i], data.draw)
            manager.update_from_report(reports[i])
        elif action == 'clock':
            clock[0] += data.draw(st.sampled_from([10, 45, 1000]))
            liveness.set_clock(lambda: clock[0])
        elif action == 'aggregate':
            key = data.draw(st.sampled_from(equivalence.MULTIPLIER_KEYS))
            metadata = {key: data.draw(st.sampled_from(['3.0', '-2.0']))} \
                if data.draw(st.booleans()) else {}
            manager.update_aggregates([objects.Aggregate(
                name='story', hosts=data.draw(st.lists(
                    st.sampled_from(hosts), unique=True)),
                metadata=metadata)])
        elif action == 'release' and placed:
            manager.usage_db.release(placed.pop(0))
            manager.refresh_nodes(
                [s.key() for s in manager.get_all_host_states()])
        elif action == 'node':
            reports.append(fixtures.report(
                'new%d' % len(reports), memory_mb=8192, vcpus=16,
                local_gb=80))
            manager.update_from_report(reports[-1])
        else:
            spec = data.draw(st.sampled_from(shapes))
            uuids = [fixtures.uuid(uuid[0] + n + 1)
                     for n in range(spec.num_instances)]
            uuid[0] += spec.num_instances
            seed = data.draw(st.integers(0, 1000))
            per_host = equivalence._select(driver, spec, uuids, False, conf,
                                           seed)
            kept = equivalence._select(driver, spec, uuids, True, conf, seed,
                                       keep=True)
            assert kept == per_host
            if kept[0] != 'NoValidHost':
                placed.append(uuids)
    event('decided from a kept decision: %s' % min(counted.again, 3))


def _bench_like(conf, count=40):
    """A fleet of ``count`` roomy nodes in two zones."""
    conf.config(columnar=True, group='filter_scheduler')
    reports = [fixtures.report('h%d' % i, memory_mb=65536 + 1024 * (i % 4),
                               vcpus=64, local_gb=1000)
               for i in range(count)]
    zones = [fixtures.aggregate('az%d' % z, ['h%d' % i for i in range(count)
                                             if i % 2 == z - 1],
                                zone='az%d' % z) for z in (1, 2)]
    manager = fixtures.manager_with(reports, zones)
    return manager, filter_scheduler.FilterScheduler(manager), reports


def _spec(zone='az1', instances=1):
    return fixtures.request(memory_mb=2048, vcpus=2, root_gb=20,
                            num_instances=instances, availability_zone=zone,
                            project_id='p', user_id='u')


def _select(driver, spec, first_uuid):
    uuids = [fixtures.uuid(first_uuid + n)
             for n in range(spec.num_instances)]
    return driver.select_destinations(None, spec, uuids,
                                      return_alternates=True)


class _Asked(filters.BaseHostFilter):
    """Passes every host, and counts the hosts it was asked about."""

    row_local = True
    asked = 0

    def host_passes(self, host_state, spec_obj):
        type(self).asked += 1
        return True

    def filter_columns(self, columns, spec_obj):
        type(self).asked += len(columns)
        return np.ones(len(columns), bool)


def test_a_repeated_request_asks_the_filters_about_the_changed_hosts_only(
        conf, monkeypatch):
    manager, driver, _reports = _bench_like(conf)
    driver.enabled_filters = driver.enabled_filters + [_Asked()]
    counted = _Counted(monkeypatch)
    _select(driver, _spec(), 1)
    _select(driver, _spec(), 2)
    # The second request of the shape is kept: each asked about the
    # zone's 20 hosts.
    assert (counted.afresh, counted.again) == (1, 0)
    assert _Asked.asked == 40
    _Asked.asked = 0
    _select(driver, _spec(), 3)
    # The last claim changed one host: asked about it alone.
    assert (counted.afresh, counted.again) == (1, 1)
    assert _Asked.asked == 1


def test_kept_decisions_are_counted_for_operators(conf):
    manager, driver, _reports = _bench_like(conf)
    before = metrics.render()
    for n in range(4):
        _select(driver, _spec(), n + 1)
    after = metrics.render()

    def count(text, outcome):
        return test_metrics.parse(text).get(
            ('scheduler_kept_decisions_total', (('outcome', outcome),)), 0)

    assert [count(after, o) - count(before, o)
            for o in ('recorded', 'used', 'missed')] == [1, 2, 0]


def test_a_shape_seen_once_is_not_kept(conf, monkeypatch):
    manager, driver, _reports = _bench_like(conf)
    counted = _Counted(monkeypatch)
    for n in range(3):
        _select(driver, _spec(instances=n + 1), 10 * n + 1)
    assert (counted.afresh, counted.again) == (0, 0)
    assert len(driver._repeats) == 0


def test_the_walk_of_a_repeated_request_counts_every_host(conf):
    manager, driver, _reports = _bench_like(conf)
    walks = []
    for n in range(3):
        report = filters.FilterReport()
        driver.select_destinations(None, _spec(), [fixtures.uuid(n + 1)],
                                   report=report)
        walks.append(equivalence._walk(report))
    assert walks[0][1] == ('AvailabilityZoneFilter', 40, 20)
    assert walks[2] == walks[1] == walks[0]


def test_shapes_are_kept_apart_and_a_reload_forgets_them(conf, monkeypatch):
    manager, driver, _reports = _bench_like(conf)
    counted = _Counted(monkeypatch)
    for n, zone in enumerate(['az1', 'az2'] * 3):
        _select(driver, _spec(zone), n + 1)
    assert (counted.afresh, counted.again) == (2, 2)
    assert len(driver._repeats) == 2
    driver.reset()
    assert len(driver._repeats) == 0
    for n in range(2):
        _select(driver, _spec('az1'), 10 + n)
    assert (counted.afresh, counted.again) == (3, 2)


def test_keep_decisions_off_keeps_nothing(conf, monkeypatch):
    manager, driver, _reports = _bench_like(conf)
    counted = _Counted(monkeypatch)
    for n in range(2):
        _select(driver, _spec(), n + 1)
    assert len(driver._repeats) == 1
    conf.config(keep_decisions=False, group='filter_scheduler')
    for n in range(2):
        _select(driver, _spec(), n + 3)
    assert (counted.afresh, counted.again) == (1, 0)
    assert len(driver._repeats) == 0


def test_a_host_gone_stale_is_dropped_from_a_kept_decision(conf):
    manager, driver, reports = _bench_like(conf, count=4)
    liveness.set_clock(lambda: NOW - 40)
    manager.update_from_report(reports[0])     # h0 reported 40 s ago
    liveness.set_clock(lambda: NOW)
    for n in range(1, 3):
        manager.update_from_report(reports[n])
    for n in range(2):
        kept = _select(driver, _spec('az1'), n + 1)
    assert {s.service_host for s in kept[0]} == {'h0', 'h2'}
    # 70 s since h0's report: past [scheduler] service_down_time (60 s).
    liveness.set_clock(lambda: NOW + 30)
    again = _select(driver, _spec('az1'), 3)
    assert {s.service_host for s in again[0]} == {'h2'}


def test_a_new_multiplier_override_on_a_changed_host_decides_afresh(
        conf, monkeypatch):
    manager, driver, _reports = _bench_like(conf, count=4)
    counted = _Counted(monkeypatch)
    for n in range(2):
        placed = _select(driver, _spec('az1'), n + 1)[0][0]
    manager.update_aggregates([objects.Aggregate(
        name='heavy', hosts=[placed.service_host],
        metadata={'ram_weight_multiplier': '-50'})])
    again = _select(driver, _spec('az1'), 3)[0][0]
    assert (counted.afresh, counted.again) == (1, 0)
    # RAM now repels from the overridden host: the other one is chosen.
    assert again.service_host != placed.service_host


def test_a_shape_whose_kept_decisions_miss_is_recorded_less_often(
        conf, monkeypatch):
    manager, driver, reports = _bench_like(conf, count=200)
    counted = _Counted(monkeypatch)
    recorded = []
    for n in range(9):
        if n >= 2:
            # More hosts report between two requests than a kept
            # decision looks at again (the larger of 64 and 1/64th).
            for report in reports[:70]:
                report.num_io_ops = n
                manager.update_from_report(report)
        afresh = counted.afresh
        _select(driver, _spec(), n + 1)
        recorded.append(counted.afresh - afresh)
    assert counted.again == 0
    # Recorded, missed (not recorded), 2 skipped, recorded, missed,
    # 4 skipped.
    assert recorded == [0, 1, 0, 0, 0, 1, 0, 0, 0]


def test_several_instances_keep_the_decision_for_the_next_request(
        conf, monkeypatch):
    manager, driver, _reports = _bench_like(conf)
    counted = _Counted(monkeypatch)
    for n in range(3):
        _select(driver, _spec(instances=3), 3 * n + 1)
    assert (counted.afresh, counted.again) == (1, 1)


def test_planned_claims_that_did_not_land_are_looked_at_again(
        conf, monkeypatch):
    """A request's later instances plan claims in its own snapshot only;
    when the claims then fail (another worker took the room), the kept
    decision must not keep those planned hosts as they were planned."""
    manager, driver, _reports = _bench_like(conf, count=8)
    for n in range(2):
        _select(driver, _spec(instances=3), 3 * n + 1)
    real = manager.claim_many
    conflicts = []

    def conflict_once(planned):
        if not conflicts:
            conflicts.append(planned)
            raise exception.ClaimConflict(host=planned[0].request.host,
                                          nodename=planned[0].request.nodename)
        return real(planned)

    monkeypatch.setattr(manager, 'claim_many', conflict_once)
    spec, uuids = _spec(instances=3), [fixtures.uuid(n) for n in (7, 8, 9)]
    kept = driver.select_destinations(None, spec.obj_clone(), uuids,
                                      return_alternates=True)
    assert conflicts
    manager.usage_db.release(uuids)
    manager.refresh_nodes(sorted({(s.service_host, s.nodename)
                                  for alts in kept for s in alts}))
    conf.config(keep_decisions=False, group='filter_scheduler')
    conflicts.clear()
    scratch = driver.select_destinations(None, spec.obj_clone(), uuids,
                                         return_alternates=True)
    assert [[(s.service_host, s.weight) for s in alts] for alts in kept] \
        == [[(s.service_host, s.weight) for s in alts] for alts in scratch]


def test_a_fingerprint_is_the_request_but_its_instance_uuid():
    spec = _spec()
    same = _spec()
    same.instance_uuid = fixtures.uuid(5)
    same.image = None
    assert repeats.fingerprint(same) == repeats.fingerprint(spec)
    others = [_spec('az2'), _spec(instances=2),
              fixtures.request(memory_mb=2048, vcpus=2, root_gb=20,
                               availability_zone='az1', project_id='q',
                               user_id='u'),
              fixtures.request(memory_mb=2048, vcpus=2, root_gb=20,
                               availability_zone='az1', project_id='p',
                               user_id='u', extra_specs={'a': '1'}),
              fixtures.request(memory_mb=2048, vcpus=2, root_gb=20,
                               availability_zone='az1', project_id='p',
                               user_id='u', image_properties={})]
    prints = {repeats.fingerprint(other) for other in others}
    assert len(prints) == len(others)
    assert repeats.fingerprint(spec) not in prints
