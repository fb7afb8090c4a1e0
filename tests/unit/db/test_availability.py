"""Database outages told once, typed for callers; the connection budget."""

import logging
import sqlite3
import sys
import time

from oslo_db import exception as db_exc
import pytest
import sqlalchemy as sa

from scheduler import context
from scheduler.db import availability
from scheduler.db import engine
from scheduler import exception
from scheduler import manager as manager_mod

CTX = context.get_admin_context()


class _PgError(Exception):
    """Stands in for psycopg2's errors: a ``pgcode`` attribute."""

    def __init__(self, message, pgcode):
        super().__init__(message)
        self.pgcode = pgcode


class OperationalError(_PgError):
    pass


class _MyError(Exception):
    """Stands in for PyMySQL's: ``args[0]`` is the error number."""


class InterfaceError(_MyError):
    pass


def _wrapped(orig, invalidated=False):
    return sa.exc.OperationalError('SELECT 1', {}, orig,
                                   connection_invalidated=invalidated)


@pytest.mark.parametrize('error', [
    db_exc.DBConnectionError('gone'),
    sa.exc.TimeoutError('QueuePool limit reached'),
    _wrapped(OperationalError('server closed the connection', None)),
    _wrapped(OperationalError('too many clients already', '53300')),
    _wrapped(Exception('anything'), invalidated=True),
    db_exc.DBError(_wrapped(OperationalError('refused', None))),
    InterfaceError(2013, 'Lost connection'),
    sqlite3.OperationalError('database is locked'),
    exception.InventoryUnavailable(reason='x'),
])
def test_what_is_an_outage(error):
    assert availability.is_outage(error)


@pytest.mark.parametrize('error', [
    db_exc.DBDuplicateEntry(),
    db_exc.DBDeadlock(),
    _wrapped(OperationalError('syntax error', '42601')),
    sqlite3.OperationalError('no such table: hosts'),
    InterfaceError(1064, 'You have an error in your SQL syntax'),
    ValueError('not a database error'),
])
def test_what_is_not_an_outage(error):
    assert not availability.is_outage(error)


@pytest.fixture
def outage_over():
    yield
    availability.available(time.monotonic() + 1)


def test_an_outage_is_told_once_and_its_end_once(caplog, outage_over):
    caplog.set_level(logging.INFO, logger='scheduler.db.availability')
    began = time.monotonic()
    error = _wrapped(OperationalError('server closed the connection', None))
    typed = availability.unavailable(error)
    assert isinstance(typed, exception.InventoryUnavailable)
    assert 'OperationalError: server closed the connection' in str(typed)
    for _ in range(50):
        availability.unavailable(error)
        availability.count('select_destinations')
    availability.count('saving host reports')
    # Work that began before the outage does not end it.
    availability.available(began)
    assert availability._OUTAGE.since is not None
    availability.available(time.monotonic())
    assert availability._OUTAGE.since is None
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2, lines
    assert lines[0].startswith('Inventory database unavailable: '
                               'select_destinations failed '
                               '(OperationalError: server closed')
    assert 'Inventory database is back after' in lines[1]
    assert ('51 operation(s) failed or were put off meanwhile '
            '(select_destinations: 50, saving host reports: 1)') in lines[1]


def test_work_that_met_the_cut_but_fails_after_the_end_opens_no_outage(
        caplog, outage_over):
    """Under load a failure can come in just after another worker's
    commit ended the outage (a connect refused before the server came
    back, logged late): it belongs to the outage that ended, whose line
    is written, and must not begin a second one."""
    caplog.set_level(logging.INFO, logger='scheduler.db.availability')
    error = _wrapped(OperationalError('server closed the connection', None))
    straggler = time.monotonic()
    availability.unavailable(error, straggler)
    availability.count('select_destinations')
    availability.available(time.monotonic())
    typed = availability.unavailable(error, straggler)
    assert isinstance(typed, exception.InventoryUnavailable)
    availability.count('saving host reports (kept, retried)')
    assert availability._OUTAGE.since is None
    # Work that began after the end does begin a new outage.
    availability.unavailable(error, time.monotonic())
    availability.count('select_destinations')
    assert availability._OUTAGE.since is not None
    lines = [r.getMessage() for r in caplog.records]
    assert [line.split(':')[0] for line in lines] == [
        'Inventory database unavailable',
        'Inventory database is back after 0.0 s; 1 operation(s) failed or '
        'were put off meanwhile (select_destinations',
        'Inventory database unavailable'], lines


