#!/usr/bin/env python3
"""How long an idle daemon takes to stop on SIGTERM, over RabbitMQ.

Prints seconds from SIGTERM to exit (median and worst of ``--rounds``)
for ``scheduler-service`` with 1 and 2 workers and for
``scheduler-compute-sim``, each left idle ``--idle`` seconds first (so
that its consumers have backed off to their longest wait), and how
long closing a caller's transport takes after its last call.  No
thresholds: it prints numbers.  Only loopback addresses; every wait is
bounded; the queues each round declared are deleted.

    python tools/bench/bench_stop.py
    python tools/bench/bench_stop.py --rounds 5 --idle 12
"""

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))

from oslo_config import cfg  # noqa: E402

from scheduler import config  # noqa: E402
from scheduler import context  # noqa: E402
from scheduler import rpc  # noqa: E402
from tools.bench import exchange  # noqa: E402

CONF = cfg.CONF
RABBIT = 'rabbit://guest:guest@127.0.0.1:5672/'
BIN = os.path.dirname(sys.executable)


def _write(path: str, text: str) -> str:
    with open(path, 'w') as f:
        f.write(text)
    return path


def _wait(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit('timed out waiting for %s' % what)
        time.sleep(0.2)


def _answers() -> bool:
    from scheduler import rpcapi
    try:
        return bool(rpcapi.SchedulerAPI(timeout=2).get_version_info(
            context.get_admin_context()))
    except Exception:
        return False


def _log_count(path: str, text: str) -> int:
    if not os.path.exists(path):
        return 0
    with open(path, errors='replace') as f:
        return f.read().count(text)


def _term(proc: subprocess.Popen) -> float:
    start = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
        return float('inf')
    return time.monotonic() - start


def _delete_queues(topic: str, compute_topic: str) -> None:
    rpc.tidy_service(topic, ['bench'], [compute_topic])


def _start_service(tmp: str, workers: int = 1) -> tuple:
    """A scheduler-service on a topic of its own, answering: ``(process,
    topic, log path)``; this process's ``[scheduler] topic`` points at
    it."""
    topic = 'bench-stop-%s' % uuid.uuid4().hex[:8]
    log = os.path.join(tmp, '%s.log' % topic)
    path = _write(os.path.join(tmp, '%s.conf' % topic), (
        exchange.default_section()
        + 'transport_url = %s\nhost = bench\nlog_file = %s\n'
        'state_path = %s\n\n[scheduler]\ntopic = %s\nworkers = %d\n\n'
        '[database]\nconnection = sqlite:///%s/%s.sqlite\n'
        % (RABBIT, log, tmp, topic, workers, tmp, topic)))
    proc = subprocess.Popen(
        [os.path.join(BIN, 'scheduler-service'), '--config-file', path],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT, start_new_session=True)
    CONF.set_override('topic', topic, group='scheduler')
    try:
        _wait(_answers, 60, 'scheduler-service to answer')
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        _delete_queues(topic, 'unused')
        raise
    return proc, topic, log


def one_service(tmp: str, workers: int, idle: float) -> float:
    proc, topic, log = _start_service(tmp, workers)
    try:
        _wait(lambda: _log_count(log, 'Starting scheduler-service')
              >= workers, 60, 'every worker to start')
        time.sleep(idle)
        return _term(proc)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        _delete_queues(topic, 'unused')


def one_sim(tmp: str, idle: float) -> float:
    topic = 'bench-stop-%s' % uuid.uuid4().hex[:8]
    compute = 'bench-compute-%s' % uuid.uuid4().hex[:8]
    log = os.path.join(tmp, '%s-sim.log' % topic)
    path = _write(os.path.join(tmp, '%s-sim.conf' % topic), (
        exchange.default_section()
        + 'transport_url = %s\nhost = bench\nlog_file = %s\n\n'
        '[scheduler]\ntopic = %s\nreport_interval = 1\n\n'
        '[compute]\ntopic = %s\n' % (RABBIT, log, topic, compute)))
    proc = subprocess.Popen(
        [os.path.join(BIN, 'scheduler-compute-sim'), '--config-file', path,
         '--hosts', '3', '--control-dir', tmp],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _wait(lambda: _log_count(log, 'reported; next reports'), 60,
              'the simulator to report')
        time.sleep(idle)
        return _term(proc)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        _delete_queues(topic, compute)


def caller_cleanup(tmp: str, idle: float) -> float:
    """A caller's transport closed ``idle`` s after its last call."""
    from scheduler import rpc
    proc, topic, _log = _start_service(tmp)
    try:
        time.sleep(idle)
        start = time.monotonic()
        rpc.cleanup()
        return time.monotonic() - start
    finally:
        _term(proc)
        _delete_queues(topic, 'unused')


def report(label: str, samples: list) -> None:
    print('%-46s median %5.2f s, worst %5.2f s (%d rounds)'
          % (label, statistics.median(samples), max(samples), len(samples)),
          flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--rounds', type=int, default=3)
    parser.add_argument('--idle', type=float, default=10.0,
                        help='seconds idle before SIGTERM (default 10: '
                        'past oslo.messaging\'s 8.2 s of back-off)')
    args = parser.parse_args()
    config.parse_args([], prog='bench-stop', default_config_files=[])
    CONF.set_override('transport_url', RABBIT)
    with tempfile.TemporaryDirectory(prefix='sched-bench-stop-') as tmp:
        for workers in (1, 2):
            report('scheduler-service, %d worker(s), SIGTERM:' % workers,
                   [one_service(tmp, workers, args.idle)
                    for _ in range(args.rounds)])
        report('scheduler-compute-sim, 3 hosts, SIGTERM:',
               [one_sim(tmp, args.idle) for _ in range(args.rounds)])
        report('a caller closing its transport:',
               [caller_cleanup(tmp, args.idle) for _ in range(args.rounds)])


if __name__ == '__main__':
    main()
