"""RabbitMQ restarted again and again under load (issue 29 items 1-2,
issue 28 item 6).

The test starts a RabbitMQ node of its own (``rabbit_node``; never the
shared broker) and, while a simulated fleet reports every second and
conductor-style callers call without a pause, stops and starts the
broker ``RESTARTS`` times, on the eventlet and on the threading
executor.  After every restart:

* the service saves host reports again (it froze after a restart:
  ``greenlet.error: Cannot switch to a different thread``);
* every call the callers made while the service was consuming is
  answered (a reply, or NoValidHost, which is a reply too) within its
  timeout: a live caller's reply must not be dropped because its reply
  queue came back a little after the service did;
* no call, whatever the broker does meanwhile, ends later than its
  timeout and a little slack (15 s for 10 s with threading before);

and at the end SIGTERM stops the service with status 0 within 10 s.
"""

import os
import signal
import sqlite3
import threading
import time
import uuid

import pytest

from scheduler import context
from scheduler import exception
from scheduler import rpcapi
from tests.functional import caller
from tests.functional import daemons
from tests.functional.test_scheduler_service import make_spec
from tests.functional.test_scheduler_service import wait_for_hosts

#: Broker restarts per executor (the environment may ask for more).
RESTARTS = int(os.environ.get('SCHEDULER_TEST_BROKER_RESTARTS', '10'))
#: Seconds the broker stays down, in turn: the longer the outage, the
#: further apart each party's reconnection attempts (1, 3, 5 ... s), and
#: the later a caller's reply queue may come back after the service.
DOWN_SECONDS = (2, 6)
#: Seconds of load between the service's recovery and the next stop.
STEADY_SECONDS = 1
#: The callers' timeout.
CALL_TIMEOUT = 10
#: What a call may take beyond its timeout on a busy machine (it took
#: five more seconds before).
SLACK = 2.5
HOSTS = 50
IN_PROCESS_CALLERS = 3
CHILD_CALLERS = 2


class Calls:
    """Every call's (start, end, outcome), from every caller."""

    def __init__(self):
        self._lock = threading.Lock()
        self.done: list = []
        #: (instance uuid, cast began, cast ended) of every build whose
        #: cast the broker took.
        self.builds: list = []
        self.stopping = threading.Event()

    def add(self, who: str, started: float, ended: float,
            outcome: str, took: float | None = None) -> None:
        """``took``: what the caller measured itself, if not
        ``ended - started`` (a child's first call waits for its start)."""
        with self._lock:
            self.done.append((who, started, ended, outcome,
                              ended - started if took is None else took))

    def snapshot(self) -> list:
        with self._lock:
            return list(self.done)


def _in_process_caller(calls: Calls, name: str) -> None:
    api = rpcapi.SchedulerAPI(timeout=CALL_TIMEOUT)
    ctxt = context.RequestContext(user_id=name, project_id='functional')
    while not calls.stopping.is_set():
        started = time.monotonic()
        try:
            api.select_destinations(ctxt, make_spec(ram=64))
            outcome = 'answered'
        except exception.NoValidHost:
            outcome = 'answered'
        except Exception as e:  # the outcome under test
            outcome = type(e).__name__
        calls.add(name, started, time.monotonic(), outcome)
        time.sleep(0.1)


def _builder(calls: Calls) -> None:
    """Builds through ``schedule_run_instance``: the computes' usage
    changes, so that the service applies usage reports while it claims.
    Every build whose cast the broker took is kept in ``calls.builds``
    (with when its cast began), to be accounted for at the end."""
    ctxt = context.RequestContext(user_id='builder', project_id='functional')
    api = rpcapi.SchedulerAPI(timeout=CALL_TIMEOUT)
    while not calls.stopping.is_set():
        build = str(uuid.uuid4())
        started = time.monotonic()
        try:
            api.schedule_run_instance(ctxt, make_spec(ram=64), [build])
        except Exception:  # the sender knows: not a silent loss
            pass
        else:
            with calls._lock:
                calls.builds.append((build, started, time.monotonic()))
        time.sleep(0.2)


#: What the service logs about a build it could not place or deliver:
#: an ERROR naming a build no compute took, a WARNING naming one no
#: host fits (an answer, not a loss).
NAMED_BUILD = ('Build of instance %s lost', 'Could not schedule instance %s',
               'Failed to schedule instance %s')


