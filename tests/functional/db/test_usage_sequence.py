"""A worker's freshness read misses no usage row committed late.

PostgreSQL's and MariaDB's native sequences hand a number out when a
transaction writes and show it when the transaction commits: a
transaction that took its number first may commit after others whose
numbers are higher, and after a worker read theirs.  The worker reads
its number again until it shows (``usage_cache.SeqGaps``).

Driven through the store's own functions (``usage.apply_reports``) and a
real ``UsageCache``: the late transaction is held open, after it took
its number, by wrapping the step that writes the rows.
"""

import datetime
import threading


from scheduler.db import usage
from scheduler import usage_cache

#: More rows than the fixed window readers looked back over (16).
OTHERS = 40
#: The late writer's node, between others that sort before the rest:
#: MariaDB's next-key locks of its ``SELECT ... FOR UPDATE`` cover the
#: gaps on either side of it in the host index.  Enough rows that the
#: others' ``SELECT ... FOR UPDATE`` of 40 hosts reads that index too: a
#: scan of a small table locks every row, the late one's included, and
#: the others would wait for it.
LATE = 'b-late'
NEIGHBOURS = (['a-below%03d' % n for n in range(200)]
              + ['c-above%03d' % n for n in range(200)])


def _report(host: str, used: int, minute: int) -> usage.NodeReport:
    return usage.NodeReport(
        host, host, memory_mb_used=used, vcpus_used=0, local_gb_used=0,
        num_instances=0,
        updated_at=datetime.datetime(2026, 1, 1, 0, minute),
        instance_uuids=frozenset())


def _refresh(cache: usage_cache.UsageCache) -> list:
    """One freshness read, as ``HostManager.refresh_usage`` makes it:
    the keys of the nodes whose rows it took."""
    rows = cache.read_changed()
    keys = cache.changed(rows)
    return cache.take(rows, usage.pending_claims(keys), keys)


def _held_open(monkeypatch):
    """Make the next ``apply_reports`` that updates rows wait, its
    sequence numbers taken, until the returned event is set; and an
    event set once it waits."""
    took, release = threading.Event(), threading.Event()
    real = usage._update_usage_rows

    def update_then_wait(conn, changed, **kwargs):
        written = real(conn, changed, **kwargs)
        if not took.is_set():
            took.set()
            assert release.wait(60)
        return written

    monkeypatch.setattr(usage, '_update_usage_rows', update_then_wait)
    return took, release


def test_a_row_committed_after_higher_numbers_is_read(db_server,
                                                      monkeypatch):
    others = ['d-other%03d' % n for n in range(OTHERS)]
    hosts = [LATE] + NEIGHBOURS + others
    usage.apply_reports([_report(host, 0, 0) for host in hosts])
    reader = usage_cache.UsageCache(usage)
    assert len(_refresh(reader)) == len(hosts)

    took, release = _held_open(monkeypatch)
    late = threading.Thread(
        target=usage.apply_reports, args=([_report(LATE, 512, 1)],))
    late.start()
    try:
        assert took.wait(60)
        # Others write after it took its number, and commit first;
        # twice each, so that the reader also skips numbers that never
        # show (written over), and asks for them all.
        for minute in (1, 2):
            for host in others:
                usage.apply_reports([_report(host, 128 * minute, minute)])
        assert len(_refresh(reader)) == OTHERS
    finally:
        release.set()
        late.join(60)
    assert not late.is_alive()

    assert _refresh(reader) == [(LATE, LATE)]
    assert reader.rows[(LATE, LATE)]['reported_memory_mb'] == 512
    assert _refresh(reader) == []


def test_others_batch_committed_first_hides_no_row(db_server, monkeypatch):
    # A new fleet's first flush: one transaction writes many rows, with
    # as many numbers, while an earlier one is still open.
    usage.apply_reports([_report(host, 0, 0) for host in [LATE] + NEIGHBOURS])
    reader = usage_cache.UsageCache(usage)
    assert len(_refresh(reader)) == 1 + len(NEIGHBOURS)

    took, release = _held_open(monkeypatch)
    late = threading.Thread(
        target=usage.apply_reports, args=([_report(LATE, 512, 1)],))
    late.start()
    fleet = ['d-new%03d' % n for n in range(OTHERS)]
    try:
        assert took.wait(60)
        usage.apply_reports([_report(host, 0, 1) for host in fleet])
        assert sorted(_refresh(reader)) == [(h, h) for h in fleet]
    finally:
        release.set()
        late.join(60)
    assert _refresh(reader) == [(LATE, LATE)]
