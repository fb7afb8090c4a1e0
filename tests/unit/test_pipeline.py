"""The public pipeline: plain host lists in, decisions out, no HostManager."""

import pytest

from scheduler import objects
from scheduler import pipeline
from scheduler.filters import compute
from scheduler.filters import image_properties
from scheduler.filters import ram
from scheduler.weights import build_failure
from scheduler.weights import cross_cell
from scheduler.weights import ram as ram_weigher
from tests.unit import fixtures
from tests.unit.filters import catalogue


def _fleet():
    reports = [fixtures.report('Compute-01', memory_mb=8192),
               fixtures.report('compute-02', memory_mb=4096,
                               cell_uuid='cell2'),
               fixtures.report('compute-03', memory_mb=2048,
                               cell_uuid='cell1', failed_builds=2)]
    aggs = [catalogue.aggregate('rack', ['compute-02', 'compute-03'],
                                availability_zone='az1')]
    return pipeline.host_views(reports, aggs)


def _names(hosts):
    return [h.host for h in hosts]


def test_host_views_attach_aggregates_by_host_name():
    hosts = _fleet()
    assert [h.availability_zones for h in hosts] == [
        frozenset(), frozenset({'az1'}), frozenset({'az1'})]
    dated = pipeline.host_views([fixtures.report('h')], received_at=5.0)
    assert dated[0].received_at == 5.0


@pytest.mark.parametrize('field, names, expected', [
    ('ignore_hosts', ['COMPUTE-01'], ['compute-02', 'compute-03']),
    ('force_hosts', ['compute-01', 'Compute-03'], ['Compute-01',
                                                   'compute-03']),
])
def test_host_names_match_in_any_case_as_in_nova(field, names, expected):
    spec = fixtures.request(**{field: names})
    result = pipeline.filter_hosts(spec, _fleet(), [ram.RamFilter()])
    assert _names(result.passed) == expected
    assert result.forced == (field != 'ignore_hosts')


def test_a_requested_destination_host_matches_in_any_case_too():
    spec = fixtures.request(
        requested_destination=objects.Destination(host='COMPUTE-03'))
    result = pipeline.filter_hosts(spec, _fleet(), [ram.RamFilter()])
    assert _names(result.passed) == ['compute-03']


def test_node_names_match_exactly_as_in_nova():
    # nova's _match_forced_nodes compares node names as they are; only
    # host names are lowered.
    spec = fixtures.request(force_nodes=['COMPUTE-02'])
    result = pipeline.filter_hosts(spec, _fleet(), [ram.RamFilter()])
    assert result.passed == [] and result.forced
    spec = fixtures.request(force_nodes=['compute-02'])
    result = pipeline.filter_hosts(spec, _fleet(), [ram.RamFilter()])
    assert _names(result.passed) == ['compute-02']
    spec = fixtures.request(force_hosts=['COMPUTE-02'],
                            force_nodes=['Compute-02'])
    assert pipeline.filter_hosts(spec, _fleet(), []).passed == []


REBUILD = {'_nova_check_type': ['rebuild']}


def test_a_forced_rebuild_runs_the_rebuild_filters_as_in_nova():
    # nova skips the filters for forced hosts unless the request carries
    # _nova_check_type: its compute API sends a rebuild with a new image
    # that way, and the image filters must still check the host.
    image = {'hw_architecture': 'aarch64'}
    flts = [ram.RamFilter(), image_properties.ImagePropertiesFilter()]
    for hints, expected in (({}, ['compute-02']), (REBUILD, [])):
        spec = fixtures.request(memory_mb=100000, image_properties=image,
                                force_hosts=['compute-02'],
                                scheduler_hints=hints)
        hosts = _fleet()
        for h in hosts:
            h.supported_instances = [['x86_64', 'qemu', 'hvm']]
        result = pipeline.filter_hosts(spec, hosts, flts)
        assert _names(result.passed) == expected
        assert result.forced == (not hints)
    # On the rebuild the resource filter does not run (the instance
    # keeps its resources), the image filter does, on the forced host.
    spec = fixtures.request(memory_mb=100000, force_hosts=['compute-02'],
                            scheduler_hints=REBUILD)
    result = pipeline.filter_hosts(spec, _fleet(), flts)
    assert _names(result.passed) == ['compute-02'] and not result.forced
    assert [(s.name, s.hosts_in) for s in result.report.steps] == [
        ('ImagePropertiesFilter', 1)]


def test_forced_hosts_skip_filters_but_not_liveness():
    hosts = _fleet()
    hosts[0].forced_down = True
    spec = fixtures.request(memory_mb=100000,
                            force_hosts=['compute-01', 'compute-02'])
    result = pipeline.filter_hosts(spec, hosts, [ram.RamFilter()])
    assert _names(result.passed) == ['compute-02'] and result.forced
    assert result.report.steps == []


def test_requested_cell_restricts_unless_cross_cell_allowed():
    dest = objects.Destination(cell='cell1')
    spec = fixtures.request(requested_destination=dest)
    assert _names(pipeline.candidates(spec, _fleet())) == ['compute-03']
    dest.allow_cross_cell_move = True
    assert len(pipeline.candidates(spec, _fleet())) == 3


def test_filter_stage_reports_each_filter():
    spec = fixtures.request(memory_mb=3000)
    result = pipeline.filter_hosts(spec, _fleet(),
                                   [compute.ComputeFilter(), ram.RamFilter()],
                                   detailed=True)
    assert _names(result.passed) == ['Compute-01', 'compute-02']
    assert result.candidates == 3 and not result.forced
    assert [(s.name, s.hosts_in, s.hosts_out)
            for s in result.report.steps] == [('ComputeFilter', 3, 3),
                                              ('RamFilter', 3, 2)]
    assert 'compute-03/compute-03' in result.report.steps[1].rejected


def test_weigh_stage_gives_raw_normalised_and_contribution(conf):
    conf.config(ram_weight_multiplier=2.0, group='filter_scheduler')
    spec = fixtures.request(requested_destination=objects.Destination(
        cell='cell1', allow_cross_cell_move=True))
    weighers = [ram_weigher.RAMWeigher(), build_failure.BuildFailureWeigher(),
                cross_cell.CrossCellWeigher()]
    weighed = pipeline.weigh(spec, _fleet(), weighers)
    table = {row['host']: row for row in pipeline.ranking(weighed)}
    ram_row = table['compute-02']['weighers']['RAMWeigher']
    assert ram_row == {'raw': 4096, 'normalized': 0.5, 'multiplier': 2.0,
                       'contribution': 1.0}
    failed = table['compute-03']['weighers']['BuildFailureWeigher']
    assert failed['raw'] == 2 and failed['contribution'] == -1000000.0
    assert table['compute-03']['weighers']['CrossCellWeigher'][
        'contribution'] == 1000000.0
    for row in table.values():
        assert row['weight'] == pytest.approx(sum(
            w['contribution'] for w in row['weighers'].values()))
    assert [row['host'] for row in pipeline.ranking(weighed)] == \
        _names(w.obj for w in weighed)
