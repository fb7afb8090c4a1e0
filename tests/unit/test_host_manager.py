"""HostManager: reports, claims, hosts going down, and the inventory.

A compute's report replaces what the scheduler knew of its node; the
instances placed there that the report does not show yet (claims, by
this worker or any other) are counted again until the compute reports
them, or until they expire.  Claims are in the inventory as soon as
they are made; reports are written by ``flush()``; a new HostManager
reads both back after a restart.
"""

import datetime
import logging
import threading
import time

from oslo_db import exception as db_exc
from oslo_utils import timeutils
import pytest
import sqlalchemy as sa

from scheduler.db import engine
from scheduler.db import models
from scheduler.db import usage
from scheduler.drivers import filter_scheduler
from scheduler import exception
from scheduler import host_manager
from scheduler import host_view
from scheduler import metrics
from scheduler import objects
from scheduler import report_backlog
from scheduler import report_writer
from scheduler.resources import liveness
from tests.unit import fixtures
from tests.unit import test_metrics


def _claim(manager, host, memory_mb=1024, vcpus=1, root_gb=10, uuid=1):
    state = manager.get_host_state(host)
    return manager.claim(state, fixtures.request(memory_mb=memory_mb,
                                                 vcpus=vcpus,
                                                 root_gb=root_gb),
                         fixtures.uuid(uuid))


# --- reports -----------------------------------------------------------------

def test_a_new_report_replaces_the_old_state():
    manager = fixtures.manager_with([fixtures.report('h1', memory_mb=4096)])
    manager.update_from_report(fixtures.report('h1', memory_mb=8192,
                                               memory_mb_used=1024))
    states = manager.get_all_host_states()
    assert len(states) == 1
    assert (states[0].memory_mb, states[0].free_ram_mb) == (8192, 7168)


def _numa_pci_report(host, **fields):
    return fixtures.report(
        host, numa_topology=objects.NUMATopology(cells=[objects.NUMACell(
            id=0, cpuset={0, 1, 2, 3}, memory=2048)]),
        pci_pools=[objects.PciDevicePool(vendor_id='8086',
                                         product_id='154d', numa_node=0,
                                         count=2)], **fields)


def test_a_quiet_nodes_report_only_says_it_is_alive():
    clock = [1000.0]
    liveness.set_clock(lambda: clock[0])
    try:
        manager = fixtures.manager_with([_numa_pci_report('h1')])
        manager.flush()
        before = manager.get_host_state('h1')
        saved = manager.db.host_reports_get_all()[0]['updated_at']
        clock[0] += 30
        # The same report again (a newer time of its own): nothing new.
        manager.update_from_report(_numa_pci_report('h1'))
        after = manager.get_host_state('h1')
        assert after is not before and before.received_at == 1000.0
        assert after.received_at == 1030.0
        assert after.reported_view().received_at == 1030.0
        assert (after.free_ram_mb, after.numa_topology.cells[0].id) == (
            before.free_ram_mb, 0)
        assert manager._backlog.touched == {('h1', 'h1')}
        assert not manager._backlog.dirty
        manager.flush()
        assert manager.db.host_reports_get_all()[0]['updated_at'] > saved
        # A report that says something new is taken whole.
        manager.update_from_report(_numa_pci_report('h1',
                                                    memory_mb_used=512))
        assert ('h1', 'h1') in manager._backlog.dirty
        manager.flush()
        assert manager.get_host_state('h1').free_ram_mb == 4096 - 512
    finally:
        liveness.set_clock(None)


def test_a_view_tells_a_report_that_says_something_new():
    view = host_view.HostView(_numa_pci_report('h1'))
    assert view.says_the_same(_numa_pci_report('h1'))
    assert not view.says_the_same(_numa_pci_report('h1', num_io_ops=1))
    assert not view.says_the_same(fixtures.report('h1'))
    other_numa = _numa_pci_report('h1')
    other_numa.numa_topology.cells[0].memory = 4096
    assert not view.says_the_same(other_numa)
    other_pci = _numa_pci_report('h1')
    other_pci.pci_pools[0].count = 1
    assert not view.says_the_same(other_pci)


def test_nodes_of_one_host_are_kept_apart():
    manager = fixtures.manager_with([fixtures.report('h1', 'node-a'),
                                     fixtures.report('h1', 'node-b')])
    assert sorted(s.nodename for s in manager.get_all_host_states()) == \
        ['node-a', 'node-b']
    assert manager.get_host_state('h1', 'node-b').nodename == 'node-b'
    assert manager.host_names() == ['h1']


def test_unknown_host_raises_host_not_found():
    with pytest.raises(exception.HostNotFound):
        fixtures.manager_with().get_host_state('nowhere')


def test_aggregates_are_attached_to_their_hosts():
    aggs = [fixtures.aggregate('Trove', ['h1']),
            fixtures.aggregate('az', ['h1', 'h2'], zone='az1')]
    manager = fixtures.manager_with(
        [fixtures.report('h1'), fixtures.report('h2')], aggs)
    h1 = manager.get_host_state('h1')
    h2 = manager.get_host_state('h2')
    assert sorted(a.name for a in h1.aggregates) == ['Trove', 'az']
    assert [a.name for a in h2.aggregates] == ['az']
    assert h2.availability_zones == {'az1'}
    assert [a.name for a in manager.aggregates()] == ['Trove', 'az']


def _aggregate(*args, **kwargs):
    """An aggregate object, as an operator's update casts it."""
    return objects.Aggregate(**fixtures.aggregate(*args, **kwargs))


def test_an_aggregate_change_touches_only_the_hosts_it_concerns():
    aggs = [fixtures.aggregate('az', ['h1', 'h2'], zone='az1'),
            fixtures.aggregate('fast', ['h3'])]
    manager = fixtures.manager_with(
        [fixtures.report('h1'), fixtures.report('h2'),
         fixtures.report('h3')], aggs)
    before = {s.host: s for s in manager.get_all_host_states()}
    manager.update_aggregates([_aggregate(
        'fast', ['h2', 'h3'], metadata={'cpu_allocation_ratio': '2.0'})])
    after = {s.host: s for s in manager.get_all_host_states()}
    # h1 is in neither the old nor the new "fast": its view is untouched.
    assert after['h1'] is before['h1']
    # The others got new views; the old ones were not changed in place.
    assert after['h2'] is not before['h2']
    assert [a.name for a in before['h2'].aggregates] == ['az']
    assert [a.name for a in after['h2'].aggregates] == ['az', 'fast']
    assert after['h3'].allocation_ratio('cpu') == 2.0
    assert before['h3'].allocation_ratio('cpu') != 2.0
    # Re-reading the same aggregates from the inventory changes nothing.
    manager._aggregates.stamp = None
    manager.refresh_aggregates()
    assert {s.host: s for s in manager.get_all_host_states()} == after


def test_a_new_view_of_a_node_shares_what_its_aggregates_derive():
    manager = fixtures.manager_with(
        [fixtures.report('h1', ram_allocation_ratio=1.5)],
        [fixtures.aggregate('az', ['h1'], zone='az1',
                            metadata={'cpu_allocation_ratio': '4.0'})])
    before = manager.get_host_state('h1')
    manager.claim(before, fixtures.request(), fixtures.uuid(1))
    claimed = manager.get_host_state('h1')
    assert claimed is not before and claimed.num_instances == 1
    assert claimed.shares_aggregates(before)
    # A report with another ratio of its own gets its own ratios.
    manager.update_from_report(fixtures.report('h1',
                                               ram_allocation_ratio=3.0))
    reported = manager.get_host_state('h1')
    assert reported.allocation_ratio('ram') == 3.0
    assert reported.allocation_ratio('cpu') == 4.0
    assert claimed.allocation_ratio('ram') == 1.5
    assert reported.availability_zones == {'az1'}


def test_host_leaving_every_aggregate_loses_its_zone():
    manager = fixtures.manager_with(
        [fixtures.report('h1'), fixtures.report('h2')],
        [fixtures.aggregate('az', ['h1', 'h2'], zone='az1')])
    manager.update_aggregates([_aggregate('az', ['h2'], zone='az1')])
    assert manager.get_host_state('h1').aggregates == []
    assert manager.get_host_state('h1').availability_zones == frozenset()
    assert manager.get_host_state('h2').availability_zones == {'az1'}


# --- claims ------------------------------------------------------------------

def _placement(manager, n=1):
    return manager.placements([fixtures.uuid(n)]).get(fixtures.uuid(n))


def test_claim_consumes_resources_at_once_and_is_in_the_inventory():
    manager = fixtures.manager_with([fixtures.report('h1', memory_mb=4096)])
    _claim(manager, 'h1', memory_mb=1024, vcpus=2, root_gb=10)
    state = manager.get_host_state('h1')
    assert (state.free_ram_mb, state.vcpus_used, state.local_gb_used) == \
        (3072, 2, 10)
    assert state.instance_uuids == [fixtures.uuid(1)]
    # Written before claim() returned: no flush needed.
    placed = _placement(manager)
    assert (placed['host'], placed['status'], placed['pending']) == \
        ('h1', 'claimed', True)


def test_claim_is_applied_again_on_a_report_that_lacks_the_instance():
    # The compute sent this report before it heard of the instance.
    manager = fixtures.manager_with([fixtures.report('h1', memory_mb=4096)])
    _claim(manager, 'h1', memory_mb=1024)
    manager.update_from_report(fixtures.report('h1', memory_mb=4096))
    manager.flush()
    state = manager.get_host_state('h1')
    assert state.free_ram_mb == 3072
    assert fixtures.uuid(1) in state.instance_uuids


def test_a_report_that_lists_the_instance_settles_the_claim():
    manager = fixtures.manager_with([fixtures.report('h1', memory_mb=4096)])
    _claim(manager, 'h1', memory_mb=1024)
    manager.update_from_report(fixtures.report(
        'h1', memory_mb=4096, memory_mb_used=1024, num_instances=1,
        instance_uuids=[fixtures.uuid(1)]))
    manager.flush()
    # Counted once, by the compute.
    assert manager.get_host_state('h1').free_ram_mb == 3072
    placed = _placement(manager)
    assert (placed['status'], placed['pending']) == ('active', False)
    assert manager.pending_claims(('h1', 'h1')) == []
    # The next report without it (the instance was deleted, and its
    # delete_instance_info never came): counted as pending again, as
    # long as a report that lists it may still come...
    manager.update_from_report(fixtures.report('h1', memory_mb=4096))
    manager.flush()
    assert manager.get_host_state('h1').free_ram_mb == 3072
    placed = _placement(manager)
    assert (placed['status'], placed['pending']) == ('unlisted', True)
    # ...and freed by the one after it.
    manager.update_from_report(fixtures.report('h1', memory_mb=4096,
                                               vcpus_used=0))
    manager.flush()
    assert manager.get_host_state('h1').free_ram_mb == 4096
    assert manager.placements([fixtures.uuid(1)]) == {}


