"""GroupCommit: callers' writes made together, each caller waiting for
its own."""

import threading
import time

import pytest

from scheduler import group_commit


class _Blocking:
    """A write that records its batches and holds the first until
    released."""

    def __init__(self, fail_on=None):
        self.batches = []
        self.writing = threading.Event()
        self.release = threading.Event()
        self.fail_on = fail_on

    def __call__(self, items):
        self.batches.append(sorted(items))
        if len(self.batches) == 1:
            self.writing.set()
            assert self.release.wait(10)
        if self.fail_on in items:
            raise ValueError('refused %s' % self.fail_on)
        return [item.upper() for item in items]


def _call(batcher, item, results):
    try:
        results[item] = batcher.run(item)
    except ValueError as e:
        results[item] = e


def _wait_for(predicate):
    # Not a timing assertion: only waits for threads to have queued.
    for _ in range(1000):
        if predicate():
            return
        time.sleep(0.01)
    raise AssertionError('never happened')


def _during_a_write(batcher, write, first: str, others: str,
                    results: dict) -> list:
    """Start a caller of ``first`` and, once its write is under way, a
    caller of each of ``others``; return once those are all waiting."""
    lead = threading.Thread(target=_call, args=(batcher, first, results))
    lead.start()
    assert write.writing.wait(10)
    rest = [threading.Thread(target=_call, args=(batcher, x, results))
            for x in others]
    for t in rest:
        t.start()
    _wait_for(lambda: batcher.waiting() == len(others))
    return [lead] + rest


def test_a_lone_caller_writes_at_once():
    batches = []
    batcher = group_commit.GroupCommit(
        lambda items: batches.append(items) or [len(items)])
    assert batcher.run('a') == 1
    assert batches == [['a']]
    assert batcher.waiting() == 0


def test_callers_during_a_write_are_written_together_after_it():
    write = _Blocking()
    batcher = group_commit.GroupCommit(write)
    results = {}
    threads = _during_a_write(batcher, write, 'a', 'bcd', results)
    # Nobody returned before its own write.
    assert results == {}
    write.release.set()
    for t in threads:
        t.join(10)
    assert write.batches == [['a'], ['b', 'c', 'd']]
    assert results == {'a': 'A', 'b': 'B', 'c': 'C', 'd': 'D'}
    assert batcher.waiting() == 0


def test_every_caller_of_a_failed_batch_gets_its_error_and_others_go_on():
    write = _Blocking(fail_on='c')
    batcher = group_commit.GroupCommit(write)
    results = {}
    threads = _during_a_write(batcher, write, 'a', 'bc', results)
    write.release.set()
    for t in threads:
        t.join(10)
    assert results['a'] == 'A'
    assert [str(results[x]) for x in ('b', 'c')] == ['refused c'] * 2
    # The batcher is free again.
    assert batcher.run('e') == 'E'


def test_a_writer_killed_leaves_no_caller_waiting_and_no_lead_held():
    def write(items):
        raise KeyboardInterrupt

    batcher = group_commit.GroupCommit(write)
    with pytest.raises(KeyboardInterrupt):
        batcher.run('a')
    batcher._write = lambda items: [x * 2 for x in items]
    assert batcher.run('b') == 'bb'


def test_a_write_returning_too_few_results_is_an_error_for_all():
    batcher = group_commit.GroupCommit(lambda items: [])
    with pytest.raises(RuntimeError):
        batcher.run('a')
    batcher._write = lambda items: list(items)
    assert batcher.run('b') == 'b'
