"""The soak's invariant checker (tools/soak/invariants.py) on small cases.

Each invariant is shown holding on a consistent inventory and breaking
on one that is not, so that the soak cannot pass because its checker
looks at nothing.  The inventory is the real schema on SQLite.
"""

import pytest
import sqlalchemy as sa

from scheduler.db import api as db_api
from scheduler.db import models
from tests.unit import fixtures
from tools.soak import invariants
from tools.soak import logs

H1 = ('h1', 'h1')
CAPS = {H1: invariants.Capacity(memory_mb=4096, vcpus=4, disk_gb=100,
                                real_disk_gb=50)}
GRACE = 5


@pytest.fixture
def engine(tmp_path):
    fixtures.memory_inventory(url='sqlite:///%s' % (tmp_path / 'inv.db'))
    yield db_api.get_engine()
    db_api.reset_engine()


def _place(engine, uuid, memory_mb=1024, vcpus=1, disk_gb=20,
           pending=False, host='h1'):
    with engine.begin() as conn:
        conn.execute(sa.insert(models.Instance).values(
            instance_uuid=uuid, host=host, nodename=host,
            memory_mb=memory_mb, vcpus=vcpus, disk_gb=disk_gb,
            status='claimed' if pending else 'active', pending=pending))


def _usage(engine, reported=(0, 0, 0), claimed=(0, 0, 0, 0), host='h1'):
    with engine.begin() as conn:
        conn.execute(sa.delete(models.NodeUsage))
        conn.execute(sa.insert(models.NodeUsage).values(
            host=host, nodename=host, reported_memory_mb=reported[0],
            reported_vcpus=reported[1], reported_disk_gb=reported[2],
            reported_instances=0, claimed_memory_mb=claimed[0],
            claimed_vcpus=claimed[1], claimed_disk_gb=claimed[2],
            claimed_instances=claimed[3], generation=0, seq=0))


def _consistent(engine):
    """h1: one active and one pending instance, usage saying so."""
    _place(engine, fixtures.uuid(1))
    _place(engine, fixtures.uuid(2), pending=True)
    _usage(engine, reported=(1024, 1, 20), claimed=(1024, 1, 20, 1))


def _verdict(checker) -> dict:
    return {name: held for name, held, _line in checker.results()}


def _check(engine, evidence=None, at=100.0, checker=None):
    checker = checker or invariants.Checker(CAPS, grace=GRACE)
    checker.sample(invariants.read_snapshot(engine, at),
                   evidence or invariants.Evidence())
    return checker


def test_a_consistent_inventory_holds_everything(engine):
    _consistent(engine)
    evidence = invariants.Evidence(
        told={fixtures.uuid(1): ('h1', 'h1', 90.0)},
        calls=[invariants.Call(10, 12, 10, 'ok'),
               invariants.Call(20, 21, 10, 'NoValidHost')],
        casts=[invariants.Cast('run_instance', fixtures.uuid(1), 'h1', 91)],
        events=[invariants.Event('started', fixtures.uuid(1), 'h1', 92)],
        exits=[('sched-0.g1', 0)], reloads=[('sched-0', [10, 11], [10, 11])])
    checker = _check(engine, evidence)
    checker.finish(evidence, drained_before=200)
    lines = checker.results()
    assert all(held for _n, held, _l in lines), lines
    assert [line.split()[0] for _n, _h, line in lines] == ['HELD'] * len(
        invariants.INVARIANTS)


def test_ram_over_the_limit_counts_pending_and_active(engine):
    _consistent(engine)
    _place(engine, fixtures.uuid(3), memory_mb=2560, pending=True)
    _usage(engine, reported=(1024, 1, 20), claimed=(3584, 2, 40, 2))
    verdict = _verdict(_check(engine))
    assert verdict['capacity'] is False
    assert verdict['usage-rows'] is True
    # The example says how much of it is rows of ended instances.
    ended = invariants.Evidence(events=[invariants.Event(
        'terminated', fixtures.uuid(3), 'h1', 50.0)])
    line = _check(engine, ended).results()[0][2]
    assert 'RAM 4608 > 4096' in line
    assert '2560 of it for ended instances' in line


