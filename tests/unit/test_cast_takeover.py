"""A ``schedule_run_instance`` cast a worker took is served even if the
worker dies before claiming: its row (``scheduler.cast_ledger``) is
taken over by another worker's periodic task and served again through
the cast path, or dropped when its instances are already placed.
"""

import datetime
import logging

from oslo_utils import timeutils
import pytest
import sqlalchemy as sa

from scheduler import cast_ledger
from scheduler import context
from scheduler.db import engine
from scheduler.db import models
from scheduler.db import taken_casts
from scheduler.db import usage
from scheduler.drivers import filter_scheduler
from scheduler import manager as manager_mod
from tests.unit import fixtures

CTX = context.get_admin_context()


_Compute = fixtures.RecordingCompute


@pytest.fixture(autouse=True)
def ram_decides(conf):
    conf.config(weight_classes=['RAMWeigher'],
                enabled_filters=fixtures.CORE_FILTERS,
                group='filter_scheduler')


def _manager():
    driver = filter_scheduler.FilterScheduler(fixtures.manager_with([
        fixtures.report('big', memory_mb=8192)]))
    manager = manager_mod.SchedulerManager(driver=driver)
    manager.driver.compute_rpcapi = _Compute()
    return manager


def _rows() -> list:
    return engine.run_read(lambda conn: [
        dict(r._mapping) for r in conn.execute(sa.select(
            models.TakenCast.__table__))])


def _taken(*uuids) -> taken_casts.Cast:
    """The row a worker killed after taking the cast left behind."""
    return cast_ledger.record(CTX, {
        'spec_obj': fixtures.request(num_instances=len(uuids)),
        'instance_uuids': list(uuids)})


def _take_over_later(manager, monkeypatch) -> None:
    """The periodic task, once the rows are older than the cutoff."""
    monkeypatch.setattr(cast_ledger, 'takeover_time', lambda: -1)
    manager._take_over_casts(CTX)


def test_a_served_cast_leaves_no_row():
    manager = _manager()
    manager.schedule_run_instance(CTX, spec_obj=fixtures.request(),
                                  instance_uuids=[fixtures.uuid(1)])
    assert manager.driver.compute_rpcapi.casts == [('big', fixtures.uuid(1))]
    assert _rows() == []


class _Killed(BaseException):
    """The worker dies (kill -9) here: nothing after it runs."""


def _dies(*args, **kwargs):
    raise _Killed()


def _listed_by_its_compute(uuid: str) -> None:
    """A report of host ``big`` lists the instance: it runs there."""
    usage.apply_reports([usage.NodeReport(
        'big', 'big', memory_mb_used=512, vcpus_used=1, local_gb_used=1,
        num_instances=1, updated_at=timeutils.utcnow(),
        instance_uuids=frozenset([uuid]))])
    assert not usage.placements_get([uuid])[uuid]['pending']


def test_a_cast_whose_worker_died_between_claim_and_build_is_built(
        monkeypatch):
    """The worker claimed the instance and was killed before its
    ``run_instance`` cast left: the row still names the instance, and
    the worker that takes it over sends the build to the host claimed."""
    manager = _manager()
    monkeypatch.setattr(manager.driver.compute_rpcapi, 'run_instance',
                        _dies)
    with pytest.raises(_Killed):
        manager.schedule_run_instance(CTX, spec_obj=fixtures.request(),
                                      instance_uuids=[fixtures.uuid(1)])
    placed = manager.driver.host_manager.placements([fixtures.uuid(1)])
    assert placed[fixtures.uuid(1)]['host'] == 'big'
    assert len(_rows()) == 1

    # The takeover (by any worker of this inventory).
    manager.driver.compute_rpcapi = _Compute()
    _take_over_later(manager, monkeypatch)
    assert manager.driver.compute_rpcapi.casts == [('big', fixtures.uuid(1))]
    assert _rows() == []


def test_a_build_the_compute_confirmed_is_not_sent_again(monkeypatch):
    """Killed after its cast left, before the row went: the compute
    listed the instance in a report, so the takeover only drops the row."""
    manager = _manager()
    monkeypatch.setattr(cast_ledger, 'forget', lambda taken: _dies())
    with pytest.raises(_Killed):
        manager.schedule_run_instance(CTX, spec_obj=fixtures.request(),
                                      instance_uuids=[fixtures.uuid(1)])
    monkeypatch.undo()
    assert manager.driver.compute_rpcapi.casts == [('big', fixtures.uuid(1))]
    _listed_by_its_compute(fixtures.uuid(1))

    manager.driver.compute_rpcapi = _Compute()
    _take_over_later(manager, monkeypatch)
    assert manager.driver.compute_rpcapi.casts == []
    assert _rows() == []


def test_a_refused_cast_leaves_no_row():
    manager = _manager()
    manager.schedule_run_instance(CTX, spec_obj=fixtures.request(),
                                  instance_uuids=[fixtures.uuid(1),
                                                  fixtures.uuid(2)])
    assert manager.driver.compute_rpcapi.casts == []
    assert _rows() == []


