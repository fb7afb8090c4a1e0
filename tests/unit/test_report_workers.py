"""``[scheduler] report_workers``: the services (as workers of one
service: the same host, topic and state directory) consume the report
queues only while they hold a turn (``scheduler.report_consumers``),
take a free one over, and give theirs back when they stop.

Real services on the in-process ``fake://`` bus under the threading
runtime.  The test process runs no event hub for oslo.service's timers:
the tests run the timer's step (``_mind_report_turn``) themselves, and
check that ``start()`` sets the timer.
"""

import datetime

import pytest

from scheduler import concurrency
from scheduler import context
from scheduler import report_consumers
from scheduler import rpc
from scheduler import service as service_mod
from tests.unit import fixtures


@pytest.fixture
def workers(inventory, fake_transport, monkeypatch, conf):
    """Start "workers" of one service; each stopped after the test."""
    monkeypatch.setattr(concurrency, 'EXECUTOR', 'threading')
    conf.config(weight_classes=['RAMWeigher'],
                enabled_filters=fixtures.CORE_FILTERS,
                group='filter_scheduler')
    topics = {}
    real = rpc.get_server

    def recording(target, *args, **kwargs):
        server = real(target, *args, **kwargs)
        topics[id(server)] = target.topic
        return server
    monkeypatch.setattr(rpc, 'get_server', recording)
    started = []

    def start(report_workers=1):
        conf.config(report_workers=report_workers, group='scheduler')
        svc = service_mod.Service.create(transport=fake_transport)
        svc.timers = []
        monkeypatch.setattr(svc.tg, 'add_timer',
                            lambda *args, **kwargs: svc.timers.append(
                                (args, kwargs)))
        svc.start()
        started.append(svc)
        return svc

    start.topics = topics
    yield start
    for svc in started:
        svc.stop()


def _report_servers(svc, topics) -> int:
    """How many of ``svc``'s running servers consume report queues."""
    wanted = {rpc.intake_topic(), rpc.alive_topic()}
    return sum(1 for server in list(svc.servers)
               if topics.get(id(server)) in wanted)


def test_start_sets_the_timer_that_minds_the_turn(workers):
    svc = workers()
    assert svc.timers == [((report_consumers.RETRY_EVERY,
                            svc._mind_report_turn),
                           {'initial_delay': report_consumers.RETRY_EVERY})]
    assert workers(0).timers == []


def test_one_worker_consumes_the_report_queues(workers):
    first, second = workers(), workers()
    assert _report_servers(first, workers.topics) == 2
    assert _report_servers(second, workers.topics) == 0
    # Every worker still serves requests, the 1.4 fanout and operators.
    assert len(second.servers) == 3
    # Trying again does not give the second one a turn.
    second._mind_report_turn()
    assert _report_servers(second, workers.topics) == 0


def test_every_worker_consumes_them_with_zero(workers):
    first, second = workers(0), workers(0)
    assert first.turns is None and second.turns is None
    assert _report_servers(first, workers.topics) == 2
    assert _report_servers(second, workers.topics) == 2


def test_as_many_consumers_as_report_workers(workers):
    running = [workers(2) for _ in range(3)]
    assert [_report_servers(svc, workers.topics) for svc in running] == [
        2, 2, 0]


def test_a_stopped_consumer_gives_its_turn_to_another(workers):
    first, second = workers(), workers()
    first.stop()
    assert not first.turns.held and first.servers == []
    second._mind_report_turn()
    assert _report_servers(second, workers.topics) == 2
    assert second.turns.held


def test_a_reload_keeps_the_turn_and_the_servers(workers):
    first = workers()
    servers = list(first.servers)
    first.reset()
    first._mind_report_turn()
    assert first.turns.held and first.servers == servers


def test_a_worker_stopping_takes_no_turn(workers):
    first, second = workers(), workers()
    with second._lifecycle:
        second._stop_asked = True
    first.stop()
    second._mind_report_turn()
    assert not second.turns.held
    assert _report_servers(second, workers.topics) == 0


def test_report_servers_that_cannot_start_free_the_turn(workers,
                                                        monkeypatch):
    first, second = workers(), workers()
    failing = []

    def refusing():
        failing.append(1)
        raise RuntimeError('no')
    monkeypatch.setattr(second, '_report_servers',
                        lambda: [type('S', (), {'start': staticmethod(
                            refusing)})()])
    first.stop()
    second._mind_report_turn()
    assert failing and not second.turns.held
    assert _report_servers(second, workers.topics) == 0
    # The next step tries again.
    second._mind_report_turn()
    assert len(failing) == 2


def test_the_others_hear_the_consumer_s_report_lag(workers, monkeypatch):
    first, second = workers(), workers()
    monkeypatch.setattr(first.manager.reports.lag, 'current',
                        lambda stale_after: 42.0)
    first._mind_report_turn()
    second._mind_report_turn()
    assert second.manager.reports.lag.current(stale_after=60) == 42.0


def test_no_probe_of_the_broker_without_the_turn_while_the_holder_hears(
        workers, monkeypatch):
    """A worker without a report turn opens no AMQP connection of its
    own to probe the broker while the holder says it hears."""
    probes = []
    monkeypatch.setattr(rpc, 'broker_reachable',
                        lambda timeout: probes.append(1) or True)
    first, second = workers(), workers()
    ctxt = context.get_admin_context()
    # The holder takes reports (or its own probe answers).
    first.manager.reports.lag.note(datetime.datetime.now(
        datetime.timezone.utc))
    first._mind_report_turn()
    second._mind_report_turn()
    second.manager._watch_hearing(ctxt)
    assert probes == []
    # Without the holder's word (here: a worker of another service, or
    # the holder's record gone), it probes as before.
    second.manager.reports.lag.holders_heard_at = None
    second.manager._watch_hearing(ctxt)
    assert probes == [1]


def test_no_state_directory_means_every_worker_consumes(workers, conf,
                                                        tmp_path):
    blocker = tmp_path / 'not-a-directory'
    blocker.write_text('')
    conf.config(state_path=str(blocker))
    first, second = workers(), workers()
    assert first.turns is None and second.turns is None
    assert _report_servers(second, workers.topics) == 2


def test_the_request_topic_is_consumed_only_after_the_reports_fanout(
        workers):
    """A compute without ``[upgrade_levels] scheduler`` takes a request
    topic consumed without the 1.4 reports topic for a scheduler older
    than 1.4, and stops sending (``SchedulerTooOld``): a worker starting
    must never show that shape, so its request server starts last."""
    svc = workers()
    order = [workers.topics.get(id(server)) for server in svc.servers]
    assert order.index(rpc.reports_topic()) < order.index(svc.topic)
    assert order.index(svc.topic) == 2
