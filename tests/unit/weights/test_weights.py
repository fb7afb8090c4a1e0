"""Weighers rank the hosts that passed the filters.

weight = sum over weighers of multiplier x normalize(raw weights), the
heaviest host first.  A negative multiplier turns spreading into
stacking.
"""

import pytest

from scheduler import weights
from scheduler.weights import base
from scheduler.weights import cpu
from scheduler.weights import disk
from scheduler.weights import io_ops
from scheduler.weights import ram
from tests.unit import fixtures


def test_normalize_scales_to_zero_one():
    assert base.normalize([]) == []
    assert base.normalize([1, 2, 3]) == [0.0, 0.5, 1.0]
    assert base.normalize([10, 10]) == [0.0, 0.0]
    assert base.normalize([-5, 5]) == [0.0, 1.0]


def test_clamp_holds_values_within_the_bounds():
    assert base.clamp([-5, 3, 12], minval=0) == [0, 3, 12]
    assert base.clamp([-5, 3, 12], maxval=10) == [-5, 3, 10]
    assert base.clamp([-5, 3], None, None) == [-5, 3]


def test_nova_resource_weighers_clamp_at_zero():
    # nova sets minval = 0 on the RAM, CPU, Disk and IoOps weighers.
    for weigher in (ram.RAMWeigher, cpu.CPUWeigher, disk.DiskWeigher,
                    io_ops.IoOpsWeigher):
        assert weigher.minval == 0 and weigher.maxval is None


def test_an_overcommitted_host_does_not_stretch_the_scale(conf):
    # Free RAM -60 GB on one host: nova clamps it to 0 and normalises
    # the others over [0, max], so their scores do not depend on it.
    conf.config(ram_weight_multiplier=1.0, group='filter_scheduler')
    hosts = fixtures.hosts(
        fixtures.report('over', memory_mb=4096, memory_mb_used=65536,
                        ram_allocation_ratio=16.0),
        fixtures.report('half', memory_mb=8192, memory_mb_used=4096),
        fixtures.report('free', memory_mb=8192))
    assert dict(_rank([ram.RAMWeigher()], hosts)) == {
        'free': 1.0, 'half': 0.5, 'over': 0.0}


def test_per_aggregate_multipliers_cannot_invert_after_clamping(conf):
    # With the observed minimum (-60 GB) as the bottom of the scale, the
    # two healthy hosts both scored near 1 and a small aggregate
    # multiplier on the better one ranked it below the worse one; over
    # [0, max] the better host still wins.
    conf.config(ram_weight_multiplier=1.0, group='filter_scheduler')
    aggs = [fixtures.aggregate('small', ['free'],
                               {'ram_weight_multiplier': '0.8'})]
    hosts = fixtures.hosts(
        fixtures.report('over', memory_mb=4096, memory_mb_used=65536),
        fixtures.report('half', memory_mb=8192, memory_mb_used=4096),
        fixtures.report('free', memory_mb=8192), aggregates=aggs)
    assert [h for h, _ in _rank([ram.RAMWeigher()], hosts)] == [
        'free', 'half', 'over']


def test_a_single_host_is_not_weighed():
    # nova returns a lone candidate with weight 0.
    hosts = fixtures.hosts(fixtures.report('only'))
    assert _rank([ram.RAMWeigher()], hosts) == [('only', 0.0)]


def test_normalize_with_fixed_bounds():
    assert base.normalize([5], minval=0, maxval=10) == [0.5]
    assert base.normalize([2, 4], minval=0) == [0.5, 1.0]


def _hosts():
    # free RAM: 1 GB, 4 GB, 8 GB; free vCPUs: 16, 4, 8; free disk: 50, 20, 90
    return fixtures.hosts(
        fixtures.report('small', memory_mb=1024, vcpus=16, local_gb=50),
        fixtures.report('mid', memory_mb=4096, vcpus=4, local_gb=20),
        fixtures.report('big', memory_mb=8192, vcpus=8, local_gb=90))


def _rank(weighers, hosts=None):
    weighed = base.HostWeightHandler().get_weighed_objects(
        weighers, hosts if hosts is not None else _hosts(),
        fixtures.request())
    return [(w.obj.host, round(w.weight, 4)) for w in weighed]


def test_ram_weigher_spreads_to_the_most_free_ram(conf):
    conf.config(ram_weight_multiplier=1.0, group='filter_scheduler')
    # nova's RAMWeigher normalises over [0, max free RAM].
    assert _rank([ram.RAMWeigher()]) == [
        ('big', 1.0), ('mid', 0.5), ('small', 0.125)]


def test_negative_ram_multiplier_stacks(conf):
    conf.config(ram_weight_multiplier=-1.0, group='filter_scheduler')
    assert [h for h, _ in _rank([ram.RAMWeigher()])] == \
        ['small', 'mid', 'big']


def test_zero_multiplier_disables_a_weigher(conf):
    conf.config(ram_weight_multiplier=0.0, group='filter_scheduler')
    assert {w for _h, w in _rank([ram.RAMWeigher()])} == {0.0}


def test_cpu_weigher_counts_the_allocation_ratio(conf):
    conf.config(cpu_weight_multiplier=1.0, group='filter_scheduler')
    hosts = fixtures.hosts(
        fixtures.report('dense', vcpus=4, cpu_allocation_ratio=16.0),
        fixtures.report('strict', vcpus=32, cpu_allocation_ratio=1.0))
    assert [h for h, _ in _rank([cpu.CPUWeigher()], hosts)] == \
        ['dense', 'strict']


