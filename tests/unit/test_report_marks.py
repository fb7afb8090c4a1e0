"""``node_reports.ReportMarks``: which stored report of each node a
worker holds, and how far it read the changed ones.

Letting an older stored report lower the mark a node holds passed every
unit test (issue 24, mutation pass): the worker would then read back,
as new, stored reports older than its own (``_install``'s own check
keeps the older report from replacing the newer, at the cost of a read
and a comparison per node and round).
"""

from scheduler import node_reports

KEY = ('h1', 'n1')


def _row(seq: int, key=KEY) -> dict:
    return {'host': key[0], 'nodename': key[1], 'changed_seq': seq}


def test_a_mark_never_moves_back():
    marks = node_reports.ReportMarks()
    marks.holds(KEY, 5)
    marks.holds(KEY, 3)          # an older stored report, read late
    assert not marks.is_new(KEY, 4)
    assert not marks.is_new(KEY, 5)
    assert marks.is_new(KEY, 6)


def test_a_write_of_a_changed_report_is_not_read_back():
    marks = node_reports.ReportMarks()
    marks.written([KEY], 7, changed=True)
    marks.written([('h2', 'n2')], 8, changed=False)  # only its time
    assert marks.changed_read([_row(7), _row(8, ('h2', 'n2'))]) == [
        ('h2', 'n2')]
    assert marks.changed == 8
    marks.holds(KEY, 2)
    assert marks.changed_read([_row(6)]) == []
    # The read mark does not move back either.
    assert marks.changed == 8


def test_a_seq_the_database_did_not_give_marks_nothing():
    marks = node_reports.ReportMarks()
    marks.written([KEY], None, changed=True)
    assert marks.is_new(KEY, 0)