def test_real_disk_binds_below_the_overcommitted_disk(engine):
    _consistent(engine)
    _place(engine, fixtures.uuid(3), disk_gb=20)
    _usage(engine, reported=(2048, 2, 40), claimed=(1024, 1, 20, 1))
    checker = _check(engine)
    verdict = _verdict(checker)
    assert verdict['real-disk'] is False   # 60 GB on 50 GB real
    assert verdict['capacity'] is True     # within 100 GB x ratio
    assert '60 GB placed on 50 GB real' in checker.results()[1][2]


def test_claimed_usage_must_equal_the_pending_rows(engine):
    _consistent(engine)
    _usage(engine, reported=(1024, 1, 20), claimed=(0, 0, 0, 0))
    assert _verdict(_check(engine))['usage-rows'] is False


def test_usage_below_its_placements_breaks_only_past_the_grace(engine):
    _consistent(engine)
    _usage(engine, reported=(0, 0, 0), claimed=(1024, 1, 20, 1))
    checker = _check(engine, at=100.0)
    checker = _check(engine, at=100.0 + GRACE - 1, checker=checker)
    assert _verdict(checker)['usage-rows'] is True
    checker = _check(engine, at=100.0 + GRACE + 1, checker=checker)
    assert _verdict(checker)['usage-rows'] is False


def test_told_host_must_be_the_inventory_host(engine):
    _consistent(engine)
    evidence = invariants.Evidence(told={
        fixtures.uuid(1): ('h2', 'h2', 50.0)})
    assert _verdict(_check(engine, evidence))['told'] is False


def test_a_success_missing_from_the_inventory_breaks(engine):
    _consistent(engine)
    missing = fixtures.uuid(9)
    evidence = invariants.Evidence(told={missing: ('h1', 'h1', 50.0)})
    # Judged at the end, when the service logs are read.
    checker = _check(engine, evidence)
    assert _verdict(checker)['told'] is True
    checker.finish(evidence, drained_before=100)
    assert _verdict(checker)['told'] is False
    # Unless the compute terminated it since.
    evidence.events.append(invariants.Event('terminated', missing, 'h1',
                                            60.0))
    checker = _check(engine, evidence)
    checker.finish(evidence, drained_before=100)
    assert _verdict(checker)['told'] is True


def test_a_placement_outliving_its_instance(engine):
    _consistent(engine)
    gone = invariants.Event('terminated', fixtures.uuid(1), 'h1', 90.0)
    evidence = invariants.Evidence(events=[gone])
    assert _verdict(_check(engine, evidence, at=93.0))['orphans'] is True
    assert _verdict(_check(engine, evidence, at=99.0))['orphans'] is False
    # A fault in between: the grace runs from its end ...
    evidence.faults.append(invariants.Fault('dbcut', 'proxy', 91.0, 96.0))
    assert _verdict(_check(engine, evidence, at=99.0))['orphans'] is True
    checker = _check(engine, evidence, at=102.0)
    assert _verdict(checker)['orphans'] is False
    assert (checker.orphans_now, checker.orphans_now_in_fault) == (1, 0)
    # ... and a fault still going on has no end yet.
    evidence.faults[0].end = float('inf')
    assert _verdict(_check(engine, evidence, at=120.0))['orphans'] is True


def test_a_reload_or_a_service_restart_does_not_delay_the_orphans(engine):
    """Only faults that keep the news from the inventory extend the
    grace: the other service is up through a SIGTERM, and a SIGHUP
    reloads in place."""
    _consistent(engine)
    gone = invariants.Event('terminated', fixtures.uuid(1), 'h1', 90.0)
    for kind in ('sighup', 'sigterm'):
        evidence = invariants.Evidence(events=[gone], faults=[
            invariants.Fault(kind, 'sched-0', 91.0, 96.0)])
        assert _verdict(_check(engine, evidence, at=99.0))['orphans'] is False
    evidence = invariants.Evidence(events=[gone], faults=[
        invariants.Fault('kill9', 'sched-0 worker 1', 91.0, 96.0)])
    assert _verdict(_check(engine, evidence, at=99.0))['orphans'] is True


def test_an_instance_started_on_two_hosts(engine):
    evidence = invariants.Evidence(events=[
        invariants.Event('started', fixtures.uuid(1), 'h1', 1),
        invariants.Event('started', fixtures.uuid(1), 'h2', 2)])
    checker = invariants.Checker(CAPS, grace=GRACE)
    checker.finish(evidence, drained_before=100)
    assert _verdict(checker)['unique'] is False