def _plan(manager, host, uuid, view=None, **request):
    state = view if view is not None else \
        manager.current(manager.get_host_state(host))
    return manager.plan_claim(state, fixtures.request(**request),
                              fixtures.uuid(uuid))


def _as_composed(manager, host):
    """Node ``host``'s view, checked slot by slot against the one
    ``_compose`` builds from the report, usage row and claims now."""
    view = manager.get_host_state(host)
    composed = manager._views.composed((host, host))
    for name in host_view._SLOTS:
        assert host_view._equal(getattr(view, name),
                                getattr(composed, name)), name
    return view


def test_a_claims_planned_view_stands_only_where_composing_gives_it():
    pci_pools = [objects.PciDevicePool(vendor_id='8086', product_id='1520',
                                       count=2)]
    manager = fixtures.manager_with([
        fixtures.report('h1', memory_mb=8192, instance_uuids=[
            fixtures.uuid(90)]),
        fixtures.report('h2', memory_mb=8192),
        fixtures.report('h3', memory_mb=8192,
                        instance_uuids=[fixtures.uuid(31)]),
        fixtures.report('h4', memory_mb=8192, pci_pools=pci_pools)])
    manager.flush()  # the nodes' usage rows, as after their first reports
    _claim(manager, 'h1', uuid=50)  # a pending claim to carry along
    assert manager._usage_cache.rows[('h1', 'h1')]['generation'] > 0

    # Two instances on h1, one on h2: their plans are the new views.
    first = _plan(manager, 'h1', 1, memory_mb=1024)
    second = _plan(manager, 'h1', 2, view=first.view, memory_mb=2048)
    third = _plan(manager, 'h2', 3, memory_mb=512)
    manager.claim_many([first, second, third])
    assert _as_composed(manager, 'h1') is second.view
    assert _as_composed(manager, 'h2') is third.view
    assert manager.get_host_state('h1').free_ram_mb == 8192 - 1024 * 4

    # A report between the plan and the claim: composed again.
    planned = _plan(manager, 'h2', 4, memory_mb=512)
    manager.update_from_report(fixtures.report('h2', memory_mb=16384))
    manager.claim_many([planned])
    assert _as_composed(manager, 'h2') is not planned.view
    assert manager.get_host_state('h2').memory_mb == 16384

    # Another worker claimed on h2 meanwhile: composed from the row.
    other = host_manager.HostManager(inventory=manager.db)
    other.update_from_report(fixtures.report('h2', memory_mb=16384))
    planned = _plan(manager, 'h2', 5, memory_mb=512)
    other.claim(other.get_host_state('h2'), fixtures.request(memory_mb=256),
                fixtures.uuid(6))
    manager.claim_many([planned])
    assert _as_composed(manager, 'h2') is not planned.view

    # An instance the compute already lists, a PCI device: composed.
    planned = _plan(manager, 'h3', 31, memory_mb=512)
    manager.claim_many([planned])
    assert _as_composed(manager, 'h3') is not planned.view
    planned = _plan(manager, 'h4', 7, pci_requests=[
        objects.InstancePCIRequest(
            count=1, spec=[{'vendor_id': '8086', 'product_id': '1520'}])])
    manager.claim_many([planned])
    assert _as_composed(manager, 'h4') is not planned.view


def test_a_claim_beyond_the_limit_conflicts_and_refreshes_the_node():
    manager = fixtures.manager_with([fixtures.report('h1', memory_mb=4096)])
    other = host_manager.HostManager(inventory=manager.db)
    other.update_from_report(fixtures.report('h1', memory_mb=4096))
    # Another worker takes 3 GB; this one still sees 4 GB free.
    other.claim(other.get_host_state('h1'), fixtures.request(memory_mb=3072),
                fixtures.uuid(1), limits={'memory_mb': 4096})
    assert manager.get_host_state('h1').free_ram_mb == 4096
    with pytest.raises(exception.ClaimConflict):
        manager.claim(manager.get_host_state('h1'),
                      fixtures.request(memory_mb=2048), fixtures.uuid(2),
                      limits={'memory_mb': 4096})
    # The lost race refreshed the node: the other worker's claim shows.
    state = manager.get_host_state('h1')
    assert state.free_ram_mb == 1024
    assert fixtures.uuid(1) in state.instance_uuids
    assert _placement(manager, 2) is None


class _RecordingStore:
    """The SQLite usage store, recording where each refresh starts;
    ``native`` makes it say its sequence is native (numbers may become
    visible out of order)."""

    def __init__(self, native: bool):
        self.native = native
        self.asked: list = []

    def __getattr__(self, name):
        return getattr(usage, name)

    def commits_in_seq_order(self) -> bool:
        return not self.native and usage.commits_in_seq_order()

    def changed_since(self, seq: int, gaps=()) -> list:
        self.asked.append((seq, list(gaps)))
        return usage.changed_since(seq, gaps)


@pytest.mark.parametrize('native', [True, False])
def test_only_a_native_sequence_reads_again_the_numbers_it_skipped(native):
    store = _RecordingStore(native)
    first = fixtures.manager_with([fixtures.report('h1'),
                                   fixtures.report('h2')])
    manager = host_manager.HostManager(inventory=first.db,
                                       usage_store=store)
    manager.refresh_usage()
    high = manager._usage_cache.high_water
    assert store.asked[-1] == (0, [])
    # h1 written twice: its first number is gone by the next read, as
    # one taken by a transaction not committed yet would be.
    _claim(first, 'h1', uuid=1)
    _claim(first, 'h1', uuid=2)
    manager.refresh_usage()
    assert store.asked[-1] == (high, [])
    seqs = {r['seq'] for r in usage.usage_get_all()}
    new_high = max(seqs)
    skipped = sorted(set(range(high + 1, new_high)) - seqs)
    assert skipped
    manager.refresh_usage()
    assert store.asked[-1] == (new_high, skipped if native else [])


def test_a_node_read_by_key_hides_no_other_nodes_change():
    # Reading one node's row (a claim's conflict, a flush's own nodes)
    # must not move the mark past others' rows not read yet.
    a = fixtures.manager_with([fixtures.report('h1', memory_mb=4096),
                               fixtures.report('h2', memory_mb=4096)])
    b = host_manager.HostManager(inventory=a.db)
    for host in ('h1', 'h2'):
        b.update_from_report(fixtures.report(host, memory_mb=4096))
    a.refresh_usage()
    b.refresh_usage()
    _claim(b, 'h2', uuid=1)
    _claim(b, 'h1', uuid=2)
    a.refresh_nodes([('h1', 'h1')])
    a.refresh_usage()
    assert a.get_host_state('h1').free_ram_mb == 3072
    assert a.get_host_state('h2').free_ram_mb == 3072


def test_every_worker_sees_the_others_claims_before_choosing():
    manager = fixtures.manager_with([fixtures.report('h1', memory_mb=4096)])
    other = host_manager.HostManager(inventory=manager.db)
    other.update_from_report(fixtures.report('h1', memory_mb=4096))
    other.claim(other.get_host_state('h1'), fixtures.request(memory_mb=1024),
                fixtures.uuid(1))
    assert manager.refresh_usage() == 1
    assert manager.get_host_state('h1').free_ram_mb == 3072
    # Nothing changed since: nothing to refresh.
    assert manager.refresh_usage() == 0


def test_a_freshness_read_says_what_usage_it_took(caplog):
    # The usage a refused request was placed against, in the log.
    caplog.set_level(logging.DEBUG, logger='scheduler.host_manager')
    manager = fixtures.manager_with([fixtures.report('h1', memory_mb=4096)])
    other = host_manager.HostManager(inventory=manager.db)
    other.update_from_report(fixtures.report('h1', memory_mb=4096))
    other.claim(other.get_host_state('h1'), fixtures.request(memory_mb=1024),
                fixtures.uuid(1))
    caplog.clear()
    manager.refresh_usage()
    seq = other.usage_db.usage_get_all()[0]['seq']
    assert [r.getMessage() for r in caplog.records
            if r.getMessage().startswith('Usage read')] == [
        'Usage read of 1 node(s): h1/h1 seq %d: 0+1024 MB' % seq]
    caplog.clear()
    manager.refresh_usage()
    assert not [r for r in caplog.records
                if r.getMessage().startswith('Usage read')]


def test_a_claim_without_limits_is_not_checked():
    # The chance and IP schedulers do not filter on resources.
    manager = fixtures.manager_with([fixtures.report('h1', memory_mb=1024)])
    _claim(manager, 'h1', memory_mb=4096)
    assert manager.get_host_state('h1').free_ram_mb == -3072


def test_a_pending_instance_is_not_placed_twice():
    manager = fixtures.manager_with([fixtures.report('h1'),
                                     fixtures.report('h2')])
    _claim(manager, 'h1')
    with pytest.raises(exception.InstanceAlreadyPlaced):
        manager.claim(manager.get_host_state('h2'), fixtures.request(),
                      fixtures.uuid(1))
    # Unless the caller replaces it (a reschedule): h1 gets it back.
    manager.claim(manager.get_host_state('h2'), fixtures.request(),
                  fixtures.uuid(1), replace=True)
    assert _placement(manager)['host'] == 'h2'
    manager.refresh_usage()
    assert manager.get_host_state('h1').free_ram_mb == 4096
    assert manager.get_host_state('h2').free_ram_mb == 3584


def test_claim_expires_when_the_compute_never_reports_it(conf, caplog):
    conf.config(service_down_time=60, group='scheduler')
    manager = fixtures.manager_with([fixtures.report('h1', memory_mb=4096)])
    claim = _claim(manager, 'h1', memory_mb=1024)
    with engine.transaction() as session:
        session.execute(sa.update(models.Instance).values(
            updated_at=timeutils.utcnow() - datetime.timedelta(seconds=61)))
    manager.refresh_nodes([('h1', 'h1')])
    # The compute keeps reporting, without the instance.
    manager.update_from_report(fixtures.report('h1', memory_mb=4096))
    expired = manager.expire_claims()
    assert [p['instance_uuid'] for p in expired] == [claim.instance_uuid]
    assert manager.get_host_state('h1').free_ram_mb == 4096
    assert _placement(manager) is None
    [line] = [r for r in caplog.records
              if 'Claim of instance %s on h1 expired' % fixtures.uuid(1)
              in r.getMessage()]
    # A lost build: an ERROR naming it (issue 29), as for a build no
    # compute took.
    assert line.levelname == 'ERROR'
    # Exactly one worker expires it: the next try finds nothing.
    assert manager.expire_claims() == []