def _unaccounted_builds(builds: list, service_log: str,
                        sim_log: str) -> list:
    """The builds neither started by a compute nor named by the
    service."""
    return [b for b in builds
            if 'started instance %s' % b[0] not in sim_log
            and not any(line % b[0] in service_log for line in NAMED_BUILD)]


def _child_caller(calls: Calls, name: str, child) -> None:
    while not calls.stopping.is_set():
        started = time.monotonic()
        result = child.call(guard=CALL_TIMEOUT + 30)
        ended = time.monotonic()
        if result is None:
            outcome = 'hung'
        elif 'host' in result or result['error'].startswith('NoValidHost'):
            outcome = 'answered'
        else:
            outcome = result['error']
        calls.add(name, started, ended, outcome,
                  None if result is None else result['elapsed'])
        time.sleep(0.1)


#: The reconnection back-off of the last child caller: its listener
#: comes back (and declares its reply queue again) seconds after the
#: service consumes again, while it publishes calls at once (``rpc.call``
#: tries every half second).  Its replies were dropped after 2 s, then
#: every one for a minute.
SLOW_RECONNECT = '[oslo_messaging_rabbit]\nrabbit_retry_interval = 4\n'


def _caller_config(tmp_path, cluster, name: str, extra: str = '') -> str:
    return daemons.write_multi_config(
        str(tmp_path / ('%s.conf' % name)),
        '[DEFAULT]\ntransport_url = %s\nlog_file = %s\n\n[scheduler]\n'
        'topic = %s\n\n%s' % (cluster.transport_url,
                              tmp_path / ('%s.log' % name), cluster.topic,
                              extra))


def _last_report_saved(db_file: str) -> str | None:
    conn = sqlite3.connect(db_file, timeout=30)
    try:
        return conn.execute('SELECT max(updated_at) FROM hosts').fetchone()[0]
    finally:
        conn.close()


def _since_outage(when: float, outages: list) -> str:
    """When a call started, against the last stop of the broker."""
    before = [(down, ready) for down, ready in outages if down <= when]
    if not before:
        return 'before the first restart'
    down, ready = before[-1]
    return '%.1fs after stop %d (service back at %.1fs)' % (
        when - down, len(before), ready - down)


