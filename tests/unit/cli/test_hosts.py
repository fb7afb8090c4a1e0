"""``scheduler-manage hosts list`` and ``hosts show``, on a real inventory."""

import datetime
import os
import subprocess
import sys

from oslo_utils import timeutils
import pytest

from scheduler.cli import hosts as hosts_cli
from scheduler.db import api as db_api
from scheduler.db import usage
from scheduler import objects
from tests.unit import cli
from tests.unit import fixtures


@pytest.fixture
def manage(monkeypatch, capsys, tmp_path):
    return cli.Manage(monkeypatch, capsys, tmp_path)


def _save(report, disabled=False, age_s=0):
    """Store ``report`` as the scheduler's flush would, ``age_s`` ago."""
    report.set_defaults()
    db_api.host_reports_save([{
        'host': report.host, 'nodename': report.nodename,
        'uuid': report.obj_get('uuid'), 'disabled': disabled,
        'updated_at': timeutils.utcnow() - datetime.timedelta(
            seconds=age_s),
        'report': report.obj_to_primitive()}])
    usage.apply_reports([usage.NodeReport(
        report.host, report.nodename, report.memory_mb_used,
        report.vcpus_used, report.local_gb_used, report.num_instances,
        timeutils.utcnow(), frozenset(report.instance_uuids))])


def _claim(uuid, host, nodename, memory_mb=1024, vcpus=2, disk_gb=10):
    usage.claim(usage.ClaimRequest(
        uuid, host, nodename, memory_mb, vcpus, disk_gb,
        project_id='demo', user_id='demo'))


@pytest.fixture
def fleet(inventory):
    """h1 with two nodes (one running an active instance, one with a
    claim in flight and an instance the inventory never placed), h2
    disabled and silent for an hour, both in aggregates."""
    _save(fixtures.report('h1', 'h1-a', memory_mb=8192, local_gb=100,
                          vcpus=8, memory_mb_used=1024, vcpus_used=2,
                          local_gb_used=10, num_instances=1,
                          instance_uuids=[fixtures.uuid(1)],
                          cpu_allocation_ratio=4.0,
                          hypervisor_type='QEMU', hypervisor_version=8002000,
                          host_ip='192.0.2.11'))
    _save(fixtures.report('h1', 'h1-b', memory_mb=4096, local_gb=50,
                          vcpus=4, num_instances=1,
                          instance_uuids=[fixtures.uuid(9)]))
    numa = objects.NUMATopology(cells=[objects.NUMACell(
        id=0, cpuset={0, 1, 2, 3}, memory=2048)])
    pci = [objects.PciDevicePool(vendor_id='8086', product_id='154d',
                                 numa_node=0, count=2)]
    _save(fixtures.report('h2', memory_mb=2048, numa_topology=numa,
                          pci_pools=pci), disabled=True, age_s=3600)
    _claim(fixtures.uuid(1), 'h1', 'h1-a')
    usage.apply_reports([usage.NodeReport(
        'h1', 'h1-a', memory_mb_used=1024, vcpus_used=2, local_gb_used=10,
        num_instances=1, updated_at=timeutils.utcnow(),
        instance_uuids=frozenset([fixtures.uuid(1)]))])
    _claim(fixtures.uuid(2), 'h1', 'h1-b', memory_mb=512, vcpus=1,
           disk_gb=5)
    az = db_api.aggregate_create('rack1', availability_zone='az1',
                                 metadata={'cpu_allocation_ratio': '16.0'})
    db_api.aggregate_host_add(az['id'], 'h1')
    other = db_api.aggregate_create('ssd')
    db_api.aggregate_host_add(other['id'], 'h1')
    db_api.aggregate_host_add(other['id'], 'h2')
    return inventory


# --- hosts list ----------------------------------------------------------