def test_calls_past_their_timeout_and_errors_without_a_fault():
    evidence = invariants.Evidence(
        calls=[invariants.Call(10, 21.5, 10, 'MessagingTimeout'),
               invariants.Call(50, 51, 10, 'RemoteError(OperationalError)')],
        faults=[invariants.Fault('broker', 'n', 9, 30)])
    checker = invariants.Checker(CAPS, grace=GRACE)
    checker.finish(evidence, drained_before=100)
    verdict = _verdict(checker)
    assert verdict['call-timeout'] is False
    assert verdict['calls-no-fault'] is False
    # The same error during the fault is no break.
    evidence.calls.pop()
    checker = invariants.Checker(CAPS, grace=GRACE)
    checker.finish(evidence, drained_before=100)
    assert _verdict(checker)['calls-no-fault'] is True


def test_casts_served_refused_or_lost():
    served, refused, lost, logged = (fixtures.uuid(n) for n in (1, 2, 3, 4))
    evidence = invariants.Evidence(
        casts=[invariants.Cast('terminate_instance', served, 'h1', 10),
               invariants.Cast('run_instance', refused, 'h1', 10,
                               refused='MessageUndeliverable'),
               invariants.Cast('schedule_run_instance', logged, None, 10)],
        events=[invariants.Event('terminated', served, 'h1', 11)],
        logged_uuids={logged})
    checker = invariants.Checker(CAPS, grace=GRACE)
    checker.finish(evidence, drained_before=100)
    assert _verdict(checker)['casts'] is True
    evidence.casts.append(invariants.Cast('terminate_instance', lost, 'h1',
                                          20))
    checker = invariants.Checker(CAPS, grace=GRACE)
    checker.finish(evidence, drained_before=100)
    assert _verdict(checker)['casts'] is False


def test_unclean_stops_new_workers_on_sighup_and_log_errors_break():
    evidence = invariants.Evidence(
        exits=[('sched-0.g1', 0), ('sched-1.g1', None)],
        reloads=[('sched-0', [10], [10, 12]),
                 ('sched-1', [20, 21], [30, 31])],
        log_lines=[invariants.LogLine('sched-0.g1.log', 50.0, 'traceback',
                                      'DB gone')] * 2
        + [invariants.LogLine('sched-0.g1.log', 50.0, 'ERROR',
                              'DB gone')] * 5)
    checker = invariants.Checker(CAPS, grace=GRACE)
    checker.finish(evidence, drained_before=100)
    verdict = _verdict(checker)
    assert verdict['clean-stop'] is False
    assert verdict['reload'] is False
    assert verdict['logs'] is False
    line = [x for n, _h, x in checker.results() if n == 'reload'][0]
    assert '1 violation(s)' in line and 'sched-1' in line
    line = [x for n, _h, x in checker.results() if n == 'logs'][0]
    assert line.startswith('BROKEN') and '7 violation(s)' in line
    assert '2 tracebacks and 5 ERROR lines no fault explains' in line


#: What oslo.messaging's rabbit driver logs while it cannot reach the
#: broker, as ``logs.scan_service_logs`` normalises it.
UNREACHABLE = ('[<uuid>] AMQP server on N.N.N.N:N is unreachable: [Errno N] '
               'ECONNREFUSED. Trying again in N seconds.')
RETRYING = ('Connection failed: [Errno N] ECONNREFUSED (retrying in N.N '
            'seconds): ConnectionRefusedError: [Errno N] ECONNREFUSED')


def _logs_line(lines, faults=(), expiry_window=(0.0, 0.0)):
    checker = invariants.Checker(CAPS, grace=GRACE, settle=5,
                                 expiry_window=expiry_window)
    checker.finish(invariants.Evidence(log_lines=lines, faults=list(faults)),
                   drained_before=100)
    return [(held, x) for n, held, x in checker.results() if n == 'logs'][0]


def _err(at, message=UNREACHABLE, kind='ERROR'):
    return invariants.LogLine('sched-0.g1.log', at, kind, message)


def test_broker_errors_while_the_broker_is_down_are_set_apart():
    broker = invariants.Fault('broker', 'soak@localhost', 100.0, 110.0)
    lost = ('Build of instance <uuid> lost: no compute took it (tried '
            'big-N, big-N); its claim is released, the caller must build '
            'it again')
    held, line = _logs_line([_err(101), _err(109, RETRYING), _err(114),
                             _err(110.5, lost)], [broker])
    assert held, line
    assert '4 ERROR lines expected: broker down' in line
    held, line = _logs_line([_err(130, lost)], [broker])
    assert not held