@pytest.mark.parametrize('executor', ['eventlet', 'threading'])
def test_restarts_under_load(own_cluster, broker, conf, tmp_path, executor):
    cluster = own_cluster
    db_file = str(tmp_path / 'inventory.sqlite')
    db = 'sqlite:///%s' % db_file
    daemon = cluster.start_scheduler(db, scheduler_opts={'executor':
                                                         executor})
    cluster.start_sim(hosts=HOSTS)
    wait_for_hosts(conf, db, HOSTS)

    calls = Calls()
    threads = [threading.Thread(target=_in_process_caller,
                                args=(calls, 'caller-%d' % n), daemon=True)
               for n in range(IN_PROCESS_CALLERS)]
    children = [caller.CallerProcess(
        _caller_config(tmp_path, cluster, 'child-%d' % n,
                       SLOW_RECONNECT if n == CHILD_CALLERS - 1 else ''),
        CALL_TIMEOUT, executor=executor) for n in range(CHILD_CALLERS)]
    threads += [threading.Thread(target=_child_caller,
                                 args=(calls, 'child-%d' % n, child),
                                 daemon=True)
                for n, child in enumerate(children)]
    threads.append(threading.Thread(target=_builder, args=(calls,),
                                    daemon=True))
    for thread in threads:
        thread.start()
    #: (stop began, service consuming again) of every restart.
    outages: list = []
    try:
        time.sleep(STEADY_SECONDS)
        for restart in range(RESTARTS):
            down = time.monotonic()
            broker.stop_app()
            time.sleep(DOWN_SECONDS[restart % len(DOWN_SECONDS)])
            broker.start_app()
            saved_before = _last_report_saved(db_file)
            daemons.wait_for(lambda: broker.consumers(cluster.topic), 60,
                             interval=0.2,
                             what='the service to consume again after '
                                  'restart %d' % (restart + 1))
            outages.append((down, time.monotonic()))
            daemons.wait_for(
                lambda: (_last_report_saved(db_file) or '') >
                (saved_before or ''), 30,
                what='a host report saved after restart %d (the service '
                     'froze?)' % (restart + 1))
            assert daemon.alive(), daemon.log()[-3000:]
            time.sleep(STEADY_SECONDS)
        # Every caller is answered again after the last restart (a
        # caller whose reply was dropped once had every reply dropped
        # for a minute).
        names = ['caller-%d' % n for n in range(IN_PROCESS_CALLERS)] + \
            ['child-%d' % n for n in range(CHILD_CALLERS)]
        last_ready = outages[-1][1]

        def everyone_answered() -> bool:
            answered_after = {c[0] for c in calls.snapshot()
                              if c[1] > last_ready
                              and c[3].startswith('answered')}
            return answered_after >= set(names)
        daemons.wait_for(everyone_answered, CALL_TIMEOUT * 3,
                         what='every caller to be answered after the last '
                              'restart')
    finally:
        calls.stopping.set()
        for thread in threads:
            thread.join(CALL_TIMEOUT + 35)
        for child in children:
            child.stop()

    done = calls.snapshot()
    late = [c for c in done if c[4] > CALL_TIMEOUT + SLACK]
    # A call must be answered unless the broker went down while it was
    # out, or it was sent before the service consumed again.
    excused = [(down, ready) for down, ready in outages]

    def must_answer(started: float, ended: float) -> bool:
        return not any(started < ready and ended > down
                       for down, ready in excused)
    unanswered = [c for c in done if not c[3].startswith('answered')
                  and must_answer(c[1], c[2])]
    answered = sum(1 for c in done if c[3].startswith('answered'))
    print('%s: %d restarts, %d calls, %d answered, %d unanswered while '
          'the service consumed, %d late' % (
              executor, len(outages), len(done), answered, len(unanswered),
              len(late)))

    log = daemon.log()
    assert 'Cannot switch to a different thread' not in log
    # Every caller of this test is alive: none of their replies may be
    # dropped for a missing reply queue.
    dropped = [line for line in log.splitlines()
               if "doesn't exist, drop reply" in line
               or 'Dropped reply' in line
               or 'due to a missing queue' in line]
    assert not dropped, '%d replies to live callers dropped: %s' % (
        len(dropped), dropped[:3])
    assert not late, 'calls past their %d s timeout: %s' % (
        CALL_TIMEOUT, [(c[0], _since_outage(c[1], outages),
                        round(c[4], 2), c[3]) for c in late])
    assert not unanswered, 'live callers not answered: %s' % [
        (c[0], _since_outage(c[1], outages), round(c[4], 2), c[3])
        for c in unanswered]
    assert answered > RESTARTS * 10

    # No build lost without a line naming it.  A cast the broker took
    # just as it went down (no publisher confirms: the sender cannot
    # tell) may be lost with the broker's transient queue: counted
    # apart, and only outside those moments is one a failure.
    def settled() -> bool:
        return not _unaccounted_builds(calls.builds, daemon.log(),
                                       cluster.sim.log())
    try:
        daemons.wait_for(settled, 60, what='every build to be started '
                                           'or named')
    except Exception:  # the counts below say which
        pass
    lost = _unaccounted_builds(calls.builds, daemon.log(),
                               cluster.sim.log())
    in_outage = [b for b in lost
                 if any(b[1] < ready and b[2] > down - 2
                        for down, ready in outages)]
    silent = [b for b in lost if b not in in_outage]
    print('%s: %d builds taken by the broker, %d started or named, %d '
          'unaccounted cast around a broker stop, %d unaccounted '
          'otherwise' % (executor, len(calls.builds),
                         len(calls.builds) - len(lost), len(in_outage),
                         len(silent)))
    assert not silent, 'builds lost without a line naming them: %s' % [
        (b[0], _since_outage(b[1], outages)) for b in silent]

    daemon.terminate()
    started = time.monotonic()
    try:
        status = daemon.wait_exit(10)
    except Exception:
        pytest.fail('the service did not stop within 10 s of SIGTERM:\n%s'
                    % daemon.log()[-3000:])
    assert status == 0, daemon.log()[-3000:]
    assert time.monotonic() - started < 10