def test_a_young_claim_does_not_expire(conf):
    conf.config(service_down_time=60, group='scheduler')
    manager = fixtures.manager_with([fixtures.report('h1', memory_mb=4096)])
    _claim(manager, 'h1', memory_mb=1024)
    manager.update_from_report(fixtures.report('h1', memory_mb=4096))
    assert manager.expire_claims() == []
    assert manager.get_host_state('h1').free_ram_mb == 3072


def test_release_gives_the_resources_back():
    manager = fixtures.manager_with([fixtures.report('h1', memory_mb=4096)])
    claim = _claim(manager, 'h1', memory_mb=1024)
    manager.release(claim)
    state = manager.get_host_state('h1')
    assert state.free_ram_mb == 4096
    assert state.instance_uuids == []
    assert _placement(manager) is None
    # A report without the instance does not bring the claim back.
    manager.update_from_report(fixtures.report('h1', memory_mb=4096))
    manager.flush()
    assert manager.get_host_state('h1').free_ram_mb == 4096


def test_instance_info_confirms_the_build_but_usage_waits_for_a_report():
    manager = fixtures.manager_with([fixtures.report('h1', memory_mb=4096)])
    _claim(manager, 'h1', memory_mb=1024)
    manager.update_instance_info('h1', [fixtures.uuid(1)])
    placed = _placement(manager)
    assert (placed['status'], placed['pending']) == ('active', True)
    # Until a report includes its usage, the instance is still counted.
    assert manager.get_host_state('h1').free_ram_mb == 3072
    manager.update_from_report(fixtures.report(
        'h1', memory_mb=4096, memory_mb_used=1024,
        instance_uuids=[fixtures.uuid(1)]))
    manager.flush()
    assert _placement(manager)['pending'] is False
    assert manager.get_host_state('h1').free_ram_mb == 3072


def test_several_hosts_builds_are_confirmed_in_one_write(monkeypatch):
    """``update_instances_info``: the news of several computes (a replay
    after an outage) as each would be alone, in one write."""
    manager = fixtures.manager_with([fixtures.report('h1', memory_mb=4096),
                                     fixtures.report('h2', memory_mb=4096)])
    _claim(manager, 'h1', memory_mb=1024, uuid=1)
    _claim(manager, 'h2', memory_mb=2048, uuid=2)
    writes = []
    confirm_many = manager.usage_db.confirm_many

    def counted(builds):
        writes.append(list(builds))
        return confirm_many(builds)
    monkeypatch.setattr(manager.usage_db, 'confirm_many', counted)
    # h1 lists another host's instance too: only its own is confirmed.
    manager.update_instances_info([('h1', [fixtures.uuid(1),
                                           fixtures.uuid(2)]),
                                   ('h2', [fixtures.uuid(2)])])
    assert len(writes) == 1
    for n, host in ((1, 'h1'), (2, 'h2')):
        placed = _placement(manager, n)
        assert (placed['host'], placed['status'], placed['pending']) == \
            (host, 'active', True)
    assert manager.get_host_state('h2').free_ram_mb == 2048


def test_a_build_confirmed_reads_nothing_back(monkeypatch):
    # One build per placement: reading the node's row and claims back
    # after each confirmation cost two round trips per placement.
    manager = fixtures.manager_with([fixtures.report('h1', memory_mb=4096)])
    _claim(manager, 'h1', memory_mb=1024)
    _claim(manager, 'h1', memory_mb=512, uuid=2)
    store = manager.usage_db
    reads = []
    for name in ('usage_get_all', 'usage_get_nodes', 'pending_claims',
                 'changed_since'):
        real = getattr(store, name)
        monkeypatch.setattr(
            store, name,
            lambda *a, _real=real, _name=name, **kw: (
                reads.append(_name), _real(*a, **kw))[1])
    manager.update_instance_info('h1', [fixtures.uuid(1)])
    assert reads == []
    # The worker's own view of the claims follows the inventory's.
    key = manager.get_host_state('h1').key()
    statuses = {c.instance_uuid: c.status
                for c in manager.pending_claims(key)}
    assert statuses == {fixtures.uuid(1): 'active',
                        fixtures.uuid(2): 'claimed'}
    assert _placement(manager)['status'] == 'active'
    assert manager.get_host_state('h1').free_ram_mb == 2560


def test_builds_confirmed_during_a_write_are_written_together(monkeypatch):
    # Every build's confirmation took a pooled connection of its own, in
    # front of the requests' claims: those that arrive while one is
    # written now go to the inventory together, each call returning
    # once its own is written.
    manager = fixtures.manager_with([fixtures.report('h1', memory_mb=8192),
                                     fixtures.report('h2', memory_mb=8192)])
    for n, host in ((1, 'h1'), (2, 'h1'), (3, 'h2'), (4, 'h2')):
        _claim(manager, host, memory_mb=512, uuid=n)
    store = manager.usage_db
    real = store.confirm_many
    batches, writing, release = [], threading.Event(), threading.Event()

    def confirm_many(builds):
        batches.append(sorted((h, tuple(u)) for h, u in builds))
        if len(batches) == 1:
            writing.set()
            assert release.wait(10)
        return real(builds)
    monkeypatch.setattr(store, 'confirm_many', confirm_many)
    calls = [('h1', [fixtures.uuid(1)]), ('h1', [fixtures.uuid(2)]),
             ('h2', [fixtures.uuid(3), fixtures.uuid(4)])]
    first = threading.Thread(target=manager.update_instance_info,
                             args=calls[0])
    first.start()
    assert writing.wait(10)
    others = [threading.Thread(target=manager.update_instance_info,
                               args=call) for call in calls[1:]]
    for t in others:
        t.start()
    for _ in range(1000):       # until both wait (not a timing check)
        if manager._confirms.waiting() == 2:
            break
        time.sleep(0.01)
    release.set()
    for t in [first] + others:
        t.join(10)
    assert batches == [
        [('h1', (fixtures.uuid(1),))],
        [('h1', (fixtures.uuid(2),)),
         ('h2', (fixtures.uuid(3), fixtures.uuid(4)))]]
    for host in ('h1', 'h2'):
        key = manager.get_host_state(host).key()
        assert {c.status for c in manager.pending_claims(key)} == {'active'}


class _CountedWaits:
    """An event that counts those waiting on it."""

    def __init__(self, event):
        self._event = event
        self.waiting = 0

    def wait(self, timeout=None):
        self.waiting += 1
        return self._event.wait(timeout)


def test_requests_arriving_during_a_freshness_read_share_it(monkeypatch):
    # A worker serving many requests sent one freshness read per
    # request; those that arrive while one is under way share the next
    # one (begun after they came, so a report stored just before them
    # is seen).
    manager = fixtures.manager_with([fixtures.report('h1', memory_mb=4096)])
    store = manager.usage_db
    real = store.changed_since
    reads = []
    reading, finish = threading.Event(), threading.Event()

    def changed_since(seq, gaps=()):
        reads.append(seq)
        if len(reads) == 1:
            reading.set()
            finish.wait(30)
        return real(seq, gaps)

    monkeypatch.setattr(store, 'changed_since', changed_since)
    first = threading.Thread(target=manager.refresh_usage)
    first.start()
    assert reading.wait(30)
    under_way = manager._fresh.under_way = _CountedWaits(
        manager._fresh.under_way)
    later = [threading.Thread(target=manager.refresh_usage)
             for _ in range(3)]
    for thread in later:
        thread.start()
    deadline = time.monotonic() + 30
    while under_way.waiting < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    finish.set()
    for thread in [first] + later:
        thread.join(30)
    assert len(reads) == 2
    # A request arriving after the reads ended reads again.
    manager.refresh_usage()
    assert len(reads) == 3


def test_deleted_instance_frees_its_claim():
    manager = fixtures.manager_with([fixtures.report('h1', memory_mb=4096)])
    _claim(manager, 'h1', memory_mb=1024)
    manager.delete_instance_info('h1', fixtures.uuid(1))
    assert manager.get_host_state('h1').free_ram_mb == 4096
    assert _placement(manager) is None


#: A write that fails as it is and may succeed later, logged with its
#: traceback (as an outage is not): a deadlock that outlived the
#: write's own retries.  An error blaming a row is that row's (see
#: ``report_isolation``), an outage is told once.
_AGAIN = db_exc.DBDeadlock


class _FlakyInventory:
    """The real inventory, but its first report save fails (``_AGAIN``)."""

    def __init__(self, real):
        self.real = real
        self.fail = True
        self.saved = []

    def __getattr__(self, name):
        return getattr(self.real, name)

    def host_reports_save_with_usage(self, reports, usage_reports):
        if self.fail:
            self.fail = False
            raise _AGAIN()
        self.saved.extend(r['host'] for r in reports)
        return self.real.host_reports_save_with_usage(reports,
                                                      usage_reports)


def test_a_failed_flush_is_retried_by_the_next_one(caplog):
    manager = host_manager.HostManager(
        inventory=_FlakyInventory(fixtures.memory_inventory()))
    manager.update_from_report(fixtures.report('h1'))
    manager.flush()
    assert manager.db.saved == []
    assert 'Could not write to the inventory' in caplog.text
    manager.flush()
    assert manager.db.saved == ['h1']
    assert [r['host'] for r in manager.db.host_reports_get_all()] == ['h1']


class _BatchCountingInventory(_FlakyInventory):
    """Fails the ``fail_at``-th write of reports, once (``_AGAIN``);
    records each."""

    def __init__(self, real, fail_at):
        super().__init__(real)
        self.calls = 0
        self.fail_at = fail_at
        self.batches = []

    def host_reports_save_with_usage(self, reports, usage_reports):
        self.calls += 1
        if self.calls == self.fail_at:
            raise _AGAIN()
        self.batches.append([r['host'] for r in reports])
        assert [r.host for r in usage_reports] == self.batches[-1]
        return self.real.host_reports_save_with_usage(reports,
                                                      usage_reports)