EXPIRED = ('Claim of instance <uuid> on big-N expired (node big-N): the '
           'compute never reported it (build lost?); its resources are '
           'released')


@pytest.mark.parametrize('kind', ['broker', 'kill9'])
def test_a_lost_builds_claim_expiring_after_its_fault_is_set_apart(kind):
    """A build the broker or a killed worker lost is named when its claim
    expires, a service_down_time later: explained by that fault then,
    and only then."""
    fault = invariants.Fault(kind, 'x', 100.0, 110.0)
    window = (30.0, 45.0)
    held, line = _logs_line([_err(135, EXPIRED), _err(158, EXPIRED)],
                            [fault], expiry_window=window)
    assert held, line
    assert '2 ERROR lines expected: build lost with' in line
    # Too early to be that fault's, too late, or after another fault.
    for at in (105, 170):
        held, _line = _logs_line([_err(at, EXPIRED)], [fault],
                                 expiry_window=window)
        assert not held, at
    held, _line = _logs_line(
        [_err(135, EXPIRED)], [invariants.Fault('sighup', 'x', 100, 110)],
        expiry_window=window)
    assert not held


def test_log_errors_no_active_fault_explains_still_break():
    broker = invariants.Fault('broker', 'soak@localhost', 100.0, 110.0)
    dbcut = invariants.Fault('dbcut', 'proxy', 200.0, 210.0)
    # After the broker is back and the grace is over.
    held, line = _logs_line([_err(101), _err(116)], [broker])
    assert not held
    assert '1 ERROR lines expected: broker down' in line
    assert '0 tracebacks and 1 ERROR lines no fault explains' in line
    # During a fault of another kind: a database cut explains no
    # broker error (nor anything else yet).
    held, _line = _logs_line([_err(205)], [broker, dbcut])
    assert not held
    # Another message while the broker is down.
    held, line = _logs_line([_err(105, 'Something else broke')], [broker])
    assert not held and 'Something else broke' in line
    # A traceback, whenever it comes.
    held, line = _logs_line([_err(105, UNREACHABLE, 'traceback')], [broker])
    assert not held and '1 tracebacks' in line
    # With no time (an unstamped line of a daemon's stderr).
    held, _line = _logs_line([_err(None)], [broker])
    assert not held


def test_service_logs_scanned_with_the_time_of_each_record(tmp_path):
    (tmp_path / 'sched-0.g1.log').write_text(
        '2026-11-27 10:14:11.521 15858 INFO scheduler.service [-] up\n'
        '2026-11-27 10:14:11.522 15858 ERROR oslo.messaging._drivers.'
        'impl_rabbit [-] [46bc2187-df10-4da1-873a-d04eb687cbd5] AMQP '
        'server on 127.0.0.1:51511 is unreachable: [Errno 111] '
        'ECONNREFUSED. Trying again in 1 seconds.\n'
        '2026-11-27 10:14:15.000 15858 ERROR scheduler.manager [req-1 - - '
        '- - -] Failed on 0e8b8c57-5dc2-4d6e-9c43-3a0bd17f0b5c\n'
        '2026-11-27 10:14:15.001 15858 ERROR scheduler.manager Traceback '
        '(most recent call last):\n'
        '2026-11-27 10:14:15.001 15858 ERROR scheduler.manager   File "x"\n')
    (tmp_path / 'sim.log').write_text(
        '2026-11-27 10:14:15.000 1 ERROR x [-] not a service\n')
    lines, uuids = logs.scan_service_logs(str(tmp_path), 'sched-')
    assert [(x.kind, x.message) for x in lines] == [
        ('ERROR', UNREACHABLE), ('ERROR', 'Failed on <uuid>'),
        ('traceback', 'Failed on <uuid>'), ('ERROR', 'Failed on <uuid>')]
    assert lines[0].at == logs.stamp('2026-11-27 10:14:11.522 1 E ')[0]
    # The traceback's lines carry the time of their record.
    assert lines[1].at == lines[2].at == lines[3].at
    assert uuids == {'0e8b8c57-5dc2-4d6e-9c43-3a0bd17f0b5c',
                     '46bc2187-df10-4da1-873a-d04eb687cbd5'}


def _expired(uuid, at):
    """The ERROR a worker logs when ``uuid``'s claim expires."""
    return invariants.LogLine('sched-0.g1.log', at, 'ERROR', EXPIRED,
                              uuids=(uuid,))