def test_a_call_sent_before_the_service_consumes_again_is_answered(
        own_cluster, broker, conf, tmp_path):
    """A call the broker takes while no scheduler has declared its queue
    again (just after a restart, the service slower to reconnect than
    its caller) used to vanish: its caller waited its whole timeout
    although the service consumed again seconds later.  The broker now
    hands it back (mandatory flag) and it is sent again until the
    service's queue takes it.

    The service is paused (SIGSTOP) across the broker's return, so that
    the caller is back first, every time."""
    cluster = own_cluster
    db = 'sqlite:///%s' % (tmp_path / 'inventory.sqlite')
    # Hosts stay up through the outage: the answer is a placement.
    daemon = cluster.start_scheduler(db,
                                     scheduler_opts={'service_down_time': 120})
    cluster.start_sim(hosts=2)
    hosts = wait_for_hosts(conf, db, 2)
    # The timeout covers the broker's own restart, which takes tens of
    # seconds on a loaded machine: the test is about the call being
    # answered, not about how fast.
    api = rpcapi.SchedulerAPI(timeout=120)
    ctxt = context.RequestContext(user_id='caller', project_id='functional')
    outcome: list = []

    def call() -> None:
        try:
            outcome.append(api.select_destinations(ctxt, make_spec(ram=64)))
        except Exception as e:  # the outcome under test
            outcome.append(e)

    broker.stop_app()
    os.kill(daemon.proc.pid, signal.SIGSTOP)
    try:
        # Sent while the broker is down: published once it is back.
        caller_thread = threading.Thread(target=call, daemon=True)
        caller_thread.start()
        broker.start_app()
        assert not broker.consumers(cluster.topic)
        time.sleep(3)
    finally:
        os.kill(daemon.proc.pid, signal.SIGCONT)
    caller_thread.join(150)
    (result,) = outcome
    assert not isinstance(result, Exception), repr(result)
    assert result[0][0].service_host in hosts, result
    assert daemon.alive()


#: Seconds the broker stays down before the service is frozen: by then
#: oslo.messaging's 30 s ceiling lets a reconnection pause 13 s or more
#: (1, 3, 5 ... s), ours 2 s.
LONG_OUTAGE = 50
#: Calls at once, before the outage (so that the worker pools as many
#: connections to send their replies) and after it.
AT_ONCE = 8


def _calls_at_once(api, ctxt, count: int) -> tuple:
    """``count`` select_destinations calls side by side; their threads
    and the list of outcomes they fill."""
    outcomes: list = []

    def one() -> None:
        try:
            api.select_destinations(ctxt, make_spec(ram=64))
            outcomes.append('answered')
        except exception.NoValidHost:
            outcomes.append('answered')
        except Exception as e:  # the outcome under test
            outcomes.append(type(e).__name__)
    threads = [threading.Thread(target=one, daemon=True)
               for _ in range(count)]
    for thread in threads:
        thread.start()
    return threads, outcomes


class _LogTail:
    """The complete lines a daemon logs from now on."""

    def __init__(self, daemon):
        self._path = daemon.log_path
        self._offset = os.path.getsize(self._path)

    def lines(self) -> list:
        with open(self._path, 'rb') as f:
            f.seek(self._offset)
            data = f.read()
        complete = data[:data.rfind(b'\n') + 1]
        self._offset += len(complete)
        return complete.decode(errors='replace').splitlines()


def _pid_of_a_failed_reconnection(daemon) -> int:
    """The pid of the process that logs a failed attempt to reach the
    broker from now on, as soon as it is logged.

    oslo.messaging logs it just before its pause until the next attempt.
    """
    tail = _LogTail(daemon)
    found: list = []

    def attempted() -> bool:
        found.extend(int(line.split()[2]) for line in tail.lines()
                     if 'Connection failed' in line
                     and 'retrying in' in line)
        return bool(found)
    daemons.wait_for(attempted, 60, interval=0.05,
                     what='a failed attempt to reach the broker')
    return found[0]


def _claimed(db_file: str) -> set:
    """Instances claimed in the inventory (a placement's claim is
    written before its reply is sent)."""
    conn = sqlite3.connect(db_file, timeout=30)
    try:
        return {row[0] for row in
                conn.execute('SELECT instance_uuid FROM instances')}
    finally:
        conn.close()