def test_cpu_and_disk_weighers(conf):
    assert _rank([cpu.CPUWeigher()])[0][0] == 'small'
    assert _rank([disk.DiskWeigher()])[0][0] == 'big'
    conf.config(disk_weight_multiplier=-1.0, group='filter_scheduler')
    assert _rank([disk.DiskWeigher()])[0][0] == 'mid'


def test_weights_add_up_with_their_multipliers(conf):
    conf.config(ram_weight_multiplier=1.0, cpu_weight_multiplier=2.0,
                disk_weight_multiplier=0.5, group='filter_scheduler')
    weighers = [ram.RAMWeigher(), cpu.CPUWeigher(), disk.DiskWeigher()]
    weighed = base.HostWeightHandler().get_weighed_objects(
        weighers, _hosts(), fixtures.request(), explain=True)
    by_host = {w.obj.host: w for w in weighed}
    small = by_host['small']
    # Over [0, max]: small has RAM 1/8, most vCPUs (1 x 2.0), disk
    # 50/90 (x 0.5).
    assert small.contributions == pytest.approx(
        {'RAMWeigher': 0.125, 'CPUWeigher': 2.0, 'DiskWeigher': 0.5 * 50 / 90})
    for w in weighed:
        assert w.weight == pytest.approx(sum(w.contributions.values()))
        for name, score in w.details.items():
            assert score.contribution == pytest.approx(
                w.contributions[name])
    assert small.details['RAMWeigher'].raw == 1024
    assert small.details['RAMWeigher'].normalized == 0.125
    assert small.details['CPUWeigher'].multiplier == 2.0
    assert [w.obj.host for w in weighed] == ['big', 'small', 'mid']
    # The request path keeps only the totals, and they are the same.
    fast = base.HostWeightHandler().get_weighed_objects(
        weighers, _hosts(), fixtures.request())
    assert [(w.obj.host, pytest.approx(w.weight)) for w in fast] == [
        (w.obj.host, w.weight) for w in weighed]
    assert all(w.contributions == {} for w in fast)


def test_an_explain_details_only_the_hosts_it_shows(conf):
    conf.config(cpu_weight_multiplier=2.0, group='filter_scheduler')
    weighers = [ram.RAMWeigher(), cpu.CPUWeigher(), disk.DiskWeigher()]
    handler = base.HostWeightHandler()
    every = handler.get_weighed_objects(weighers, _hosts(),
                                        fixtures.request(), explain=True)
    top = handler.get_weighed_objects(weighers, _hosts(), fixtures.request(),
                                      explain=True, detailed=2)
    assert [(w.obj.host, w.weight) for w in top] == [
        (w.obj.host, w.weight) for w in every]
    assert [w.details for w in top[:2]] == [w.details for w in every[:2]]
    assert [w.contributions for w in top[:2]] == [
        w.contributions for w in every[:2]]
    assert top[2].details == {} and every[2].details != {}


def test_per_aggregate_multiplier_overrides_the_option(conf):
    # Admin guide: an aggregate's ram_weight_multiplier wins for its
    # hosts; with several the smallest is used.
    conf.config(ram_weight_multiplier=1.0, group='filter_scheduler')
    aggs = [fixtures.aggregate('stack', ['big'],
                               {'ram_weight_multiplier': '-1.0'}),
            fixtures.aggregate('other', ['big'],
                               {'ram_weight_multiplier': '5.0'})]
    hosts = fixtures.hosts(
        fixtures.report('small', memory_mb=1024),
        fixtures.report('mid', memory_mb=4096),
        fixtures.report('big', memory_mb=8192), aggregates=aggs)
    ranked = dict(_rank([ram.RAMWeigher()], hosts))
    assert ranked['big'] == -1.0
    assert ranked['mid'] > 0


class FreeIoWeigher(base.BaseHostWeigher):
    """A custom weigher over the whole list: fewer io ops is better."""

    def weigh_objects(self, weighed_hosts, spec_obj):
        return [-w.obj.num_io_ops for w in weighed_hosts]


def test_a_custom_weigher_with_a_fixed_multiplier():
    hosts = fixtures.hosts(fixtures.report('busy', num_io_ops=9),
                           fixtures.report('idle', num_io_ops=0))
    assert _rank([FreeIoWeigher()], hosts) == [('idle', 1.0), ('busy', 0.0)]


def test_no_hosts_no_weights():
    assert base.HostWeightHandler().get_weighed_objects(
        [ram.RAMWeigher()], [], fixtures.request()) == []


def test_all_weighers_lists_the_in_tree_ones():
    names = {cls.__name__ for cls in weights.all_weighers()}
    assert {'RAMWeigher', 'CPUWeigher', 'DiskWeigher'} <= names


def test_disk_weigher_uses_disk_available_least(conf):
    # nova: free disk is the smaller of the totals and the hypervisor's.
    hosts = fixtures.hosts(
        fixtures.report('thin', local_gb=100, disk_available_least=10),
        fixtures.report('fat', local_gb=50))
    assert _rank([disk.DiskWeigher()], hosts)[0][0] == 'fat'