def _lost_with_the_broker(lines, told=None, casts=(), events=()):
    """A checker that sampled an inventory without the builds ``told``
    and finished with ERROR ``lines`` after a broker stop at 100-110."""
    checker = invariants.Checker(CAPS, grace=GRACE, settle=5,
                                 expiry_window=(30.0, 45.0))
    evidence = invariants.Evidence(
        told=dict(told or {}), casts=list(casts), events=list(events),
        faults=[invariants.Fault('broker', 'soak@localhost', 100.0, 110.0)],
        log_lines=list(lines))
    checker.sample(invariants.Snapshot(at=150.0, placements=[], usage=[]),
                   evidence)
    checker.finish(evidence, drained_before=200)
    return {name: (held, line) for name, held, line in checker.results()}


def test_a_build_the_broker_lost_is_set_apart_once_its_claim_expires():
    """A run_instance cast the broker lost from a compute's transient
    queue: the caller was told the host, the build never started, and
    the service names it when its claim expires.  Told and cast are
    accounted for by that line, and by nothing else."""
    lost, silent = fixtures.uuid(5), fixtures.uuid(6)
    told = {lost: ('h1', 'h1', 104.0)}
    casts = [invariants.Cast('run_instance', lost, 'h1', 104.0)]
    verdict = _lost_with_the_broker([_expired(lost, 140.0)], told, casts)
    assert verdict['told'][0], verdict['told'][1]
    assert verdict['casts'][0], verdict['casts'][1]
    assert '1 build lost with a fault' in verdict['told'][1]
    assert '1 run_instance cast(s) lost with a fault' in verdict['casts'][1]
    # Not named by the service: both break.
    told[silent] = ('h1', 'h1', 104.0)
    casts.append(invariants.Cast('run_instance', silent, 'h1', 104.0))
    verdict = _lost_with_the_broker([_expired(lost, 140.0)], told, casts)
    assert not verdict['told'][0] and silent in verdict['told'][1]
    assert not verdict['casts'][0] and silent in verdict['casts'][1]
    # Named, but at a time no fault explains (the line breaks logs too).
    verdict = _lost_with_the_broker([_expired(lost, 190.0)],
                                    {lost: told[lost]}, casts[:1])
    assert not verdict['told'][0]
    assert not verdict['casts'][0]


def test_a_terminate_cast_into_a_broker_stop_is_set_apart():
    """A terminate_instance cast to a compute while the broker stops is
    the broker's to lose (transient queues), and no scheduler sees it:
    counted apart.  The same loss with no broker fault breaks."""
    during = invariants.Cast('terminate_instance', fixtures.uuid(7), 'h1',
                             103.0)
    verdict = _lost_with_the_broker([], casts=[during])
    assert verdict['casts'][0], verdict['casts'][1]
    assert '1 terminate cast(s) sent into a broker stop' in \
        verdict['casts'][1]
    later = invariants.Cast('terminate_instance', fixtures.uuid(8), 'h1',
                            150.0)
    verdict = _lost_with_the_broker([], casts=[during, later])
    assert not verdict['casts'][0]
    assert fixtures.uuid(8) in verdict['casts'][1]


def test_the_claim_of_a_call_never_answered_expiring_is_set_apart():
    """A call that ended without its answer (a timeout: the worker was
    killed after its claim, or the reply was lost): the caller, never
    told, builds nothing, and the claim expires whenever later faults
    let the service see it.  That expiry is the designed outcome, set
    apart by the call's uuids, not by a time window; any other
    instance's expiry still breaks."""
    unanswered, other = fixtures.uuid(7), fixtures.uuid(8)
    checker = invariants.Checker(CAPS, grace=GRACE, settle=5,
                                 expiry_window=(30.0, 45.0))
    evidence = invariants.Evidence(
        log_lines=[_expired(unanswered, 400.0)],
        unanswered={unanswered})
    checker.finish(evidence, drained_before=100)
    held, line = [(h, x) for n, h, x in checker.results() if n == 'logs'][0]
    assert held, line
    assert '1 ERROR lines expected: claim of a call never answered' in line
    evidence.log_lines.append(_expired(other, 400.0))
    checker = invariants.Checker(CAPS, grace=GRACE, settle=5,
                                 expiry_window=(30.0, 45.0))
    checker.finish(evidence, drained_before=100)
    held, line = [(h, x) for n, h, x in checker.results() if n == 'logs'][0]
    assert not held, line