def test_list_has_one_row_per_node_with_claims_laid_over(manage, fleet):
    result = manage('hosts', 'list', '--format', 'json')
    assert result.code == 0, result.err
    rows = result.json()
    assert [(r['host'], r['nodename']) for r in rows] == [
        ('h1', 'h1-a'), ('h1', 'h1-b'), ('h2', 'h2')]
    assert all(sorted(r) == sorted(hosts_cli.COLUMNS) for r in rows)
    a, b, h2 = rows
    assert (a['state'], a['disabled'], a['free_ram_mb'], a['memory_mb'],
            a['free_disk_gb'], a['free_vcpus'], a['instances']) == (
        'up', False, 7168, 8192, 90, 6, 1)
    # The claim of instance 2 is not in h1-b's report yet: laid over it.
    assert (b['free_ram_mb'], b['free_vcpus'], b['free_disk_gb'],
            b['instances']) == (3584, 3, 45, 2)
    assert a['aggregates'] == ['rack1', 'ssd']
    assert (h2['state'], h2['disabled'], h2['aggregates']) == (
        'down', True, ['ssd'])
    assert h2['last_report_s'] >= 3599


def test_plain_hosts_is_hosts_list(manage, fleet):
    plain = manage('hosts', '--format', 'json')
    listed = manage('hosts', 'list', '--format', 'json')
    assert plain.code == listed.code == 0
    assert [r['nodename'] for r in plain.json()] == \
        [r['nodename'] for r in listed.json()]


def test_format_before_the_sub_command_is_kept(manage, fleet):
    result = manage('hosts', '--format', 'json', 'list')
    assert result.code == 0
    assert len(result.json()) == 3


def test_list_table_is_only_the_table(manage, fleet):
    result = manage('hosts')
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert lines[0].startswith('+-') and lines[-1].startswith('+-')
    assert all(line[0] in '+|' for line in lines)
    assert '| h1-b ' in result.out and '| down ' in result.out


def test_list_of_an_empty_inventory(manage, inventory):
    result = manage('hosts', 'list', '--format', 'json')
    assert (result.code, result.json()) == (0, [])


def test_an_inventory_without_schema_is_one_line(manage, conf, tmp_path):
    conf.config(connection='sqlite:///%s' % (tmp_path / 'empty.sqlite'),
                group='database')
    db_api.reset_engine()
    try:
        result = manage('hosts', 'list')
    finally:
        db_api.reset_engine()
    assert result.code == 1
    assert result.out == ''
    assert 'Traceback' not in result.err
    assert 'scheduler-manage db sync' in result.err


# --- hosts show ----------------------------------------------------------

def test_show_gives_every_node_of_the_host(manage, fleet):
    result = manage('hosts', 'show', 'h1', '--format', 'json')
    assert result.code == 0, result.err
    detail = result.json()
    assert sorted(detail) == ['aggregates', 'host', 'instances', 'nodes']
    assert detail['host'] == 'h1'
    a, b = detail['nodes']
    assert (a['nodename'], b['nodename']) == ('h1-a', 'h1-b')
    assert (a['memory_mb'], a['memory_mb_used'], a['free_ram_mb']) == (
        8192, 1024, 7168)
    assert (a['local_gb'], a['local_gb_used'], a['free_disk_gb']) == (
        100, 10, 90)
    assert (a['vcpus'], a['vcpus_used'], a['free_vcpus']) == (8, 2, 6)
    assert (a['hypervisor_type'], a['hypervisor_version'], a['host_ip']) == (
        'QEMU', 8002000, '192.0.2.11')
    assert a['availability_zones'] == ['az1']
    assert a['state'] == 'up' and a['last_report_s'] < 60
    assert datetime.datetime.fromisoformat(a['last_report']).tzinfo
    assert b['instance_uuids'] == [fixtures.uuid(2), fixtures.uuid(9)]


def test_show_gives_effective_allocation_ratios(manage, fleet):
    node = manage('hosts', 'show', 'h1', '--format', 'json').json()[
        'nodes'][0]
    assert node['allocation_ratios'] == {
        'cpu': {'effective': 16.0, 'reported': 4.0, 'overridden': True},
        'ram': {'effective': 1.0, 'reported': 1.0, 'overridden': False},
        'disk': {'effective': 1.0, 'reported': 1.0, 'overridden': False}}


def test_show_gives_aggregates_with_their_zones(manage, fleet):
    aggs = manage('hosts', 'show', 'h1', '--format', 'json').json()[
        'aggregates']
    assert [(a['name'], a['availability_zone']) for a in aggs] == [
        ('rack1', 'az1'), ('ssd', None)]
    assert aggs[0]['metadata']['cpu_allocation_ratio'] == '16.0'