def test_a_lost_connection_returned_to_its_pool_logs_no_traceback():
    lost = _wrapped(OperationalError('server closed the connection', None))
    records = []
    for error in (lost, ValueError('a bug')):
        try:
            raise error
        except Exception:
            records.append(logging.LogRecord(
                'sqlalchemy.pool.impl.QueuePool', logging.ERROR, __file__,
                1, 'Exception during reset or similar', None,
                sys.exc_info()))
    check = availability.LostConnectionFilter().filter
    assert [check(r) for r in records] == [False, True]


def test_nothing_is_logged_without_an_outage(caplog):
    availability.available(time.monotonic())
    availability.count('select_destinations')
    assert not caplog.records


# -- the connection budget ---------------------------------------------

def test_the_default_budget_is_ten_a_worker_kept_open(conf):
    # With 5 + 5 a busy worker closed every connection beyond five as
    # it was returned and opened a new one at the next peak: the whole
    # budget is the pool now.
    assert engine.connection_budget() == 10
    assert engine.pool_sizes() == (10, 0)


def test_the_budget_is_bounded_by_the_requests_served_at_once(conf):
    conf.config(max_pool_size=20, max_overflow=50, group='database')
    conf.config(executor_thread_pool_size=8)
    assert engine.connection_budget() == 8
    assert engine.pool_sizes() == (8, 0)
    conf.config(max_pool_size=5, max_overflow=-1, group='database')
    assert engine.connection_budget() == 8
    assert engine.pool_sizes() == (5, 3)


# -- the manager --------------------------------------------------------

class _AwayHosts:
    """A host manager whose database is away until ``back``."""

    def __init__(self):
        self.back = False
        self.applied: list = []

    def ensure_loaded(self):
        """Loaded at start-up (before the outage)."""

    def update_instance_info(self, host, uuids):
        if not self.back:
            raise availability.unavailable(
                db_exc.DBConnectionError('refused'))
        self.applied.append(('update', host, tuple(uuids)))

    def update_instances_info(self, news):
        if not self.back:
            raise availability.unavailable(
                db_exc.DBConnectionError('refused'))
        self.applied.append(('updates', tuple((host, tuple(uuids))
                                              for host, uuids in news)))

    def delete_instance_info(self, host, uuid):
        if not self.back:
            raise availability.unavailable(
                db_exc.DBConnectionError('refused'))
        self.applied.append(('delete', host, uuid))

    def delete_instances_info(self, deletions):
        if not self.back:
            raise availability.unavailable(
                db_exc.DBConnectionError('refused'))
        self.applied.append(('deletes', tuple(deletions)))


class _Driver:
    def __init__(self, hosts):
        self.host_manager = hosts

    def select_destinations(self, *args, **kwargs):
        raise db_exc.DBConnectionError('refused')


def test_instance_news_is_kept_and_applied_in_order(outage_over):
    hosts = _AwayHosts()
    manager = manager_mod.SchedulerManager(driver=_Driver(hosts))
    manager.reports.update_instance_info(CTX, 'h1', ['a'])
    manager.reports.delete_instance_info(CTX, 'h1', 'a')
    manager.reports.replay_deferred()
    assert hosts.applied == []
    hosts.back = True
    manager.reports.update_instance_info(CTX, 'h1', ['b'])
    assert hosts.applied == [('update', 'h1', ('a',)),
                             ('delete', 'h1', 'a'),
                             ('update', 'h1', ('b',))]


def test_news_of_other_hosts_is_not_kept_behind_a_replay(outage_over):
    """News arriving while the kept news is replayed waits only when it
    is about a host with news kept: behind one queue for every host,
    a replay one by one never caught up with the news coming in."""
    hosts = _AwayHosts()
    manager = manager_mod.SchedulerManager(driver=_Driver(hosts))
    manager.reports.update_instance_info(CTX, 'h1', ['a'])
    manager.reports.update_instance_info(CTX, 'h1', ['b'])
    hosts.back = True
    arrived = []
    applied = hosts.applied

    class _Recording(list):
        def append(self, item):
            # While the replay applies h1's first news, news of h2 and
            # of h1 come in.
            if not arrived:
                arrived.append(item)
                manager.reports.delete_instance_info(CTX, 'h2', 'x')
                manager.reports.delete_instance_info(CTX, 'h1', 'a')
            super().append(item)

    hosts.applied = _Recording(applied)
    manager.reports.replay_deferred()
    assert hosts.applied == [('delete', 'h2', 'x'),
                             ('update', 'h1', ('a',)),
                             ('update', 'h1', ('b',)),
                             ('delete', 'h1', 'a')]
    # Nothing is left kept: the next news of h1 goes straight through.
    manager.reports.delete_instance_info(CTX, 'h1', 'b')
    assert hosts.applied[-1] == ('delete', 'h1', 'b')
    assert not manager.reports._deferred