def test_a_backlog_of_reports_is_written_a_batch_at_a_time(
        monkeypatch, caplog):
    """A fleet's first reports are written FLUSH_BATCH nodes a
    transaction; a batch that fails is written by the next flush with
    those after it, and those before it are not written twice."""
    monkeypatch.setattr(report_backlog, 'FLUSH_BATCH', 2)
    manager = host_manager.HostManager(inventory=_BatchCountingInventory(
        fixtures.memory_inventory(), fail_at=2))
    sent = {name: fixtures.report(name, memory_mb=1024 * (1 + i))
            for i, name in enumerate(['h1', 'h2', 'h3', 'h4', 'h5'])}
    for report in sent.values():
        manager.update_from_report(report)
    manager.flush()
    assert 'Could not write to the inventory' in caplog.text
    assert manager.db.batches == [['h1', 'h2']]
    manager.flush()
    assert manager.db.batches == [['h1', 'h2'], ['h3', 'h4'], ['h5']]
    manager.flush()
    assert len(manager.db.batches) == 3
    saved = {row['host']: objects.HostState.obj_from_primitive(row['report'])
             for row in manager.db.host_reports_get_all()}
    assert sorted(saved) == sorted(sent)
    for name, report in sent.items():
        assert host_view.HostView(report).says_the_same(saved[name])


class _ReadCountingInventory:
    """The real inventory, counting the usage rows each report write
    reads back."""

    def __init__(self, real):
        self.real = real
        self.rows_read = 0

    def __getattr__(self, name):
        return getattr(self.real, name)

    def host_reports_save_with_usage(self, reports, usage_reports):
        written = self.real.host_reports_save_with_usage(reports,
                                                         usage_reports)
        self.rows_read += len(written.applied.rows)
        return written


def test_a_batch_of_new_nodes_reads_back_its_own_usage_rows(monkeypatch):
    """Each batch of a flush reads the usage rows of its nodes, not
    every node's: at 100,000 nodes, a fleet's first flush read every
    row once a batch.  It reads them in its write's transaction: the
    store is not asked again."""
    monkeypatch.setattr(report_backlog, 'FLUSH_BATCH', 60)
    inventory = _ReadCountingInventory(fixtures.memory_inventory())
    manager = host_manager.HostManager(inventory=inventory)
    for i in range(300):
        manager.update_from_report(fixtures.report('h%03d' % i))
    manager.flush()
    assert len(manager.get_all_host_states()) == 300
    for i in range(300, 360):
        manager.update_from_report(fixtures.report('h%03d' % i))
    inventory.rows_read = 0
    manager.flush()
    assert inventory.rows_read == 60
    assert manager.get_host_state('h359').free_ram_mb == 4096


def _write_transactions(engine_: sa.Engine, work) -> list:
    """The first words of the writing statements of each transaction
    committed while ``work()`` runs."""
    done, current = [], []

    def statement(conn, cursor, stmt, params, context, many):
        current.append(' '.join(stmt.split()[:3]))

    def commit(conn):
        if any(s.split()[0] in ('INSERT', 'UPDATE', 'DELETE')
               for s in current):
            done.append(list(current))
        current.clear()

    sa.event.listen(engine_, 'before_cursor_execute', statement)
    sa.event.listen(engine_, 'commit', commit)
    try:
        work()
    finally:
        sa.event.remove(engine_, 'before_cursor_execute', statement)
        sa.event.remove(engine_, 'commit', commit)
    return done


def test_a_flush_writes_reports_and_their_usage_in_one_transaction():
    """The backlog's reports, the usage they carry and its read-back
    are one transaction a batch (``host_reports_save_with_usage``, as
    the intake's): no worker sees a node's report without its usage."""
    manager = fixtures.manager_with([fixtures.report('h%d' % i)
                                     for i in range(3)])
    written = _write_transactions(engine.get_engine(), manager.flush)
    assert len(written) == 1, written
    tables = ' '.join(s for s in written[0])
    assert 'INSERT INTO node_usage' in tables
    assert 'INSERT INTO hosts' in tables
    assert manager.get_host_state('h2').free_ram_mb == 4096
    assert {row['host'] for row in usage.usage_get_all()} == \
        {'h0', 'h1', 'h2'}


def test_a_view_gives_back_the_report_it_was_made_from():
    sent = _numa_pci_report('h1', memory_mb_used=512)
    sent.set_defaults()
    view = host_view.HostView(sent)
    rebuilt = view.report
    assert view.says_the_same(rebuilt)
    # NUMA cells are kept with their usage defaults set.
    data = [dict(obj.obj_to_primitive()['versioned_object.data'],
                 numa_topology=None) for obj in (rebuilt, sent)]
    assert data[0] == data[1]
    rebuilt.memory_mb_used = 1024
    assert sent.memory_mb_used == 512


# --- one view a node ---------------------------------------------------------

def _views_of(manager, host):
    """(the view filters see, the report view) of node ``host``."""
    key = (host, host)
    return manager._views.get(key), manager._reports.get(key)


def test_a_node_without_claims_keeps_one_view_not_two():
    """The report view is the view filters see until a claim is laid
    over it, and again once the compute reported the instance: at
    100,000 nodes a second view each cost memory for nothing."""
    manager = fixtures.manager_with(
        [_numa_pci_report('h1', memory_mb=4096)],
        [fixtures.aggregate('az', ['h1'], zone='az1')])
    state, report = _views_of(manager, 'h1')
    assert state is report
    assert state.availability_zones == {'az1'}
    manager.flush()
    assert _views_of(manager, 'h1')[0] is report, 'its usage row agrees'
    _claim(manager, 'h1', memory_mb=1024)
    state, report = _views_of(manager, 'h1')
    assert state is not report and state.free_ram_mb == 3072
    # The overlay's report is the compute's, without the claim.
    assert state.reported_view() is report
    assert state.report.instance_uuids == []
    assert report.free_ram_mb == 4096
    assert state.numa_topology is not report.numa_topology
    assert state.availability_zones == {'az1'}
    manager.update_from_report(_numa_pci_report(
        'h1', memory_mb=4096, memory_mb_used=1024, num_instances=1,
        instance_uuids=[fixtures.uuid(1)]))
    manager.flush()
    state, report = _views_of(manager, 'h1')
    assert state is report and state.free_ram_mb == 3072
    assert state.availability_zones == {'az1'}


def test_a_claim_planned_on_a_report_view_keeps_the_report_apart():
    manager = fixtures.manager_with([fixtures.report('h1', memory_mb=4096)])
    manager.flush()   # a usage row: the plan's view is then published
    state, report = _views_of(manager, 'h1')
    assert state is report
    plan = _plan(manager, 'h1', 1, memory_mb=1024)
    assert plan.view.reported_view() is report
    assert plan.view.report.memory_mb_used == 0
    manager.claim_many([plan])
    state, report = _views_of(manager, 'h1')
    assert state is plan.view and state.reported_view() is report
    assert report.memory_mb_used == 0 and state.memory_mb_used == 1024


def test_a_quiet_report_and_an_aggregate_change_replace_the_one_view():
    manager = fixtures.manager_with([_numa_pci_report('h1')])
    manager.flush()
    before, _ = _views_of(manager, 'h1')
    manager.update_from_report(_numa_pci_report('h1'))
    alive, report = _views_of(manager, 'h1')
    assert alive is report and alive is not before
    # Nothing changes NUMA cells once a request may see them: shared.
    assert alive.numa_topology is before.numa_topology
    manager.update_aggregates([_aggregate('az', ['h1'], zone='az1')])
    moved, report = _views_of(manager, 'h1')
    assert moved is report and moved is not alive
    assert moved.availability_zones == {'az1'}
    assert alive.availability_zones == frozenset(), 'not changed in place'
    # With a claim laid over it, both views move to the new aggregates.
    _claim(manager, 'h1')
    manager.update_aggregates([_aggregate('az', ['h1'], zone='az2')])
    state, report = _views_of(manager, 'h1')
    assert state is not report and state.reported_view() is report
    assert state.availability_zones == report.availability_zones == {'az2'}
    assert state.num_instances == report.num_instances + 1


def _numa_report(host, cpu_usage=0):
    return fixtures.report(host, numa_topology=objects.NUMATopology(cells=[
        objects.NUMACell(id=cell, cpuset=set(range(4 * cell, 4 * cell + 4)),
                         memory=2048, cpu_usage=cpu_usage)
        for cell in (0, 1)]))


def test_nodes_reporting_the_same_numa_topology_share_it():
    """A topology object of two cells took as much memory as the rest of
    its node: nodes of one hardware model keep one between them, and a
    claim's NUMA usage never reaches the others."""
    manager = fixtures.manager_with([_numa_report('h1'), _numa_report('h2'),
                                     _numa_report('h3', cpu_usage=2)])
    h1, h2, h3 = (manager.get_host_state(h) for h in ('h1', 'h2', 'h3'))
    assert h1.numa_topology is h2.numa_topology
    assert h3.numa_topology is not h1.numa_topology
    assert h3.numa_topology.cells[0].cpu_usage == 2
    manager.flush()
    spec = fixtures.request(vcpus=2, numa_topology=objects.
                            InstanceNUMATopology(cells=[
                                objects.InstanceNUMACell(
                                    id=0, cpuset={0, 1}, memory=512)]))
    manager.claim(h1, spec, fixtures.uuid(1))
    claimed = manager.get_host_state('h1')
    assert sum(c.cpu_usage for c in claimed.numa_topology.cells) == 2
    for view in (h1, manager.get_host_state('h2'),
                 manager._reports.get(('h1', 'h1'))):
        assert [c.cpu_usage for c in view.numa_topology.cells] == [0, 0]
    # A node that reports later shares it too.
    manager.update_from_report(_numa_report('h4'))
    assert manager.get_host_state('h4').numa_topology is \
        manager.get_host_state('h2').numa_topology


def _model_report(host, **fields):
    values = {'cpu_info': {'arch': 'x86_64', 'model': 'Skylake'},
              'supported_instances': [['x86_64', 'kvm', 'hvm']]}
    values.update(fields)
    return fixtures.report(host, hypervisor_hostname=host, **values)


def test_nodes_of_one_hardware_model_share_equal_containers():
    """A view's containers are replaced, never changed in place: nodes
    whose reports carry equal ones keep one between them (one CPU
    description per hardware model, one empty list for every node
    without instances), and a claim's instance list reaches no other
    node."""
    manager = fixtures.manager_with([_model_report('h1'),
                                     _model_report('h2'),
                                     _model_report('h3', cpu_info={
                                         'arch': 'aarch64'})])
    h1, h2, h3 = (manager.get_host_state(h) for h in ('h1', 'h2', 'h3'))
    assert h1.cpu_info is h2.cpu_info
    assert h1.supported_instances is h2.supported_instances
    assert h1.instance_uuids is h2.instance_uuids
    assert h1.metrics is h2.metrics
    assert h3.cpu_info is not h1.cpu_info
    assert h3.cpu_info == {'arch': 'aarch64'}
    # The host's names are one text, not a copy each.
    assert h1.nodename is h1.host and h1.hypervisor_hostname is h1.host
    manager.flush()
    manager.claim(h1, fixtures.request(), fixtures.uuid(1))
    assert manager.get_host_state('h1').instance_uuids == [fixtures.uuid(1)]
    assert manager.get_host_state('h2').instance_uuids == []
    assert manager._reports.get(('h1', 'h1')).instance_uuids == []


