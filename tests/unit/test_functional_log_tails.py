"""What a failed functional test shows of its daemons' logs
(``tests.functional.daemons.log_tails``): bounded, and the lines that
say something."""

from tests.functional import daemons

_NOISE = (
    '2026-11-28 12:05:30.468 13009 DEBUG oslo_messaging._drivers.amqpdriver'
    ' [-] received message msg_id: 1 __call__ /x/amqpdriver.py:300',
    '2026-11-28 12:05:30.468 13009 DEBUG amqp [-] Start from server',
    '2026-11-28 12:05:30.468 13009 DEBUG oslo_service.periodic_task [-] '
    'Running periodic task run_periodic_tasks /x/periodic_task.py:210',
    '2026-11-28 12:05:28.699 12965 DEBUG scheduler.cmd.service [-] '
    'scheduler.report_interval = 1 log_opt_values /x/cfg.py:3560',
    '2026-11-28 12:05:31.965 13011 DEBUG scheduler.filters.base [req-1] '
    'Starting with 1 host(s) for RamFilter filter_candidates '
    '/x/columns.py:975',
)


class _Daemon:
    def __init__(self, name, log_path):
        self.name = name
        self.log_path = log_path


def test_a_tail_keeps_the_lines_worth_reading(tmp_path):
    log = tmp_path / 'sched.log'
    kept = [
        '2026-11-28 12:05:31.696 13011 INFO scheduler.manager [req-2] '
        'Applied 1 instance news kept during the database outage',
        '2026-11-28 12:05:31.966 13011 DEBUG scheduler.filters.base '
        '[req-1] Filter RamFilter returned 0 host(s) filter_candidates '
        '/x/columns.py:994',
    ]
    log.write_text('\n'.join(list(_NOISE) + kept) + '\n')
    tail = daemons.log_tail(str(log), 10).splitlines()
    assert tail[0] == kept[0]
    # The place in the code is left out of a DEBUG line.
    assert tail[1] == kept[1].rsplit(' filter_candidates', 1)[0]
    assert len(tail) == 2


def test_a_tail_is_bounded(tmp_path):
    log = tmp_path / 'sched.log'
    log.write_text(''.join('line %d %s\n' % (n, 'x' * 2000)
                           for n in range(1000)))
    tail = daemons.log_tail(str(log), 150).splitlines()
    assert len(tail) == 150
    assert tail[-1].startswith('line 999 ')
    assert all(len(line) <= daemons.TAIL_LINE_CHARS + len(' [...]')
               for line in tail)


def test_each_daemon_has_its_section_with_its_output(tmp_path):
    started = []
    for n in range(daemons.TAIL_DAEMONS + 2):
        path = tmp_path / ('d%d.log' % n)
        path.write_text('INFO started %d\n' % n)
        started.append(_Daemon('scheduler-service' if n % 2
                               else 'scheduler-compute-sim', str(path)))
    (tmp_path / 'd7.log.out').write_text('Traceback: boom\n')
    sections = daemons.log_tails(started)
    # The last started, each once.
    assert len(sections) == daemons.TAIL_DAEMONS
    assert 'started 2' in sections[0][1]
    title, text = sections[-1]
    assert title.startswith('scheduler-service log (last 150 lines')
    assert 'started 7' in text and 'Traceback: boom' in text


def test_a_missing_log_says_so(tmp_path):
    assert 'cannot read' in daemons.log_tail(str(tmp_path / 'none'), 5)
