"""``usage_cache.SeqGaps``: the numbers a reader skipped, read again
until they show or are given up."""

import pytest

from scheduler import usage_cache


class _Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock():
    return _Clock()


def _gaps(clock, tracked=True, expiry=60):
    return usage_cache.SeqGaps(tracked, expiry, clock)


def test_numbers_read_in_order_leave_no_gap(clock):
    gaps = _gaps(clock)
    gaps.seen([1, 2, 3])
    gaps.seen([])
    gaps.seen([4])
    assert (gaps.high, gaps.open()) == (4, [])


def test_skipped_numbers_stay_open_until_they_show(clock):
    gaps = _gaps(clock)
    gaps.seen([1, 2])
    gaps.seen([4, 7])
    assert (gaps.high, gaps.open()) == (7, [3, 5, 6])
    # A read returns the rows of open gaps that show, and newer ones.
    gaps.seen([5, 8])
    assert (gaps.high, gaps.open()) == (8, [3, 6])
    gaps.seen([3, 6])
    assert (gaps.high, gaps.open()) == (8, [])


def test_a_gap_is_given_up_after_the_expiry(clock):
    gaps = _gaps(clock, expiry=60)
    gaps.seen([1, 3])
    clock.now += 30
    gaps.seen([6])
    assert gaps.open() == [2, 4, 5]
    clock.now += 30
    assert gaps.open() == [4, 5]
    clock.now += 30
    assert gaps.open() == []
    assert gaps.high == 6


def test_in_order_commits_open_no_gap(clock):
    # SQLite's counter row: a skipped number was written over, never
    # committed late.
    gaps = _gaps(clock, tracked=False)
    gaps.seen([1, 5, 9])
    assert (gaps.high, gaps.open()) == (9, [])


def test_many_skipped_numbers_keep_the_newest(clock):
    most = usage_cache.SeqGaps.MOST
    gaps = _gaps(clock)
    # A load (or a first read after a long quiet spell): rows far apart.
    gaps.seen([10, 100000, 100000 + 2 * most])
    assert gaps.open() == list(range(100001, 100000 + 2 * most))[-most:]
    gaps.seen([100000 + 3 * most])
    assert len(gaps.open()) == most
    assert gaps.open()[-1] == 100000 + 3 * most - 1


def test_rows_below_the_mark_fill_gaps_and_move_nothing(clock):
    gaps = _gaps(clock)
    gaps.seen([2, 5])
    gaps.seen([1, 4])
    assert (gaps.high, gaps.open()) == (5, [3])