def test_a_node_without_pending_claims_has_no_entry_for_them():
    """What is pending is kept for the nodes that have any, not as an
    empty entry per node of the fleet."""
    manager = fixtures.manager_with([fixtures.report('h1'),
                                     fixtures.report('h2')])
    manager.flush()
    manager.refresh_nodes([('h1', 'h1'), ('h2', 'h2')])
    assert manager._usage_cache.pending == {}
    manager.claim(manager.get_host_state('h1'), fixtures.request(),
                  fixtures.uuid(1))
    manager.refresh_nodes([('h1', 'h1'), ('h2', 'h2')])
    assert list(manager._usage_cache.pending) == [('h1', 'h1')]
    assert manager.pending_claims(('h2', 'h2')) == []


def test_a_cached_usage_row_reads_like_the_stores_dict_in_less_memory():
    """One usage row is cached per node of the fleet: kept in slots
    (not a dict each), its names the texts of the key it is held
    under, read as the store's dict is."""
    manager = fixtures.manager_with([fixtures.report('h1')])
    manager.flush()
    key = ('h1', 'h1')
    manager.refresh_nodes([key])
    row = manager._usage_cache.rows[key]
    stored = usage.usage_get_nodes([key])[0]
    assert not isinstance(row, dict)
    assert not hasattr(row, '__dict__')
    assert dict(row) == stored and row == stored
    assert row['generation'] == stored['generation']
    assert row.get('reported_disk_least') == stored['reported_disk_least']
    assert row.get('no such column', 7) == 7
    held = next(k for k in manager._usage_cache.rows if k == key)
    assert row['host'] is held[0] and row['nodename'] is held[1]
    with pytest.raises(AttributeError):
        row.generation = 5


# --- hosts going down and back up --------------------------------------------

