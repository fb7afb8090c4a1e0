"""The benchmark plot's pure parts: the SVG and Markdown writers given
numbers, and the translation of the mixed workload's requests for nova's
side (tools/bench/bench_nova.py).  Neither nova nor a benchmark runs
here."""

import importlib.util
import os
import xml.etree.ElementTree as ElementTree

import pytest

from scheduler import objects

_BENCH = os.path.join(os.path.dirname(__file__), '..', '..', 'tools',
                      'bench')


def _load(name):
    spec = importlib.util.spec_from_file_location(
        name, os.path.join(_BENCH, name + '.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope='module')
def bench_nova():
    return _load('bench_nova')


@pytest.fixture(scope='module')
def mix():
    return _load('mixed_workload')


def _mixed_spec(mix, kind, image='ubuntu-24.04'):
    """A request of the mix of ``kind`` with an earlier placement."""
    state = mix.MixState(7)
    flavor = mix.flavors()[0]
    earlier = mix.Draw(flavor, 'project-0001', image, 'az1', 1, kind, 3,
                       0.0)
    placed = state.new_uuids(1)
    state.spec(earlier, placed)
    state.placed(earlier, placed, ['gp-az1-0001'])
    draw = mix.Draw(flavor, 'project-0001', image, 'az1', 2, kind, 3, 0.0)
    uuids = state.new_uuids(2)
    return state.spec(draw, uuids), uuids, placed[0]


def test_nova_record_carries_the_server_group(bench_nova, mix):
    spec, uuids, earlier = _mixed_spec(mix, 'group')
    record = bench_nova.spec_record(spec, uuids)
    group = record['instance_group']
    assert group['policy'] == spec.instance_group.policy
    assert group['uuid'] == spec.instance_group.uuid
    assert group['members'] == [earlier] + uuids
    assert group['hosts'] == ['gp-az1-0001']
    assert record['scheduler_hints'] is None or \
        'different_host' not in record['scheduler_hints']


def test_nova_record_carries_hints_and_no_group(bench_nova, mix):
    spec, uuids, earlier = _mixed_spec(mix, 'different_host')
    record = bench_nova.spec_record(spec, uuids)
    assert record['instance_group'] is None
    assert record['scheduler_hints'] == {'different_host': [earlier]}
    assert record['is_bfv'] is False
    assert record['image_properties'] == dict(mix.IMAGES)['ubuntu-24.04']


def test_nova_record_of_a_volume_boot_has_no_image(bench_nova, mix):
    spec, uuids, _earlier = _mixed_spec(mix, None, image='volume')
    record = bench_nova.spec_record(spec, uuids)
    assert record['is_bfv'] is True
    assert record['image_properties'] is None


def test_nova_record_of_a_plain_request(bench_nova):
    spec = objects.RequestSpec(
        flavor=objects.Flavor(memory_mb=512, vcpus=1, root_gb=1,
                              extra_specs={}),
        num_instances=1, availability_zone=None)
    record = bench_nova.spec_record(spec, ['u1'])
    assert record['instance_group'] is None
    assert record['is_bfv'] is False
    assert record['image_properties'] is None


@pytest.fixture(scope='module')
def svgplot():
    return _load('svgplot')


def _polylines(text):
    root = ElementTree.fromstring(text)
    ns = '{http://www.w3.org/2000/svg}'
    return root, [
        [tuple(float(v) for v in point.split(','))
         for point in line.get('points').split()]
        for line in root.iter(ns + 'polyline')]


def test_chart_is_svg_with_one_line_per_series(svgplot):
    text = svgplot.line_chart(
        [svgplot.Series('ours <median>', [1000, 2500, 10000], [1, 3, 9]),
         svgplot.Series('ours p95', [1000, 2500, 10000], [2, 6, 30],
                        dashed=True)],
        'title & more', ['load 3.1'], 'hosts', 'ms')
    root, lines = _polylines(text)
    assert [len(line) for line in lines] == [3, 3]
    texts = [t.text for t in root.iter('{http://www.w3.org/2000/svg}text')]
    assert 'ours <median>' in texts and 'title & more' in texts
    assert 'load 3.1' in texts
    # More hosts, further right; more milliseconds, higher (smaller y).
    xs = [x for x, _y in lines[0]]
    ys = [y for _x, y in lines[0]]
    assert xs == sorted(xs) and ys == sorted(ys, reverse=True)
    # The p95 is above its median at every size.
    assert all(p[1] < m[1] for p, m in zip(lines[1], lines[0]))


def test_chart_leaves_gaps_where_nothing_was_measured(svgplot):
    text = svgplot.line_chart(
        [svgplot.Series('ours', [1000, 100000], [1, 20]),
         svgplot.Series('nova', [1000, 100000], [40, None])],
        't', [], 'hosts', 'ms')
    _root, lines = _polylines(text)
    assert [len(line) for line in lines] == [2, 1]
    # The x axis runs from the first size measured to the last.
    assert lines[0][0][0] == svgplot.LEFT
    assert lines[0][1][0] == svgplot.WIDTH - svgplot.RIGHT


def test_chart_linear_axis_starts_at_zero(svgplot):
    text = svgplot.line_chart(
        [svgplot.Series('placements/s', [1, 4, 16], [50, 80, 90])],
        't', [], 'callers', 'per second', log_y=False)
    _root, lines = _polylines(text)
    bottom = svgplot.HEIGHT - svgplot.BOTTOM
    assert all(y < bottom for _x, y in lines[0])


def test_chart_without_numbers_is_refused(svgplot):
    with pytest.raises(ValueError):
        svgplot.line_chart([svgplot.Series('x', [1], [None])], 't', [],
                           'hosts', 'ms')


def test_markdown_table(svgplot):
    assert svgplot.markdown_table(['hosts', 'ms'], [[1000, '1.2'],
                                                    [2500, None]]) == (
        '| hosts | ms |\n| --- | ---: |\n| 1000 | 1.2 |\n| 2500 |  |\n')


def test_nova_runs_our_filters_less_those_placement_answers(bench_nova,
                                                            mix):
    names = bench_nova.nova_filters(mix.ENABLED_FILTERS)
    assert names == [
        'ComputeFilter', 'ComputeCapabilitiesFilter',
        'ImagePropertiesFilter', 'AggregateInstanceExtraSpecsFilter',
        'ServerGroupAntiAffinityFilter', 'ServerGroupAffinityFilter',
        'DifferentHostFilter', 'SameHostFilter']


@pytest.fixture(scope='module')
def plot():
    return _load('plot_latency')


_STAMP = {'date': '2026-11-28 03:00 UTC', 'machine': 'x86_64, 2 cores',
          'commit': 'abc1234', 'load_start': '3.0 2.0 1.0',
          'load_end': '4.0 3.0 2.0',
          'command': 'python tools/bench/plot_latency.py --quick'}


def _side(median, p95):
    return {'n': 10, 'median': median, 'p95': p95, 'refused': 1,
            'cpu_median': median / 2}


def test_hosts_figure_leaves_nova_out_where_it_did_not_run(plot):
    part = dict(_STAMP, seed=25, requests=10, duration_s=5.0,
                nova='34.0.0', translation=['zones: placement'], rows=[
                    {'hosts': 1000, 'ours': _side(2.0, 4.0),
                     'nova': _side(50.0, 90.0)},
                    {'hosts': 100000, 'ours': _side(20.0, 40.0),
                     'nova': None}])
    svg, md = plot.hosts_figure(part)
    _root, lines = _polylines(svg)
    assert [len(line) for line in lines] == [2, 2, 1, 1]
    assert '| 1000 | 2.00 | 4.00 | 1.00 | 10 | 50.00 | 90.00 | 25.00 | ' \
        '10 | 25x |' in md
    assert '| 100000 | 20.00 | 40.00 | 10.00 | 10 |  |  |  |  |  |' in md
    assert '- zones: placement' in md
    assert 'load average 3.0 2.0 1.0 at the start' in svg
    assert 'abc1234' in md and '--quick' in md


def test_hosts_figure_without_nova(plot):
    part = dict(_STAMP, seed=25, requests=10, duration_s=5.0,
                translation=['zones: placement'], rows=[
                    {'hosts': 1000, 'ours': _side(2.0, 4.0), 'nova': None}])
    svg, md = plot.hosts_figure(part)
    _root, lines = _polylines(svg)
    assert len(lines) == 2
    assert 'reach nova' not in md


def test_callers_figures_say_they_are_ours_only(plot):
    def row(callers, placements):
        return {'callers': callers, 'select_per_s': placements,
                'noop_before_per_s': 300.0, 'noop_after_per_s': 100.0,
                'select_ms': {'n': 5, 'median': 10.0, 'p95': 30.0},
                'noop_before_ms': {'n': 5, 'median': 2.0, 'p95': 3.0},
                'select_failed': 0}
    part = dict(_STAMP, hosts=5000, db='sqlite', layout='1x2',
                requests=100, duration_s=10.0, errors={},
                rows=[row(1, 20.0), row(4, 50.0)])
    rates, latency, md = plot.callers_figures(part)
    assert 'ours only' in rates and 'ours only' in latency
    _root, lines = _polylines(rates)
    assert [len(line) for line in lines] == [2, 2]
    # Against the mean of the no-op rates before and after.
    assert '| 4 | 50.0 | 300 / 100 | 0.25 |' in md