def test_a_cast_no_host_fits_leaves_no_row():
    manager = _manager()
    manager.schedule_run_instance(
        CTX, spec_obj=fixtures.request(memory_mb=1 << 20),
        instance_uuids=[fixtures.uuid(1)])
    assert _rows() == []


def test_a_dead_workers_cast_is_replayed_through_the_cast_path(
        monkeypatch, caplog):
    manager = _manager()
    _taken(fixtures.uuid(1), fixtures.uuid(2))
    served = []
    real = manager._serve_cast

    def spy(ctxt, taken, **args):
        served.append(sorted(args))
        return real(ctxt, taken, **args)
    monkeypatch.setattr(manager, '_serve_cast', spy)
    with caplog.at_level(logging.INFO, logger='scheduler.cast_ledger'):
        _take_over_later(manager, monkeypatch)
    assert served == [sorted(cast_ledger.ARGUMENTS)]
    assert sorted(manager.driver.compute_rpcapi.casts) == [
        ('big', fixtures.uuid(1)), ('big', fixtures.uuid(2))]
    assert _rows() == []
    [line] = [r.getMessage() for r in caplog.records
              if r.getMessage().startswith('Replaying')]
    assert fixtures.uuid(1) in line and fixtures.uuid(2) in line


def test_only_the_instances_not_running_are_replayed(monkeypatch):
    manager = _manager()
    _taken(fixtures.uuid(1), fixtures.uuid(2))
    manager.select_destinations(CTX, spec_obj=fixtures.request(),
                                instance_uuids=[fixtures.uuid(1)],
                                return_objects=True)
    _listed_by_its_compute(fixtures.uuid(1))
    _take_over_later(manager, monkeypatch)
    assert manager.driver.compute_rpcapi.casts == [('big', fixtures.uuid(2))]
    assert _rows() == []


def test_a_cast_whose_instances_run_is_only_dropped(caplog, monkeypatch):
    manager = _manager()
    _taken(fixtures.uuid(1))
    manager.select_destinations(CTX, spec_obj=fixtures.request(),
                                instance_uuids=[fixtures.uuid(1)],
                                return_objects=True)
    _listed_by_its_compute(fixtures.uuid(1))
    with caplog.at_level(logging.INFO, logger='scheduler.cast_ledger'):
        _take_over_later(manager, monkeypatch)
    assert manager.driver.compute_rpcapi.casts == []
    assert _rows() == []
    assert any('already runs' in r.getMessage() for r in caplog.records)


def test_a_young_row_is_left_to_its_worker():
    manager = _manager()
    _taken(fixtures.uuid(1))
    manager._take_over_casts(CTX)
    assert manager.driver.compute_rpcapi.casts == []
    assert len(_rows()) == 1


def test_a_worker_whose_cast_was_taken_over_stops_serving_it(caplog):
    """Slow, not dead: the other worker builds the instance; this one's
    claim is refused, and it builds nothing."""
    manager = _manager()
    taken = _taken(fixtures.uuid(1))
    [seen] = taken_casts.overdue(timeutils.utcnow()
                                 + datetime.timedelta(seconds=1))
    assert taken_casts.take_over(seen, 'other:2') is not None
    ctxt, args = cast_ledger.replayed(taken)
    with caplog.at_level(logging.INFO, logger='scheduler.manager'):
        manager._serve_cast(ctxt, taken, **args)
    assert manager.driver.compute_rpcapi.casts == []
    assert manager.driver.host_manager.placements([fixtures.uuid(1)]) == {}
    assert any('took it over' in r.getMessage() for r in caplog.records)
    assert [r['taken_by'] for r in _rows()] == ['other:2']


def test_a_row_the_inventory_cannot_take_leaves_the_cast_served(
        monkeypatch):
    """The database away: the cast is served as before rows existed."""
    def away(*args, **kwargs):
        raise sa.exc.OperationalError(
            'INSERT', {}, Exception('server closed the connection'),
            connection_invalidated=True)
    monkeypatch.setattr(taken_casts, 'record', away)
    manager = _manager()
    manager.schedule_run_instance(CTX, spec_obj=fixtures.request(),
                                  instance_uuids=[fixtures.uuid(1)])
    assert manager.driver.compute_rpcapi.casts == [('big', fixtures.uuid(1))]


def test_a_driver_that_raises_drops_the_row(monkeypatch):
    """Replayed again, it would fail the same way at every takeover."""
    manager = _manager()

    def broken(ctxt, spec_obj, uuids):
        raise RuntimeError('a driver bug')
    monkeypatch.setattr(manager.driver, 'schedule_run_instance', broken)
    with pytest.raises(RuntimeError):
        manager.schedule_run_instance(CTX, spec_obj=fixtures.request(),
                                      instance_uuids=[fixtures.uuid(1)])
    assert _rows() == []