def test_a_silent_host_is_logged_down_once_and_back_up(conf, caplog):
    conf.config(service_down_time=60, group='scheduler')
    caplog.set_level(logging.INFO, logger='scheduler.host_manager')
    manager = fixtures.manager_with([fixtures.report('h1'),
                                     fixtures.report('h2')])
    manager.get_host_state('h2').received_at = time.time() - 90
    assert manager.check_down_hosts() == [('h2', 'h2')]
    assert manager.check_down_hosts() == []        # logged once
    warnings = [r.getMessage() for r in caplog.records
                if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert warnings[0].startswith('Host h2/h2 has not reported for 9')
    assert [s.host for s in manager.get_up_host_states()] == ['h1']
    assert manager.host_names() == ['h1']
    # Down hosts stay known: ComputeFilter explains why they are skipped.
    assert len(manager.get_all_host_states()) == 2

    caplog.clear()
    manager.update_from_report(fixtures.report('h2'))
    assert 'Host h2/h2 is reporting again' in caplog.text
    assert manager.host_names() == ['h1', 'h2']
    # Down again later: logged again.
    manager.get_host_state('h2').received_at = time.time() - 90
    assert manager.check_down_hosts() == [('h2', 'h2')]


def test_disabled_hosts_are_not_up():
    manager = fixtures.manager_with([fixtures.report('h1', disabled=True),
                                     fixtures.report('h2')])
    assert manager.host_names() == ['h2']


# --- the inventory: a restarted daemon schedules from what it knew -----------

def test_flush_and_reload_from_the_inventory(inventory):
    inventory.aggregate_create('Trove', metadata={'ram_allocation_ratio':
                                                  '1.0'})
    inventory.aggregate_host_add('Trove', 'h1')
    inventory.aggregate_create('rack2', availability_zone='az2')
    inventory.aggregate_host_add('rack2', 'h2')

    before = host_manager.HostManager()
    before.load_from_inventory()
    before.update_from_report(fixtures.report('h1', memory_mb=4096,
                                              hypervisor_type='QEMU'))
    before.update_from_report(fixtures.report('h2', memory_mb=8192,
                                              disabled=True))
    _claim(before, 'h1', memory_mb=3072, vcpus=2, root_gb=10)
    before.flush()

    after = host_manager.HostManager()
    after.load_from_inventory()
    states = {s.host: s for s in after.get_all_host_states()}
    assert sorted(states) == ['h1', 'h2']
    h1 = states['h1']
    assert h1.hypervisor_type == 'QEMU'
    assert [a.name for a in h1.aggregates] == ['Trove']
    assert states['h2'].availability_zones == {'az2'}
    assert states['h2'].disabled
    # The open claim is counted again.
    assert (h1.free_ram_mb, h1.vcpus_used, h1.local_gb_used) == (1024, 2, 10)
    assert fixtures.uuid(1) in h1.instance_uuids
    assert after.host_names() == ['h1']


def test_a_load_put_off_keeps_the_reports_that_came_meanwhile(inventory):
    """A worker that started during a database outage loads once it is
    back: saved reports fill in the nodes it has not heard from, a
    node that reported since keeps its newer report, and the load runs
    once."""
    before = host_manager.HostManager()
    before.load_from_inventory()
    before.update_from_report(fixtures.report('h1', memory_mb=4096))
    before.update_from_report(fixtures.report('h2', memory_mb=4096))
    before.flush()

    restarted = host_manager.HostManager()
    restarted.update_from_report(fixtures.report('h1', memory_mb=8192))
    restarted.ensure_loaded()
    states = {s.host: s for s in restarted.get_all_host_states()}
    assert sorted(states) == ['h1', 'h2']
    assert states['h1'].total_usable_ram_mb == 8192
    assert states['h2'].total_usable_ram_mb == 4096
    loads = []
    restarted.load_from_inventory = lambda: loads.append(1)
    restarted.ensure_loaded()
    assert loads == []


def test_a_restarted_daemon_schedules_from_what_it_knew(inventory, conf):
    conf.config(enabled_filters=fixtures.CORE_FILTERS,
                group='filter_scheduler')
    before = host_manager.HostManager()
    before.load_from_inventory()
    before.update_from_report(fixtures.report('h1', memory_mb=4096))
    driver = filter_scheduler.FilterScheduler(before)
    spec = fixtures.request(memory_mb=3072, root_gb=1)
    driver.select_destinations(None, spec, [fixtures.uuid(1)])
    before.flush()

    restarted = host_manager.HostManager()
    restarted.load_from_inventory()
    driver = filter_scheduler.FilterScheduler(restarted)
    # 1 GB left: a second 3 GB instance does not fit ...
    with pytest.raises(exception.NoValidHost):
        driver.select_destinations(None, fixtures.request(memory_mb=3072),
                                   [fixtures.uuid(2)])
    # ... even after the compute reports without the first instance yet.
    restarted.update_from_report(fixtures.report('h1', memory_mb=4096))
    with pytest.raises(exception.NoValidHost):
        driver.select_destinations(None, fixtures.request(memory_mb=3072),
                                   [fixtures.uuid(2)])
    # Once the compute reports the instance, the claim is settled.
    restarted.update_from_report(fixtures.report(
        'h1', memory_mb=4096, memory_mb_used=3072,
        instance_uuids=[fixtures.uuid(1)]))
    restarted.flush()
    assert [i['pending'] for i in inventory.instance_get_all()] == [False]


def test_an_unreadable_saved_report_is_skipped(inventory, caplog):
    inventory.host_reports_save([
        {'host': 'h1', 'nodename': 'h1', 'uuid': None, 'disabled': False,
         'updated_at': None, 'report': {'versioned_object.name': 'Nope'}},
        {'host': 'h2', 'nodename': 'h2', 'uuid': None, 'disabled': False,
         'updated_at': None,
         'report': fixtures.report('h2').obj_to_primitive()}])
    manager = host_manager.HostManager()
    manager.load_from_inventory()
    assert manager.host_names() == ['h2']
    assert 'Ignoring unreadable saved report of h1/h1' in caplog.text


def test_aggregate_changes_reach_the_hosts(inventory):
    manager = host_manager.HostManager()
    manager.load_from_inventory()
    manager.update_from_report(fixtures.report('h1'))
    manager.update_aggregates([objects.Aggregate(
        id=None, uuid=fixtures.uuid(800), name='Trove', hosts=['h1'],
        metadata={})])
    assert [a.name for a in manager.get_host_state('h1').aggregates] == \
        ['Trove']
    assert [a['name'] for a in inventory.aggregate_get_all()] == ['Trove']
    manager.delete_aggregate(manager.aggregates()[0])
    assert manager.get_host_state('h1').aggregates == []
    # Deleting what is already gone is no error.
    manager.delete_aggregate(objects.Aggregate(id=None, uuid=None,
                                               name='Trove', hosts=[],
                                               metadata={}))


class _RefreshingInventory:
    """The inventory, with a periodic refresh of ``manager``'s aggregates
    run in the middle of its next call of ``during`` (before it is done,
    or ``after`` it is)."""

    after = False

    def __init__(self, db, during):
        self._db, self._during, self.manager = db, during, None

    def __getattr__(self, name):
        found = getattr(self._db, name)
        if name != self._during:
            return found

        def midway(*args, **kwargs):
            manager, self.manager = self.manager, None
            if manager is not None and not self.after:
                self._midway(manager)
            result = found(*args, **kwargs)
            if manager is not None and self.after:
                self._midway(manager)
            return result
        return midway

    def _midway(self, manager):
        manager.refresh_aggregates()


def _zone(name, hosts, uuid):
    return objects.Aggregate(id=None, uuid=fixtures.uuid(uuid), name=name,
                             hosts=hosts, metadata={'availability_zone': name})


def test_a_refresh_while_aggregates_are_written_keeps_the_new_ones(
        inventory):
    store = _RefreshingInventory(inventory, 'aggregate_upsert')
    manager = host_manager.HostManager(inventory=store)
    manager.update_from_report(fixtures.report('h1'))
    manager.update_aggregates([_zone('az1', ['h1'], 801)])
    # The cast's second aggregate is written while the periodic refresh
    # runs: the inventory has the first only, memory has both.
    store.manager = manager
    manager.update_aggregates([_zone('az1', ['h1'], 801),
                               _zone('az2', ['h1'], 802)])
    assert store.manager is None   # the refresh ran mid-write
    view = manager.get_host_state('h1')
    assert view.availability_zones == {'az1', 'az2'}
    # Once written, they are read back once, and nothing changes.
    manager.refresh_aggregates()
    assert manager.get_host_state('h1') is view
    assert manager._aggregates.stamp == inventory.aggregates_stamp()


class _ChangedWhileRead(_RefreshingInventory):
    after = True

    def _midway(self, manager):
        manager.update_aggregates([_zone('az9', ['h1'], 809)])


def test_aggregates_read_before_a_change_do_not_undo_it(inventory):
    store = _ChangedWhileRead(inventory, 'aggregate_get_all')
    manager = host_manager.HostManager(inventory=store)
    manager.update_from_report(fixtures.report('h1'))
    manager.update_aggregates([_zone('az1', ['h1'], 801)])
    store.manager = manager
    manager.refresh_aggregates()   # reads az1; az9 is cast meanwhile
    assert store.manager is None
    assert manager.get_host_state('h1').availability_zones == {
        'az1', 'az9'}
    manager.refresh_aggregates()   # the next read has both
    assert [a.name for a in manager.aggregates()] == ['az1', 'az9']


def test_a_computes_full_instance_list_reconciles_the_inventory(inventory):
    manager = host_manager.HostManager()
    manager.load_from_inventory()
    manager.update_from_report(fixtures.report('h1', memory_mb=8192))
    _claim(manager, 'h1', uuid=1)
    _claim(manager, 'h1', uuid=2)
    # The compute built instance 1, and lists it: it becomes active.
    manager.sync_instance_info('h1', [fixtures.uuid(1)])
    status = {i['instance_uuid']: i['status']
              for i in inventory.instance_get_all(host='h1')}
    assert status == {fixtures.uuid(1): 'active',
                      fixtures.uuid(2): 'claimed'}

    # Its report counts it; later the compute no longer has instance 1:
    # its placement goes.  (Until a report counts it, a list without it
    # may have been taken before it was built: it stays.)
    manager.sync_instance_info('h1', [])
    assert len(inventory.instance_get_all()) == 2
    manager.update_from_report(fixtures.report(
        'h1', memory_mb=8192, memory_mb_used=1024,
        instance_uuids=[fixtures.uuid(1)]))
    manager.flush()
    manager.sync_instance_info('h1', [])
    assert [i['instance_uuid'] for i in inventory.instance_get_all()] == [
        fixtures.uuid(2)], 'a claim still building stays'


def test_views_in_the_same_aggregates_share_what_they_derive():
    """Zones, metadata and allocation ratios are made once per set of
    aggregates and node ratios, not per view: at 100,000 nodes, each
    view's own copies cost about 1.7 KB a node."""
    manager = host_manager.HostManager(
        inventory=fixtures.memory_inventory())
    manager.update_aggregates([objects.Aggregate(
        id=1, name='fast', hosts=['h1', 'h2', 'h3'],
        metadata={'cpu_allocation_ratio': '4.0',
                  'availability_zone': 'az1'})])
    for name in ('h1', 'h2'):
        manager.update_from_report(fixtures.report(name))
    manager.update_from_report(fixtures.report('h3',
                                               ram_allocation_ratio=3.0))
    manager.update_from_report(fixtures.report('h4'))
    h1, h2, h3, h4 = (manager.get_host_state(h)
                      for h in ('h1', 'h2', 'h3', 'h4'))
    assert h1.availability_zones is h2.availability_zones
    assert h1._ratios is h2._ratios and h1._metadata is h2._metadata
    assert h1.allocation_ratio('cpu') == h3.allocation_ratio('cpu') == 4.0
    # A node with ratios of its own keeps them.
    assert h3._ratios is not h1._ratios
    assert h3.allocation_ratio('ram') == 3.0
    assert h3.availability_zones == {'az1'}
    assert h4.availability_zones == frozenset()
    assert h4.allocation_ratio('cpu') == h4.cpu_allocation_ratio
    # An aggregate changed is a new object: the views derive anew.
    manager.update_aggregates([objects.Aggregate(
        id=1, name='fast', hosts=['h1', 'h2', 'h3'],
        metadata={'cpu_allocation_ratio': '2.0',
                  'availability_zone': 'az2'})])
    h1, h2 = manager.get_host_state('h1'), manager.get_host_state('h2')
    assert h1.availability_zones == {'az2'}
    assert h1.allocation_ratio('cpu') == 2.0
    assert h1._ratios is h2._ratios


# --- an older usage row never replaces a newer one ---------------------------

class _ClaimWhileReading:
    """The usage store, where a read of some nodes' rows returns what it
    read before a claim on them landed (the claim runs while the rows
    are on their way back, as another request's may)."""

    def __init__(self, during_read=None):
        self.during_read = during_read

    def __getattr__(self, name):
        return getattr(usage, name)

    def usage_get_nodes(self, keys):
        rows = usage.usage_get_nodes(keys)
        action, self.during_read = self.during_read, None
        if action is not None:
            action()
        return rows


def _h1_over(store) -> host_manager.HostManager:
    """A manager over usage store ``store``, node h1 (4,096 MB) in the
    inventory and reported."""
    seeded = fixtures.manager_with([fixtures.report('h1', memory_mb=4096)])
    seeded.flush()
    manager = host_manager.HostManager(inventory=seeded.db,
                                       usage_store=store)
    manager.load_from_inventory()
    manager.update_from_report(fixtures.report('h1', memory_mb=4096))
    return manager


def test_a_row_read_before_a_claim_does_not_replace_the_claims_row():
    store = _ClaimWhileReading()
    manager = _h1_over(store)
    key = ('h1', 'h1')
    store.during_read = lambda: _claim(manager, 'h1', memory_mb=1024)
    manager.refresh_nodes([key])
    # The claim's row stays: the view counts the claim.
    assert manager.get_host_state('h1').free_ram_mb == 3072
    assert manager._usage_cache.rows[key]['claimed_memory_mb'] == 1024
    # And the next look at the inventory agrees.
    manager.refresh_usage()
    assert manager.get_host_state('h1').free_ram_mb == 3072


def test_an_older_usage_row_is_not_cached_over_a_newer_one():
    manager = fixtures.manager_with([fixtures.report('h1', memory_mb=4096)])
    manager.flush()
    key = ('h1', 'h1')
    manager.refresh_nodes([key])
    older = dict(manager._usage_cache.rows[key])
    _claim(manager, 'h1', memory_mb=1024)
    newer = manager._usage_cache.rows[key]
    assert newer['generation'] > older['generation']
    # A refresh that read the row before the claim applies after it.
    manager._reload_nodes([key], [older])
    assert manager._usage_cache.rows[key] is newer
    assert manager.get_host_state('h1').free_ram_mb == 3072
    # A node deleted and made again starts its generation over, with a
    # newer sequence number: that row is taken.
    again = dict(older, generation=0, seq=newer['seq'] + 1)
    manager._reload_nodes([key], [again])
    assert manager._usage_cache.rows[key] == again


class _RefreshAfterCommit:
    """The usage store, where another request's refresh reads a node's
    row and claims after a claim on it committed and caches them before
    the claiming request takes the lock to cache its own."""

    def __init__(self, manager=None):
        self.manager = manager

    def __getattr__(self, name):
        return getattr(usage, name)

    def claim_many(self, requests):
        placed = usage.claim_many(requests)
        manager, self.manager = self.manager, None
        if manager is not None:
            manager.refresh_nodes(sorted({(r.host, r.nodename)
                                          for r in requests}))
        return placed


def test_a_claim_does_not_count_itself_again_over_a_newer_cached_row():
    store = _RefreshAfterCommit()
    manager = _h1_over(store)
    store.manager = manager
    _claim(manager, 'h1', memory_mb=1024)
    key = ('h1', 'h1')
    # The row the refresh cached already counts the claim: the claim
    # keeps it rather than adding itself to it a second time.
    assert manager._usage_cache.rows[key]['claimed_memory_mb'] == 1024
    assert manager.get_host_state('h1').free_ram_mb == 3072
    # Nothing changed since, so the next look reads nothing new.
    manager.refresh_usage()
    assert manager.get_host_state('h1').free_ram_mb == 3072


# --- reports another worker took (API 1.5 intake) ----------------------------

def _two_workers():
    """Two workers on one inventory: ``taker`` takes the reports."""
    taker = fixtures.manager_with()
    other = host_manager.HostManager(inventory=taker.db)
    other.load_from_inventory()
    return taker, other


def test_a_worker_learns_the_reports_another_took_from_the_inventory():
    clock = [1000.0]
    liveness.set_clock(lambda: clock[0])
    try:
        taker, other = _two_workers()
        taker.update_from_report(fixtures.report('h1', memory_mb=8192))
        assert other.refresh_reports() == 0
        taker.flush()
        assert other.refresh_reports() == 1
        assert other.get_host_state('h1').memory_mb == 8192
        # Nothing new: nothing read, nothing taken.
        assert other.refresh_reports() == 0
        # A quiet report: only its time travels, read by the others
        # once the time they hold gets old (not every time renewed).
        clock[0] += 10
        taker.update_from_report(fixtures.report('h1', memory_mb=8192))
        taker.flush()
        before = other.get_host_state('h1')
        assert other.refresh_reports() == 0
        clock[0] += host_manager.time_to_refresh()
        assert other.refresh_reports() == 1
        after = other.get_host_state('h1')
        assert after is not before and after.received_at > \
            before.received_at
        # A report that changed is read whole.
        taker.update_from_report(fixtures.report('h1', memory_mb=16384))
        taker.flush()
        other.refresh_reports()
        assert other.get_host_state('h1').memory_mb == 16384
        # The taker does not read its own writes back.
        assert taker.refresh_reports() == 0
    finally:
        liveness.set_clock(None)


def test_a_host_another_worker_hears_from_is_not_marked_down():
    clock = [1000.0]
    liveness.set_clock(lambda: clock[0])
    try:
        taker, other = _two_workers()
        taker.update_from_report(fixtures.report('h1'))
        taker.flush()
        other.refresh_reports()
        # Reports go on reaching the taker only, for longer than
        # service_down_time.
        for _ in range(10):
            clock[0] += 10
            taker.update_from_report(fixtures.report('h1'))
            taker.flush()
            other.refresh_reports()
            assert other.check_down_hosts() == []
        assert [s.host for s in other.get_up_host_states()] == ['h1']
        # A host that stops reporting goes down on both.
        clock[0] += 120
        other.refresh_reports()
        assert other.check_down_hosts() == [('h1', 'h1')]
        # ... and comes back on the other worker when the taker hears it.
        clock[0] += 1
        taker.update_from_report(fixtures.report('h1'))
        taker.flush()
        other.refresh_reports()
        assert [s.host for s in other.get_up_host_states()] == ['h1']
    finally:
        liveness.set_clock(None)


class _TimesAsked:
    """The real inventory; records the keys of each stored-time read."""

    def __init__(self, real):
        self.real = real
        self.asked = []

    def __getattr__(self, name):
        return getattr(self.real, name)

    def host_report_times(self, keys):
        self.asked.append(sorted(keys))
        return self.real.host_report_times(keys)


def test_the_others_read_a_quiet_nodes_time_only_when_theirs_gets_old():
    clock = [1000.0]
    liveness.set_clock(lambda: clock[0])
    try:
        taker = fixtures.manager_with()
        other = host_manager.HostManager(inventory=_TimesAsked(taker.db))
        other.load_from_inventory()
        for host in ('h1', 'h2', 'h3'):
            taker.update_from_report(fixtures.report(host))
        taker.flush()
        other.refresh_reports()
        assert len(other.get_up_host_states()) == 3
        other.db.asked.clear()
        # The taker renews every node each report interval; the other
        # worker reads no time while the ones it holds are young.
        for _ in range(int(host_manager.time_to_refresh() // 10)):
            clock[0] += 10
            for host in ('h1', 'h2', 'h3'):
                taker.update_from_report(fixtures.report(host))
            taker.flush()
            other.refresh_reports()
        assert other.db.asked == []
        # h3's compute then reports to the other worker directly: only
        # the times of h1 and h2 get old there and are read, once.
        other.update_from_report(fixtures.report('h3'))
        clock[0] += 10
        taker.update_from_report(fixtures.report('h1'))
        taker.update_from_report(fixtures.report('h2'))
        taker.flush()
        assert other.refresh_reports() == 2
        assert other.db.asked == [[('h1', 'h1'), ('h2', 'h2')]]
        assert other.refresh_reports() == 0
        assert other.db.asked == [[('h1', 'h1'), ('h2', 'h2')]]
        assert other.check_down_hosts() == []
    finally:
        liveness.set_clock(None)


@pytest.mark.parametrize('down, every, age', [
    (60, 10, 30.0),    # the defaults: half the down time
    (30, 10, 10.0),    # two periodic runs short of the down time
    (15, 10, 0.0),     # every run reads every time
])
def test_a_time_is_read_again_well_before_the_down_cut_off(
        conf, down, every, age):
    conf.config(service_down_time=down, periodic_task_interval=every,
                group='scheduler')
    assert host_manager.time_to_refresh() == age


def test_a_report_written_by_another_worker_never_replaces_a_newer_one():
    taker, other = _two_workers()
    older = timeutils.utcnow() - datetime.timedelta(seconds=5)
    taker.update_from_report(fixtures.report('h1', memory_mb=1024,
                                             updated_at=older))
    other.update_from_report(fixtures.report(
        'h1', memory_mb=2048, updated_at=timeutils.utcnow()))
    taker.flush()
    other.refresh_reports()
    assert other.get_host_state('h1').memory_mb == 2048
    # ... and it writes its own again at its next flush: the others
    # would otherwise keep the older one until a report reaches a
    # worker that holds it.
    other.flush()
    taker.refresh_changed_reports()
    assert taker.get_host_state('h1').memory_mb == 2048


def test_a_late_report_never_replaces_a_newer_one_in_the_view(conf):
    """A compute lowered its node's RAM; its report from before the
    change reaches the worker after the one that says so (a fanout
    report redelivered, two served at once).  The worker goes on
    placing against the newer report, and stores that one."""
    conf.config(enabled_filters=fixtures.CORE_FILTERS,
                group='filter_scheduler')
    manager = host_manager.HostManager(inventory=fixtures.memory_inventory())
    now = timeutils.utcnow()
    manager.update_from_report(fixtures.report('h1', memory_mb=8192,
                                               updated_at=now))
    manager.update_from_report(fixtures.report(
        'h1', memory_mb=16384, updated_at=now - datetime.timedelta(
            seconds=30)))
    assert manager.get_host_state('h1').memory_mb == 8192
    with pytest.raises(exception.NoValidHost):
        filter_scheduler.FilterScheduler(manager).select_destinations(
            None, fixtures.request(memory_mb=12288), [fixtures.uuid(1)])
    manager.flush()
    assert manager.db.host_reports_get_all()[0]['report'][
        'versioned_object.data']['memory_mb'] == 8192


def _no_window(*managers):
    for manager in managers:
        manager._writer.window = 0.0
    return managers


def test_a_report_from_the_intake_is_written_before_its_taker_uses_it():
    """No flush: the other worker sees the new host, and a changed one,
    at its next request, and the taker saw neither before the
    inventory had it."""
    taker, other = _no_window(*_two_workers())
    seen = []

    class Watcher:
        def view_changed(self, key, view):
            seen.append((key, len(taker.db.host_reports_get([key]))))

        def view_removed(self, key):
            pass

    taker.watch_views(Watcher())
    taker.update_from_report(fixtures.report('h1', memory_mb=8192),
                             shared=True)
    # Published once stored, and again when its usage row is read.
    assert seen and set(seen) == {(('h1', 'h1'), 1)}
    other.refresh_usage()
    assert other.get_host_state('h1').memory_mb == 8192
    taker.update_from_report(fixtures.report('h1', memory_mb=16384),
                             shared=True)
    other.refresh_usage()
    assert other.get_host_state('h1').memory_mb == 16384
    # Its usage too: the usage row says what the report says.
    taker.update_from_report(fixtures.report('h1', memory_mb=16384,
                                             memory_mb_used=2048),
                             shared=True)
    assert usage.usage_get_nodes([('h1', 'h1')])[0][
        'reported_memory_mb'] == 2048
    other.refresh_usage()
    assert other.get_host_state('h1').free_ram_mb == 14336
    # The taker does not read its own writes back.
    assert taker.refresh_changed_reports() == 0


def test_a_quiet_report_from_the_intake_waits_for_the_flush():
    clock = [1000.0]
    liveness.set_clock(lambda: clock[0])
    try:
        taker, other = _no_window(*_two_workers())
        taker.update_from_report(fixtures.report('h1'), shared=True)
        other.refresh_usage()
        seq = taker.db.report_seq()
        clock[0] += 10
        taker.update_from_report(fixtures.report('h1'), shared=True)
        # Only its time is new: nothing written, nothing for a request
        # to read.
        assert taker.db.report_seq() == seq
        assert taker.db.host_reports_changed_since(seq) == []
        taker.flush()
        assert taker.db.report_seq() == seq + 1
        assert taker.db.host_reports_changed_since(seq) == []
        # The periodic read carries the time, once the one held gets
        # old.
        taken = clock[0]
        clock[0] += host_manager.time_to_refresh() + 1
        assert other.refresh_reports() == 1
        assert other.get_host_state('h1').received_at == taken
    finally:
        liveness.set_clock(None)


def test_a_report_from_the_intake_that_cannot_be_written_is_used_and_kept(
        caplog):
    manager = host_manager.HostManager(
        inventory=_FlakyInventory(fixtures.memory_inventory()))
    _no_window(manager)
    manager.update_from_report(fixtures.report('h1'), shared=True)
    assert manager.db.saved == []
    assert 'Could not write to the inventory' in caplog.text
    assert [s.host for s in manager.get_all_host_states()] == ['h1']
    manager.flush()
    assert manager.db.saved == ['h1']


def test_a_report_from_the_intake_left_waiting_is_written_by_the_flush():
    taker, other = _two_workers()
    view = host_view.HostView(fixtures.report('h1'))
    # As a writing thread killed by a stop leaves it.
    taker._writer._waiting[view.key()] = report_writer.Taken(view.key(),
                                                             view)
    taker.flush()
    other.refresh_changed_reports()
    assert [s.host for s in other.get_all_host_states()] == ['h1']


def test_a_request_reads_the_changed_reports_whatever_the_times_did():
    """Times other workers wrote do not hide a change behind them."""
    taker, other = _no_window(*_two_workers())
    for name in ('h1', 'h2'):
        taker.update_from_report(fixtures.report(name), shared=True)
    taker.flush()
    other.refresh_reports()
    # A time (h1), then a change (h2), then a time again (h2).
    taker.update_from_report(fixtures.report('h1'), shared=True)
    taker.flush()
    taker.update_from_report(fixtures.report('h2', memory_mb=8192),
                             shared=True)
    taker.update_from_report(fixtures.report('h2', memory_mb=8192),
                             shared=True)
    taker.flush()
    assert other.refresh_changed_reports() == 1
    assert other.get_host_state('h2').memory_mb == 8192
    assert other.refresh_changed_reports() == 0


class _RequestAfterCommit:
    """The inventory, but a request of ``manager`` is served between the
    commit of a write of intake reports and its answer: under eventlet
    the writing thread yields in every query, and so does a real
    database's driver under threading."""

    def __init__(self, real):
        self.real = real
        self.manager = None
        self.seen: list = []

    def __getattr__(self, name):
        return getattr(self.real, name)

    def host_reports_save_with_usage(self, reports, usage_reports):
        written = self.real.host_reports_save_with_usage(reports,
                                                         usage_reports)
        self.manager.refresh_usage()
        self.seen.append(sorted((s.host, s.memory_mb_used) for s in
                                self.manager.get_all_host_states()))
        return written


def test_a_report_from_the_intake_is_its_takers_view_once_stored():
    """Once the inventory has a new report, the worker that took it
    schedules with it and its usage, as every other worker would: a
    request served before the write's answer reaches the taker reads
    them back (a request that saw no such host had its taker hold the
    report as read back, not as installed)."""
    store = _RequestAfterCommit(fixtures.memory_inventory())
    taker = host_manager.HostManager(inventory=store)
    store.manager = taker
    _no_window(taker)
    taker.update_from_report(fixtures.report('h1', memory_mb_used=1024),
                             shared=True)
    assert taker.db.host_reports_get([('h1', 'h1')])
    assert store.seen == [[('h1', 1024)]]
    # And once the write answered, the view has it.
    assert taker.get_host_state('h1').memory_mb_used == 1024


class _AnswerLost:
    """The inventory, but once ``armed`` its next write of intake
    reports commits and its answer is lost (the database cut just after
    the commit); ``meanwhile()`` runs between the two."""

    def __init__(self, real):
        self.real = real
        self.armed = False
        self.meanwhile = lambda: None

    def host_reports_save_with_usage(self, reports, usage_reports):
        written = self.real.host_reports_save_with_usage(reports,
                                                         usage_reports)
        if self.armed:
            self.armed = False
            self.meanwhile()
            raise exception.InventoryUnavailable(reason='cut')
        return written

    def __getattr__(self, name):
        return getattr(self.real, name)


def _reported_with_read_back_to_fail():
    """A worker taking reports from the intake, whose inventory loses
    the answer of a write when armed, and node h1 reported 10 s ago:
    (inventory, worker, h1's key, the report's time)."""
    store = _AnswerLost(fixtures.memory_inventory())
    taker = host_manager.HostManager(inventory=store)
    _no_window(taker)
    start = timeutils.utcnow() - datetime.timedelta(seconds=10)
    taker.update_from_report(fixtures.report(
        'h1', memory_mb=16384, updated_at=start), shared=True)
    return store, taker, ('h1', 'h1'), start


def test_a_report_after_an_unread_usage_write_carries_its_usage():
    """The usage of a report from the intake was written, the write's
    answer lost (the database cut just after the commit): the worker's
    usage row is older than the inventory's.  The next report, which no
    longer lists the instance, must still write its usage, though it
    equals that older row: else the inventory keeps the instance's usage
    after its placement went (a whole-host request refused)."""
    store, taker, key, start = _reported_with_read_back_to_fail()
    _claim(taker, 'h1', memory_mb=8192, uuid=1)
    # The build's report lists it; its usage is written, the answer
    # lost.
    store.armed = True
    taker.update_from_report(fixtures.report(
        'h1', memory_mb=16384, memory_mb_used=8192,
        instance_uuids=[fixtures.uuid(1)],
        updated_at=start + datetime.timedelta(seconds=1)), shared=True)
    row = usage.usage_get_nodes([key])[0]
    assert (row['reported_memory_mb'], row['claimed_memory_mb']) == (8192, 0)
    # Deleted on the compute: its report no longer lists it ...
    taker.update_from_report(fixtures.report(
        'h1', memory_mb=16384, memory_mb_used=0,
        updated_at=start + datetime.timedelta(seconds=2)), shared=True)
    # ... and the deletion reaches the inventory (another worker).
    usage.release([fixtures.uuid(1)], host='h1')
    row = usage.usage_get_nodes([key])[0]
    assert (row['reported_memory_mb'], row['claimed_memory_mb']) == (0, 0)
    taker.refresh_usage()
    assert taker.get_host_state('h1').free_ram_mb == 16384


def test_a_failed_usage_write_keeps_the_usage_of_a_newer_report():
    """A newer report of the node came while a report's usage was
    written (the write's answer lost): it was judged against the row that
    write replaced, so it may carry nothing; its usage is the one the
    next flush writes."""
    store, taker, key, start = _reported_with_read_back_to_fail()
    newer = fixtures.report('h1', memory_mb=32768, memory_mb_used=0,
                            updated_at=start + datetime.timedelta(seconds=2))
    # The newer report (a fanout one, installed at once: a new capacity,
    # the usage of the report held) arrives between the write's commit
    # and its answer, which the cut loses.
    store.armed = True
    store.meanwhile = lambda: taker.update_from_report(newer)
    taker.update_from_report(fixtures.report(
        'h1', memory_mb=16384, memory_mb_used=4096,
        updated_at=start + datetime.timedelta(seconds=1)), shared=True)
    assert usage.usage_get_nodes([key])[0]['reported_memory_mb'] == 4096
    taker.flush()
    assert usage.usage_get_nodes([key])[0]['reported_memory_mb'] == 0


# --- a report the inventory refuses -----------------------------------------

class _RefusingInventory:
    """The real inventory, but it refuses (a non-outage ``DBDataError``,
    as a value its column cannot hold) every write that holds a report
    or usage of a host in ``refused``, and is away (an outage) for the
    next other write that holds a host in ``away``.  Records the hosts of
    each write it let through."""

    def __init__(self, real, refused=(), away=()):
        self.real = real
        self.refused = set(refused)
        self.away = set(away)
        self.tried = []
        self.written = []

    def __getattr__(self, name):
        return getattr(self.real, name)

    def host_reports_save_with_usage(self, reports, usage_reports):
        hosts = sorted({r['host'] for r in reports}
                       | {r.host for r in usage_reports})
        self.tried.append(hosts)
        if self.refused & set(hosts):
            raise db_exc.DBDataError(ValueError(
                'value too long for type character varying(36)'))
        if self.away & set(hosts):
            self.away.clear()
            raise db_exc.DBConnectionError('connection refused')
        self.written.append(hosts)
        return self.real.host_reports_save_with_usage(reports,
                                                      usage_reports)


_FIVE = ['h1', 'h2', 'h3', 'h4', 'h5']


def _stored_hosts(manager) -> list:
    return [row['host'] for row in manager.db.host_reports_get_all()]


def _refusals(caplog) -> list:
    return [r.getMessage() for r in caplog.records
            if r.levelno >= logging.ERROR]


def _refusals_counted() -> float:
    return test_metrics.parse(metrics.render()).get(
        ('scheduler_rejected_requests_total',
         (('error', 'DBDataError'),
          ('method', 'update_service_capabilities'))), 0)


def _refused_alone(manager, caplog, host: str) -> None:
    """``host``'s report was dropped with one ERROR line naming it and
    the database's error; nothing of it is kept to be tried again."""
    errors = _refusals(caplog)
    assert len(errors) == 1, errors
    assert '%s/%s' % (host, host) in errors[0]
    assert 'value too long' in errors[0]
    assert 'Traceback' not in caplog.text
    tries = len(manager.db.tried)
    manager.flush()
    assert len(manager.db.tried) == tries
    assert len(_refusals(caplog)) == 1


def test_a_report_the_inventory_refuses_in_a_flush_is_dropped_alone(caplog):
    """The periodic flush: the batch a refused report is in is written
    again in parts; every other report of it, and the usage it
    carries, is written, and the refused one is dropped, not retried
    for ever with the whole batch."""
    manager = host_manager.HostManager(inventory=_RefusingInventory(
        fixtures.memory_inventory(), refused={'h3'}))
    for name in _FIVE:
        manager.update_from_report(fixtures.report(name,
                                                   memory_mb_used=512))
    counted = _refusals_counted()
    manager.flush()
    assert _refusals_counted() == counted + 1
    assert _stored_hosts(manager) == ['h1', 'h2', 'h4', 'h5']
    assert sorted(row['host'] for row in usage.usage_get_all()) == \
        ['h1', 'h2', 'h4', 'h5']
    _refused_alone(manager, caplog, 'h3')
    # The node's next report is taken as any: the same one again is
    # tried again (not only its time), and written once it can be.
    manager.db.refused.clear()
    manager.update_from_report(fixtures.report('h3', memory_mb_used=512))
    manager.flush()
    assert _stored_hosts(manager) == _FIVE
    assert usage.usage_get_nodes([('h3', 'h3')])[0][
        'reported_memory_mb'] == 512


def test_a_worker_places_nothing_on_a_report_its_flush_had_refused(conf):
    """A fanout report the flush could not store stops being this
    worker's view of its node: the node is what the inventory holds of
    it (the report stored before), or unknown (none stored), so this
    worker places nothing on capacity the others never heard of."""
    conf.config(enabled_filters=fixtures.CORE_FILTERS,
                group='filter_scheduler')
    manager = host_manager.HostManager(inventory=_RefusingInventory(
        fixtures.memory_inventory()))
    start = timeutils.utcnow()
    manager.update_from_report(fixtures.report('h1', memory_mb=4096,
                                               updated_at=start))
    manager.flush()
    manager.db.refused.update({'h1', 'h2'})
    later = start + datetime.timedelta(seconds=1)
    manager.update_from_report(fixtures.report('h1', memory_mb=16384,
                                               updated_at=later))
    manager.update_from_report(fixtures.report('h2', memory_mb=16384,
                                               updated_at=later))
    manager.flush()
    assert [(s.host, s.memory_mb)
            for s in manager.get_all_host_states()] == [('h1', 4096)]
    with pytest.raises(exception.NoValidHost):
        filter_scheduler.FilterScheduler(manager).select_destinations(
            None, fixtures.request(memory_mb=8192), [fixtures.uuid(1)])
    assert usage.placements_get([fixtures.uuid(1)]) == {}


def test_a_report_the_intake_could_not_store_is_dropped_alone(caplog):
    """The intake: a write of taken reports one of which the inventory
    refuses writes the others, which become the taker's views; the
    refused one is not installed, nor kept for the flush."""
    manager = host_manager.HostManager(inventory=_RefusingInventory(
        fixtures.memory_inventory(), refused={'h3'}))
    for name in _FIVE:
        view = host_view.HostView(fixtures.report(name,
                                                  memory_mb_used=512))
        # As a writing thread killed by a stop leaves them: one batch.
        manager._writer._waiting[view.key()] = report_writer.Taken(
            view.key(), view, host_manager._node_report(view))
    manager.flush()
    assert _stored_hosts(manager) == ['h1', 'h2', 'h4', 'h5']
    assert sorted(s.host for s in manager.get_all_host_states()) == \
        ['h1', 'h2', 'h4', 'h5']
    assert manager.get_host_state('h4').memory_mb_used == 512
    _refused_alone(manager, caplog, 'h3')
    manager.db.refused.clear()
    _no_window(manager)
    manager.update_from_report(fixtures.report('h3'), shared=True)
    assert _stored_hosts(manager) == _FIVE


@pytest.mark.parametrize('shared', [False, True])
def test_an_outage_while_a_refused_report_is_isolated_keeps_the_rest(
        caplog, shared):
    """The database goes away while a refused report's batch is written
    in parts: what was written stays written, the refused report is
    dropped, and the rest is kept for the next flush, as in any
    outage."""
    manager = host_manager.HostManager(inventory=_RefusingInventory(
        fixtures.memory_inventory(), refused={'h1'}, away={'h4'}))
    _no_window(manager)
    for name in _FIVE:
        report = fixtures.report(name)
        if shared:
            view = host_view.HostView(report)
            manager._writer._waiting[view.key()] = report_writer.Taken(
                view.key(), view)
        else:
            manager.update_from_report(report)
    manager.flush()
    assert 'h1' not in _stored_hosts(manager)
    assert len(_refusals(caplog)) == 1
    manager.flush()
    # h1 alone refused, h2 written, h3 to h5 kept through the outage
    # and written by the next flush (the intake's, by the same one's
    # backlog).
    assert manager.db.written == [['h2'], ['h3', 'h4', 'h5']]
    assert _stored_hosts(manager) == ['h2', 'h3', 'h4', 'h5']
    assert len(_refusals(caplog)) == 1
    # Neither way is the refused report this worker's view.
    assert sorted(s.host for s in manager.get_all_host_states()) == \
        ['h2', 'h3', 'h4', 'h5']