def test_show_gives_instances_with_their_placements(manage, fleet):
    instances = manage('hosts', 'show', 'h1', '--format', 'json').json()[
        'instances']
    assert [(i['instance_uuid'], i['nodename'], i['status'], i['reported'])
            for i in instances] == [
        (fixtures.uuid(1), 'h1-a', 'active', True),
        (fixtures.uuid(2), 'h1-b', 'claimed', False),
        (fixtures.uuid(9), 'h1-b', None, True)]
    assert (instances[1]['memory_mb'], instances[1]['vcpus'],
            instances[1]['disk_gb']) == (512, 1, 5)
    assert datetime.datetime.fromisoformat(
        instances[1]['updated_at']).tzinfo == datetime.timezone.utc


def test_show_gives_numa_cells_and_pci_pools(manage, fleet):
    node, = manage('hosts', 'show', 'h2', '--format', 'json').json()['nodes']
    assert node['numa_cells'] == [{'id': 0, 'cpus': 4, 'cpu_usage': 0,
                                   'memory_mb': 2048, 'memory_usage_mb': 0}]
    assert node['pci_pools'] == [{'vendor_id': '8086', 'product_id': '154d',
                                  'numa_node': 0, 'count': 2, 'tags': {}}]


def test_show_table(manage, fleet):
    result = manage('hosts', 'show', 'h2')
    assert result.code == 0, result.err
    out = result.out
    assert '| disabled ' in out and '| True ' in out
    assert '| state ' in out and '| down ' in out
    assert 'cell 0: 4 cpus, 2048 MB' in out and '8086:154d x2' in out
    assert '\nAggregates:\n' in out and '| ssd ' in out
    assert out.rstrip().endswith('Instances:\n(none)')


def test_show_table_names_an_aggregate_override(manage, fleet):
    out = manage('hosts', 'show', 'h1').out
    assert '16 (aggregate; the compute reports 4)' in out
    assert fixtures.uuid(2) in out and '| claimed ' in out


def test_unknown_host(manage, fleet):
    result = manage('hosts', 'show', 'nowhere')
    assert result.code == 1
    assert result.out == ''
    assert result.err == 'HostNotFound: Host nowhere could not be found.\n'


def test_show_needs_a_host(manage, fleet):
    with pytest.raises(SystemExit) as exit_info:
        manage('hosts', 'show')
    assert exit_info.value.code == 2


# --- hosts delete ----------------------------------------------------------

def test_delete_refuses_a_host_with_placements(manage, fleet):
    result = manage('hosts', 'delete', 'h1')
    assert result.code == 1
    assert 'Host h1 has 2 placement(s)' in result.err
    assert len([r for r in db_api.host_reports_get_all()
                if r['host'] == 'h1']) == 2


def test_delete_refuses_a_host_that_still_reports(manage, inventory):
    _save(fixtures.report('fresh'))
    result = manage('hosts', 'delete', 'fresh')
    assert result.code == 1
    assert 'reported less than service_down_time ago' in result.err


def test_delete_forgets_a_silent_host(manage, fleet):
    result = manage('hosts', 'delete', 'h2')
    assert result.code == 0, result.err
    assert 'Deleted host h2: 1 node(s), 0 placement(s)' in result.out
    hosts = [r['host'] for r in db_api.host_reports_get_all()]
    assert hosts == ['h1', 'h1']
    assert 'h2' not in {r['host'] for r in usage.usage_get_all()}
    assert manage('hosts', 'delete', 'h2').code == 1    # gone


def test_forced_delete_drops_the_placements(manage, fleet):
    result = manage('hosts', 'delete', 'h1', '--node', 'h1-b', '--force')
    assert result.code == 0, result.err
    assert '1 node(s), 1 placement(s)' in result.out
    assert [p['nodename'] for p in db_api.instance_get_all()] == ['h1-a']


def test_running_schedulers_forget_a_deleted_silent_node(manage, fleet):
    from scheduler import host_manager
    manager = host_manager.HostManager()
    manager.load_from_inventory()
    manager.check_down_hosts()
    assert manage('hosts', 'delete', 'h2').code == 0
    assert manager.forget_deleted_nodes() == [('h2', 'h2')]
    assert sorted(s.host for s in manager.get_all_host_states()) == ['h1',
                                                                     'h1']


# --- a big fleet from the command line -----------------------------------