def test_kept_deletions_of_several_hosts_are_applied_together(outage_over):
    """One news per host at a time, the deletions of those together:
    each host's news stays in order, and the replay is not one
    transaction per news."""
    hosts = _AwayHosts()
    manager = manager_mod.SchedulerManager(driver=_Driver(hosts))
    news = manager.reports
    news.delete_instance_info(CTX, 'h1', 'a')
    news.update_instance_info(CTX, 'h1', ['b'])
    news.delete_instance_info(CTX, 'h2', 'c')
    news.update_instance_info(CTX, 'h3', ['d'])
    news.delete_instance_info(CTX, 'h1', 'b')
    news.delete_instance_info(CTX, 'h3', 'd')
    hosts.back = True
    news.replay_deferred()
    assert hosts.applied == [
        ('deletes', (('h1', 'a'), ('h2', 'c'))),
        ('update', 'h3', ('d',)),
        ('update', 'h1', ('b',)),     # the next wave: h1, h3
        ('delete', 'h3', 'd'),
        ('delete', 'h1', 'b')]        # and the last: h1
    assert not news._deferred and not news._kept_hosts


def test_a_refused_batch_of_deletions_is_applied_one_by_one(outage_over):
    hosts = _AwayHosts()
    manager = manager_mod.SchedulerManager(driver=_Driver(hosts))
    manager.reports.delete_instance_info(CTX, 'h1', 'a')
    manager.reports.delete_instance_info(CTX, 'h2', 'c')
    hosts.back = True

    def refused(deletions):
        raise ValueError('one of them is bad')

    hosts.delete_instances_info = refused
    manager.reports.replay_deferred()
    assert hosts.applied == [('delete', 'h1', 'a'), ('delete', 'h2', 'c')]
    assert not manager.reports._deferred


def test_a_caller_gets_inventory_unavailable(outage_over):
    from tests.unit import fixtures
    from tests.unit.test_manager import call
    manager = manager_mod.SchedulerManager(driver=_Driver(_AwayHosts()))
    with pytest.raises(exception.InventoryUnavailable):
        call(manager.select_destinations, spec_obj=fixtures.request(),
             instance_uuids=[fixtures.uuid(1)], return_objects=True)


def test_news_kept_is_applied_as_soon_as_the_database_is_back(outage_over):
    """The end of an outage starts the replay of the news kept during it
    (deleted instances free their hosts), without waiting for the next
    periodic run (``[scheduler] periodic_task_interval`` later)."""
    hosts = _AwayHosts()
    manager = manager_mod.SchedulerManager(driver=_Driver(hosts))
    manager.reports.delete_instance_info(CTX, 'h1', 'a')
    assert hosts.applied == []
    assert availability._OUTAGE.since is not None
    hosts.back = True
    availability.available(time.monotonic())
    deadline = time.monotonic() + 10
    while not hosts.applied and time.monotonic() < deadline:
        time.sleep(0.01)
    assert hosts.applied == [('delete', 'h1', 'a')]


def test_a_waves_builds_are_confirmed_in_one_write(outage_over):
    """Each host's oldest kept news together: the builds of a wave in one
    write, as its deletions, not one round trip each (a busy worker
    took seconds to free the hosts of the instances deleted meanwhile)."""
    hosts = _AwayHosts()
    manager = manager_mod.SchedulerManager(driver=_Driver(hosts))
    manager.reports.update_instance_info(CTX, 'h1', ['a'])
    manager.reports.update_instance_info(CTX, 'h2', ['b'])
    manager.reports.delete_instance_info(CTX, 'h1', 'a')
    manager.reports.delete_instance_info(CTX, 'h3', 'c')
    hosts.back = True
    manager.reports.replay_deferred()
    assert hosts.applied == [
        ('updates', (('h1', ('a',)), ('h2', ('b',)))),
        ('delete', 'h3', 'c'),
        ('delete', 'h1', 'a')]