@pytest.mark.parametrize('executor', ['eventlet', 'threading'])
def test_a_stop_right_after_a_long_outage_waits_for_no_reconnection(
        own_cluster, broker, conf, tmp_path, executor):
    """SIGTERM soon after the broker came back from a long outage, with
    calls in flight, ends the service within 10 s.

    A worker sends its replies (and builds) on pooled connections.  An
    idle one that lost the broker is re-established by its heartbeat
    thread, which holds the connection's lock across its pauses between
    attempts; a reply that takes it from the pool waits for the lock,
    and a stopping service for the reply.  With oslo.messaging's 30 s
    ceiling the pause that began while the broker was down went on for
    seconds after it was back, and the stop with it (issue 29: the
    threading stop after the restart test's broker restarts, sometimes
    past 10 s).

    The worker is frozen (SIGSTOP) just after such an attempt, across
    the broker's return, so that its pause is still ahead of it when
    the calls come and SIGTERM follows: every time, not by chance.
    """
    cluster = own_cluster
    # This process's own connections come back as quickly.
    conf.config(rabbit_interval_max=2, group='oslo_messaging_rabbit')
    db_file = str(tmp_path / 'inventory.sqlite')
    db = 'sqlite:///%s' % db_file
    # Hosts stay up through the outage: the answers are placements.
    daemon = cluster.start_scheduler(
        db, scheduler_opts={'executor': executor, 'service_down_time': 300})
    cluster.start_sim(hosts=4)
    wait_for_hosts(conf, db, 4)
    ctxt = context.RequestContext(user_id='caller', project_id='functional')
    api = rpcapi.SchedulerAPI(timeout=30)
    threads, outcomes = _calls_at_once(api, ctxt, AT_ONCE)
    for thread in threads:
        thread.join(60)
    assert outcomes == ['answered'] * AT_ONCE, outcomes

    broker.stop_app()
    time.sleep(LONG_OUTAGE)
    # The worker (under eventlet, one worker is the service's process).
    worker = _pid_of_a_failed_reconnection(daemon)
    os.kill(worker, signal.SIGSTOP)
    try:
        broker.start_app()
    finally:
        os.kill(worker, signal.SIGCONT)
    daemons.wait_for(lambda: broker.consumers(cluster.topic), 60,
                     interval=0.2, what='the service to consume again')
    before = _claimed(db_file)
    threads, outcomes = _calls_at_once(api, ctxt, AT_ONCE)
    # Served up to their replies: in flight when SIGTERM comes.
    daemons.wait_for(lambda: len(_claimed(db_file) - before) >= AT_ONCE,
                     30, interval=0.1, what='the calls to be served')
    daemon.terminate()
    try:
        status = daemon.wait_exit(10)
    except Exception:
        pytest.fail('the service did not stop within 10 s of SIGTERM:\n%s'
                    % daemon.log()[-3000:])
    assert status == 0, daemon.log()[-3000:]
    # Calls a stopping service took are answered.
    for thread in threads:
        thread.join(60)
    assert outcomes == ['answered'] * AT_ONCE, outcomes


#: Lines of oslo.messaging's rabbit driver that say a connection of the
#: service lost the broker and tries again.
_RECONNECTING = ('is unreachable', 'Connection failed:',
                 'trying to reconnect')

#: A filter that holds a request as long as its hint says: a call in
#: flight when the broker goes and SIGTERM comes.
SLOW_FILTER = ('\n[filter_scheduler]\n'
               'available_filters = scheduler.filters.all_filters\n'
               'available_filters = '
               'tests.unit.fixtures.out_of_tree.slow_filter.SlowFilter\n'
               'enabled_filters = ComputeFilter,SlowFilter,RamFilter\n')


def _reconnection_attempts(daemon) -> int:
    return sum(1 for line in daemon.log().splitlines()
               if any(mark in line for mark in _RECONNECTING))


@pytest.mark.parametrize('executor, workers', [('eventlet', 1),
                                               ('eventlet', 2),
                                               ('threading', 2)])