def _json(manage, *args):
    result = manage(*args, '--format', 'json')
    assert result.code == 0, result.err
    return result.json()


def test_list_filters_by_host_pattern_state_and_aggregate(manage, fleet):
    rows = _json(manage, 'hosts', 'list', '--host', 'h1*')
    assert [r['nodename'] for r in rows] == ['h1-a', 'h1-b']
    rows = _json(manage, 'hosts', 'list', '--state', 'down')
    assert [r['host'] for r in rows] == ['h2']
    rows = _json(manage, 'hosts', 'list', '--state', 'disabled')
    assert [r['host'] for r in rows] == ['h2']
    rows = _json(manage, 'hosts', 'list', '--aggregate', 'rack1')
    assert {r['host'] for r in rows} == {'h1'}


def test_list_sorts_and_limits(manage, fleet):
    rows = _json(manage, 'hosts', 'list', '--sort=-free_ram_mb')
    free = [r['free_ram_mb'] for r in rows]
    assert free == sorted(free, reverse=True) and free[0] != free[-1]
    result = manage('hosts', 'list', '--sort', 'memory_mb', '--limit', '1',
                    '--format', 'json')
    assert [r['nodename'] for r in result.json()] == ['h2']
    assert '(1 of 3 matching node(s)' in result.err


def test_list_refuses_an_unknown_sort_column(manage, fleet, capsys):
    with pytest.raises(SystemExit) as exit_info:
        manage('hosts', 'list', '--sort', 'colour')
    assert exit_info.value.code == 2
    assert "no column 'colour'" in capsys.readouterr().err


def test_list_summary_counts_states_and_resources(manage, fleet):
    rows = {r['field']: r['value']
            for r in _json(manage, 'hosts', 'list', '--summary')}
    assert rows['nodes'] == 3 and rows['hosts'] == 2
    assert rows['nodes up'] == 2 and rows['nodes down'] == 1
    assert rows['nodes disabled'] == 1
    assert rows['memory_mb'] == 8192 + 4096 + 2048


def test_delete_many_hosts_in_one_command(manage, fleet):
    _save(fixtures.report('old-1'), age_s=3600)
    _save(fixtures.report('old-2'), age_s=3600)
    result = manage('hosts', 'delete', 'old-1', 'old-2', 'h1')
    assert result.code == 1                 # h1 is refused, the rest go
    assert 'Deleted host old-1' in result.out
    assert 'Deleted host old-2' in result.out
    assert '2 host(s) deleted, 1 refused' in result.out
    assert 'Host h1 has 2 placement(s)' in result.err
    assert sorted({r['host'] for r in db_api.host_reports_get_all()}) == [
        'h1', 'h2']


def test_delete_all_down_hosts(manage, fleet):
    _save(fixtures.report('old-1'), age_s=3600)
    result = manage('hosts', 'delete', '--all-down')
    assert result.code == 0, result.err
    assert {r['host'] for r in db_api.host_reports_get_all()} == {'h1'}


def test_delete_needs_a_host_or_all_down(manage, fleet):
    assert manage('hosts', 'delete').code == 2


def test_the_services_debug_setting_adds_no_log_lines(tmp_path):
    # devstack writes debug = True for the service; an operator's table
    # must not open with the scheduler's log lines.  A process of its
    # own: logging is set up once per process.
    conf = tmp_path / 'scheduler.conf'
    conf.write_text('[DEFAULT]\ndebug = True\nstate_path = %s\n'
                    '[database]\nconnection = sqlite:///%s/inv.sqlite\n'
                    % (tmp_path, tmp_path))
    manage = os.path.join(os.path.dirname(sys.executable),
                          'scheduler-manage')
    subprocess.run([manage, '--config-file', str(conf), 'db', 'sync'],
                   check=True, capture_output=True, timeout=120)
    result = subprocess.run([manage, '--config-file', str(conf), 'hosts',
                             'list'], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ''
    assert result.stdout.startswith('+--')


def test_list_refuses_a_negative_limit(manage, fleet, capsys):
    # [:-1] would list all rows but the last and say "-1 of 3".
    with pytest.raises(SystemExit) as exit_info:
        manage('hosts', 'list', '--limit', '-1')
    assert exit_info.value.code == 2
    assert '-1: must not be negative' in capsys.readouterr().err
