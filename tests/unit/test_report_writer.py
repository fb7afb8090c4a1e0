"""ReportWriter: reports from the intake, written in small batches."""

import threading

from scheduler import report_writer


class _View:
    def __init__(self, when):
        self.when = when


def _newer(a, b) -> bool:
    return a.when > b.when


def _taken(host, when=0):
    return report_writer.Taken((host, host), _View(when))


def test_a_lone_report_is_written_at_once():
    batches = []
    writer = report_writer.ReportWriter(
        lambda batch: batches.append([t.key[0] for t in batch]), _newer,
        window=3600)
    writer.submit(_taken('h1'))
    assert batches == [['h1']]
    assert writer.waiting() == 0


def test_reports_left_during_a_write_go_in_the_next_batch_at_once():
    """Their threads return without waiting; the writing one writes
    them after its batch, together."""
    batches = []
    release = threading.Event()
    writing = threading.Event()

    def write(batch):
        batches.append(sorted(t.key[0] for t in batch))
        if len(batches) == 1:
            writing.set()
            assert release.wait(10)

    writer = report_writer.ReportWriter(write, _newer, window=0)
    first = threading.Thread(target=writer.submit, args=(_taken('h1'),))
    first.start()
    assert writing.wait(10)
    writer.submit(_taken('h2'))
    writer.submit(_taken('h3'))
    assert batches == [['h1']]
    release.set()
    first.join(10)
    assert batches == [['h1'], ['h2', 'h3']]


def test_the_newest_report_of_a_node_is_the_one_written():
    batches = []
    writer = report_writer.ReportWriter(
        lambda batch: batches.append([t.view.when for t in batch]), _newer)
    writer._writing = True      # as while another thread writes
    writer.submit(_taken('h1', when=2))
    writer.submit(_taken('h1', when=1))
    assert [t.view.when for t in writer.take_all()] == [2]
    writer.submit(_taken('h1', when=3))
    assert [t.view.when for t in writer.take_all()] == [3]


def test_writes_start_a_window_apart(monkeypatch):
    slept = []
    monkeypatch.setattr(report_writer.time, 'sleep', slept.append)
    writer = report_writer.ReportWriter(lambda batch: None, _newer,
                                        window=0.5)
    writer.submit(_taken('h1'))
    assert slept == []
    writer.submit(_taken('h2'))
    assert len(slept) == 1 and 0 < slept[0] <= 0.5


def test_a_writer_killed_between_batches_lets_the_next_report_write():
    def write(batch):
        raise KeyboardInterrupt

    writer = report_writer.ReportWriter(write, _newer, window=0)
    try:
        writer.submit(_taken('h1'))
    except KeyboardInterrupt:
        pass
    written = []
    writer._write = written.extend
    writer.submit(_taken('h2'))
    assert [t.key[0] for t in written] == ['h2']