def test_a_stopping_worker_hands_back_a_cast_it_has_not_started(
        monkeypatch, caplog):
    """SIGTERM with a backlog: a cast taken off the bus and not started
    is not served (the stop would wait for every build of the backlog);
    its row stays, and another worker builds it."""
    stopping = _manager()
    stopping.driver.stopping = True
    with caplog.at_level(logging.INFO, logger='scheduler.cast_ledger'):
        stopping.schedule_run_instance(CTX, spec_obj=fixtures.request(),
                                       instance_uuids=[fixtures.uuid(1)])
    assert stopping.driver.compute_rpcapi.casts == []
    assert [r['instance_uuids'] for r in _rows()] == [
        '["%s"]' % fixtures.uuid(1)]
    assert any('is left to another worker' in r.getMessage()
               for r in caplog.records)
    # Its own periodic task takes nothing over while it stops.
    _take_over_later(stopping, monkeypatch)
    assert stopping.driver.compute_rpcapi.casts == []
    assert len(_rows()) == 1
    # Any other worker of the inventory (here: this one, started again).
    stopping.driver.stopping = False
    _take_over_later(stopping, monkeypatch)
    assert stopping.driver.compute_rpcapi.casts == [('big', fixtures.uuid(1))]
    assert _rows() == []


def test_a_cast_under_way_stops_before_its_next_claim(monkeypatch):
    """The stop comes while a cast of two instances is served: the first
    is built, the second is left with the row (the takeover finds the
    first placed and builds only the second)."""
    manager = _manager()
    real = manager.driver.compute_rpcapi.run_instance

    def stop_after_the_first(*args, **kwargs):
        real(*args, **kwargs)
        manager.driver.stopping = True
    monkeypatch.setattr(manager.driver.compute_rpcapi, 'run_instance',
                        stop_after_the_first)
    manager.schedule_run_instance(
        CTX, spec_obj=fixtures.request(num_instances=2),
        instance_uuids=[fixtures.uuid(1), fixtures.uuid(2)])
    assert manager.driver.compute_rpcapi.casts == [('big', fixtures.uuid(1))]
    assert len(_rows()) == 1
    _listed_by_its_compute(fixtures.uuid(1))
    manager.driver.stopping = False
    manager.driver.compute_rpcapi = _Compute()
    _take_over_later(manager, monkeypatch)
    assert manager.driver.compute_rpcapi.casts == [('big', fixtures.uuid(2))]
    assert _rows() == []


def test_a_stopping_worker_stops_before_claiming(monkeypatch):
    """In the middle of a decision when the stop comes: nothing is
    claimed, the row stays."""
    manager = _manager()
    real = manager.driver._choose

    def stop_while_choosing(*args, **kwargs):
        manager.driver.stopping = True
        return real(*args, **kwargs)
    monkeypatch.setattr(manager.driver, '_choose', stop_while_choosing)
    manager.schedule_run_instance(CTX, spec_obj=fixtures.request(),
                                  instance_uuids=[fixtures.uuid(1)])
    assert manager.driver.compute_rpcapi.casts == []
    assert manager.driver.host_manager.placements([fixtures.uuid(1)]) == {}
    assert len(_rows()) == 1


def test_a_stopping_worker_hands_back_before_its_freshness_read(
        monkeypatch):
    """The stop comes after the cast has started and before its decision:
    the freshness read (round trips to a database that may be slow) is
    not made for a build that will hand back at the decision turn."""
    manager = _manager()
    reads = []
    host_manager = manager.driver.host_manager

    def stop_while_loading():
        manager.driver.stopping = True
    monkeypatch.setattr(host_manager, 'ensure_loaded', stop_while_loading)
    monkeypatch.setattr(host_manager, 'refresh_usage',
                        lambda: reads.append(1) or 0)
    manager.schedule_run_instance(CTX, spec_obj=fixtures.request(),
                                  instance_uuids=[fixtures.uuid(1)])
    assert reads == []
    assert manager.driver.compute_rpcapi.casts == []
    assert len(_rows()) == 1


def test_a_stopping_worker_serves_a_cast_it_could_not_record(monkeypatch):
    """No row to leave (the database away): served as before."""
    monkeypatch.setattr(cast_ledger, 'record', lambda ctxt, args: None)
    manager = _manager()
    manager.driver.stopping = True
    manager.schedule_run_instance(CTX, spec_obj=fixtures.request(),
                                  instance_uuids=[fixtures.uuid(1)])
    assert manager.driver.compute_rpcapi.casts == [('big', fixtures.uuid(1))]


def test_the_rows_a_stopping_worker_leaves_are_taken_over_at_once(
        monkeypatch):
    """At the end of its stop a worker dates its rows back to the
    cutoff: another worker's next takeover serves them, not one
    ``cast_takeover_time`` later.  Other workers' rows keep their age."""
    manager = _manager()
    monkeypatch.setattr(cast_ledger, 'worker', lambda: 'other:2')
    _taken(fixtures.uuid(1))
    monkeypatch.setattr(cast_ledger, 'worker', lambda: 'stopped:1')
    _taken(fixtures.uuid(2))
    cast_ledger.hand_back_all()
    monkeypatch.setattr(cast_ledger, 'worker', lambda: 'taker:3')
    manager._take_over_casts(CTX)
    assert manager.driver.compute_rpcapi.casts == [('big', fixtures.uuid(2))]
    assert [r['taken_by'] for r in _rows()] == ['other:2']
