"""The write of a batch of changed intake reports, alone (microbenchmark).

A fleet of ``--hosts`` identical hosts is written once, then ``--rounds``
busy rounds (every host a new usage) are written ``--batch`` reports a
write, as a write window of the intake gathers them
(``HostManager._write_taken``: the reports' rows, the usage they carry,
the usage read back).  Prints the statements, BEGINs and commits that
reach the driver a batch, and the CPU and wall time a batch.

``--flush``: the same rounds written by the periodic flush instead
(``HostManager.flush``, ``report_backlog.FLUSH_BATCH`` nodes a
write), the fleet's first flush apart; figures a flush.

    python tools/bench/bench_report_write.py --db postgresql [--flush]
"""

import argparse
import logging
import os
import sys
import tempfile
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))

import sqlalchemy as sa  # noqa: E402

from scheduler import config  # noqa: E402
from scheduler import host_manager  # noqa: E402
from scheduler import host_view  # noqa: E402
from scheduler import report_writer  # noqa: E402
from scheduler.db import api as db_api  # noqa: E402
from tools.bench import bench_claims  # noqa: E402
from tools.bench import bench_reports  # noqa: E402


class _Counter:
    """Statements, BEGINs (psycopg2 sends one before the first statement
    of a transaction) and commits that reach the driver."""

    def __init__(self):
        self.statements = self.begins = self.commits = 0
        self._in_transaction = False

    def __enter__(self):
        eng = db_api.get_engine()
        sa.event.listen(eng, 'before_cursor_execute', self._execute)
        sa.event.listen(eng, 'commit', self._commit)
        return self

    def __exit__(self, *exc):
        eng = db_api.get_engine()
        sa.event.remove(eng, 'before_cursor_execute', self._execute)
        sa.event.remove(eng, 'commit', self._commit)

    def _execute(self, conn, *args):
        self.statements += 1
        if (not self._in_transaction and not getattr(
                conn.connection.driver_connection, 'autocommit', True)):
            self.begins += 1
            self._in_transaction = True

    def _commit(self, conn):
        self.commits += 1
        self._in_transaction = False


def _taken(manager, states) -> list:
    taken = []
    for state in states:
        view = host_view.HostView(state)
        with manager._lock:
            carried = manager._usage_to_write(view.key(), view)
        taken.append(report_writer.Taken(view.key(), view, carried))
    return taken


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--db', default='postgresql',
                        choices=['sqlite', 'postgresql', 'mariadb'])
    parser.add_argument('--hosts', type=int, default=2000)
    parser.add_argument('--batch', type=int, default=40)
    parser.add_argument('--rounds', type=int, default=3)
    parser.add_argument('--flush', action='store_true',
                        help='write through the periodic flush')
    args = parser.parse_args()
    warnings.filterwarnings('ignore')
    config.parse_args([], default_config_files=[])
    logging.getLogger('scheduler').setLevel(logging.WARNING)
    print('load average: %.2f %.2f %.2f' % os.getloadavg())
    with tempfile.TemporaryDirectory() as tmp, \
            bench_claims.throwaway_database(args.db, tmp) as url:
        bench_claims._use(url)
        manager = host_manager.HostManager()
        manager.load_from_inventory()
        if args.flush:
            _flushes(manager, args)
            db_api.reset_engine()
            return
        fleet = bench_reports._fleet(args.hosts, 0)
        for start in range(0, args.hosts, args.batch):
            manager._write_taken(_taken(manager,
                                        fleet[start:start + args.batch]))
        counter, batches, cpu, wall = _Counter(), 0, 0.0, 0.0
        for busy in range(1, args.rounds + 1):
            fleet = bench_reports._fleet(args.hosts, busy)
            for start in range(0, args.hosts, args.batch):
                taken = _taken(manager, fleet[start:start + args.batch])
                with counter:
                    cpu0, wall0 = time.process_time(), time.perf_counter()
                    manager._write_taken(taken)
                    cpu += time.process_time() - cpu0
                    wall += time.perf_counter() - wall0
                batches += 1
        db_api.reset_engine()
    print('%s, %d hosts, batches of %d: %.1f statements, %.1f BEGINs, %.1f '
          'commits a batch; CPU %.2f ms (%.0f us a report), wall %.2f ms a '
          'batch' % (args.db, args.hosts, args.batch,
                     counter.statements / batches, counter.begins / batches,
                     counter.commits / batches, cpu / batches * 1e3,
                     cpu / (batches * args.batch) * 1e6,
                     wall / batches * 1e3))


def _flush(manager, states) -> tuple:
    """Take ``states`` as reports, then flush; (statements, commits,
    CPU s, wall s) of the flush."""
    for state in states:
        manager.update_from_report(state)
    with _Counter() as counter:
        cpu0, wall0 = time.process_time(), time.perf_counter()
        manager.flush()
        cpu = time.process_time() - cpu0
        wall = time.perf_counter() - wall0
    return counter.statements, counter.commits, cpu, wall


def _flushes(manager, args) -> None:
    first = _flush(manager, bench_reports._fleet(args.hosts, 0))
    rounds = [_flush(manager, bench_reports._fleet(args.hosts, busy))
              for busy in range(1, args.rounds + 1)]
    for what, (statements, commits, cpu, wall) in [
            ('first flush', first),
            ('busy flush', [sum(r[n] for r in rounds) / len(rounds)
                            for n in range(4)])]:
        print('%s, %d hosts, %s: %.0f statements, %.0f commits; CPU '
              '%.0f ms (%.0f us a report), wall %.0f ms'
              % (args.db, args.hosts, what, statements, commits,
                 cpu * 1e3, cpu / args.hosts * 1e6, wall * 1e3))


if __name__ == '__main__':
    main()