def test_sigterm_while_the_broker_is_still_down(own_cluster, broker, conf,
                                                tmp_path, executor, workers):
    """SIGTERM with the broker down (and not back before the service has
    exited), a call in flight, ends the service with status 0 within
    10 s.

    Every connection of the service then retries the broker without a
    limit, and so does the call's reply: the stop waited for it, the
    whole stop grace (48 s, measured), then exited 0.
    """
    cluster = own_cluster
    db = 'sqlite:///%s' % (tmp_path / 'inventory.sqlite')
    daemon = cluster.start_scheduler(
        db, scheduler_opts={'executor': executor, 'workers': workers,
                            'service_down_time': 300}, extra=SLOW_FILTER)
    cluster.start_sim(hosts=4)
    wait_for_hosts(conf, db, 4)
    cluster.sim.stop()
    api = rpcapi.SchedulerAPI(timeout=60)
    ctxt = context.RequestContext(user_id='caller', project_id='functional')

    def slow_call() -> None:
        try:
            api.select_destinations(
                ctxt, make_spec(scheduler_hints={'slow_seconds': ['5']}))
        except Exception:  # its reply cannot come: the broker is down
            pass

    threading.Thread(target=slow_call, daemon=True).start()
    daemons.wait_for(lambda: 'host(s) for SlowFilter' in daemon.log(), 60,
                     what='the call to be in flight')
    before = _reconnection_attempts(daemon)
    broker.stop_app()
    try:
        daemons.wait_for(
            lambda: _reconnection_attempts(daemon) > before, 60,
            what='the service to try to reconnect')
        daemon.terminate()
        started = time.monotonic()
        try:
            status = daemon.wait_exit(10)
        except Exception:
            pytest.fail('the service did not stop within 10 s of SIGTERM '
                        'with the broker down:\n%s' % daemon.log()[-6000:])
        took = time.monotonic() - started
    finally:
        # This process's own connections (and the clean-up) need it.
        broker.start_app()
    print('%s, %d worker(s): SIGTERM with the broker down and a call in '
          'flight: exit status %s in %.2f s' % (executor, workers, status,
                                                took))
    assert status == 0, daemon.log()[-6000:]
    log = daemon.log()
    assert 'The message broker is unreachable' in log, log[-6000:]
    assert 'Cannot switch to a different thread' not in log
    assert 'Could not save state at shutdown' not in log, log[-6000:]


@pytest.mark.parametrize('executor, workers', [('eventlet', 1),
                                               ('threading', 2)])
def test_a_broker_gone_during_the_stop_ends_it_within_10s(
        own_cluster, broker, conf, tmp_path, executor, workers):
    """SIGTERM with the broker up and a call in flight, then the broker
    goes (a node shutting down stops RabbitMQ and the service together)
    before the call's reply: the service still ends with status 0
    within 10 s.

    The stop looked at the broker once, when it began: up, so the
    servers got the whole stop grace (48 s), which the reply, retrying
    the broker without a limit, used up.
    """
    cluster = own_cluster
    db = 'sqlite:///%s' % (tmp_path / 'inventory.sqlite')
    daemon = cluster.start_scheduler(
        db, scheduler_opts={'executor': executor, 'workers': workers,
                            'service_down_time': 300}, extra=SLOW_FILTER)
    cluster.start_sim(hosts=4)
    wait_for_hosts(conf, db, 4)
    cluster.sim.stop()
    api = rpcapi.SchedulerAPI(timeout=60)
    ctxt = context.RequestContext(user_id='caller', project_id='functional')

    def slow_call() -> None:
        try:
            api.select_destinations(
                ctxt, make_spec(scheduler_hints={'slow_seconds': ['6']}))
        except Exception:  # its reply cannot come: the broker is gone
            pass

    threading.Thread(target=slow_call, daemon=True).start()
    daemons.wait_for(lambda: 'host(s) for SlowFilter' in daemon.log(), 60,
                     what='the call to be in flight')
    daemon.terminate()
    started = time.monotonic()
    try:
        # The stop has looked at the broker (up) by then.
        daemons.wait_for(lambda: 'Stopping' in daemon.log(), 10,
                         interval=0.1, what='the stop to begin')
        time.sleep(1.5)
        broker.stop_app()
        try:
            status = daemon.wait_exit(max(0.0, 10 - (time.monotonic()
                                                     - started)))
        except Exception:
            pytest.fail('the service did not stop within 10 s of SIGTERM '
                        'once the broker went during the stop:\n%s'
                        % daemon.log()[-6000:])
        took = time.monotonic() - started
    finally:
        broker.start_app()
    print('%s, %d worker(s): broker gone during the stop: exit status %s '
          'in %.2f s' % (executor, workers, status, took))
    assert status == 0, daemon.log()[-6000:]
    log = daemon.log()
    assert 'became unreachable during the stop' in log, log[-6000:]
    assert 'Could not save state at shutdown' not in log, log[-6000:]
