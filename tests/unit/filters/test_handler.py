"""HostFilterHandler: the walk through the enabled filters.

It runs the filters in order, stops when none is left, records a
FilterReport (counts always, per-host reasons when detailed) and logs
one INFO line naming the filter that removed the last host.
"""

import logging

from scheduler.filters import base
from scheduler.filters import compute
from scheduler.filters import ram
from tests.unit import fixtures


class Recorder(base.BaseHostFilter):
    """Passes hosts whose name is not in ``reject``; records its calls."""

    def __init__(self, reject=(), calls=None, name='Recorder'):
        self.reject = set(reject)
        self.calls = calls if calls is not None else []
        self._name = name

    def name(self):
        return self._name

    def host_passes(self, host_state, spec_obj):
        self.calls.append((self._name, host_state.host))
        return host_state.host not in self.reject


class OncePerRequest(Recorder):
    run_filter_once_per_request = True


class WholeList(base.BaseHostFilter):
    """Keeps every other host, looking at the list at once."""

    def __init__(self):
        self.seen = []

    def host_passes(self, host_state, spec_obj):
        raise AssertionError('filter_all is used instead')

    def filter_all(self, host_states, spec_obj):
        host_states = list(host_states)
        self.seen.append([h.host for h in host_states])
        return host_states[::2]


def _three_hosts():
    return fixtures.hosts(fixtures.report('h1', memory_mb=1024),
                          fixtures.report('h2', memory_mb=4096),
                          fixtures.report('h3', memory_mb=8192))


def _run(filters, hosts=None, spec=None, index=0, report=None):
    return base.HostFilterHandler().get_filtered_objects(
        filters, hosts if hosts is not None else _three_hosts(),
        spec or fixtures.request(), index=index, report=report)


def test_filters_run_in_the_configured_order_on_what_is_left():
    calls = []
    first = Recorder(reject={'h1'}, calls=calls, name='First')
    second = Recorder(reject={'h3'}, calls=calls, name='Second')
    passed = _run([first, second])
    assert [h.host for h in passed] == ['h2']
    assert calls == [('First', 'h1'), ('First', 'h2'), ('First', 'h3'),
                     ('Second', 'h2'), ('Second', 'h3')]


def test_a_filter_may_look_at_the_whole_list_at_once():
    whole = WholeList()
    passed = _run([whole])
    assert whole.seen == [['h1', 'h2', 'h3']]
    assert [h.host for h in passed] == ['h1', 'h3']


def test_once_per_request_filters_skip_later_instances():
    once, every = OncePerRequest(name='Once'), Recorder(name='Every')
    _run([once, every], index=0)
    _run([once, every], index=1)
    assert [c for c in once.calls] == [('Once', 'h1'), ('Once', 'h2'),
                                       ('Once', 'h3')]
    assert len(every.calls) == 6


def test_the_walk_stops_at_the_filter_that_removed_every_host():
    after = Recorder(name='After')
    report = base.FilterReport()
    passed = _run([ram.RamFilter(), after],
                  spec=fixtures.request(memory_mb=16384), report=report)
    assert passed == []
    assert after.calls == []
    assert report.emptied_by().name == 'RamFilter'


def test_report_counts_every_step():
    report = base.FilterReport()
    _run([compute.ComputeFilter(), ram.RamFilter(), Recorder(name='Last')],
         spec=fixtures.request(memory_mb=2048), report=report)
    assert [(s.name, s.hosts_in, s.hosts_out) for s in report.steps] == [
        ('ComputeFilter', 3, 3), ('RamFilter', 3, 2), ('Last', 2, 2)]
    assert report.steps[1].removed == 1
    assert report.summary() == \
        'ComputeFilter: 3 -> 3, RamFilter: 3 -> 2, Last: 2 -> 2'
    assert report.emptied_by() is None
    # Reasons cost a little per host: only when asked for.
    assert all(s.rejected == {} for s in report.steps)
    assert report.to_dict()['steps'][1] == {
        'name': 'RamFilter', 'hosts_in': 3, 'hosts_out': 2, 'rejected': {}}


def test_detailed_report_says_why_each_host_was_rejected():
    report = base.FilterReport(detailed=True)
    _run([ram.RamFilter()], spec=fixtures.request(memory_mb=2048),
         report=report)
    assert report.steps[0].rejected == {
        'h1/h1': 'requested 2048 MB RAM > 1024 MB physical RAM (no '
                 'overcommit against itself)'}


def test_default_rejection_reason_is_the_filters_first_doc_line():
    report = base.FilterReport(detailed=True)
    _run([Recorder(reject={'h2'})], report=report)
    assert report.steps[0].rejected == {
        'h2/h2': 'did not pass: Passes hosts whose name is not in '
                 '``reject``; records its calls.'}


def test_info_line_names_the_filter_that_emptied_the_list(caplog):
    caplog.set_level(logging.DEBUG, logger='scheduler')
    spec = fixtures.request(memory_mb=16384, instance_uuid=fixtures.uuid(5))
    _run([compute.ComputeFilter(), ram.RamFilter()], spec=spec,
         report=base.FilterReport())
    infos = [r for r in caplog.records if r.levelno == logging.INFO
             and r.name == 'scheduler.filters.base']
    assert len(infos) == 1
    message = infos[0].getMessage()
    assert 'filter RamFilter left none of 3 host(s)' in message
    assert fixtures.uuid(5) in message
    assert 'ComputeFilter: 3 -> 3, RamFilter: 3 -> 0' in message
    # The debug walk shows each filter's counts, as nova's does.
    debug = [r.getMessage() for r in caplog.records
             if r.levelno == logging.DEBUG and r.name.startswith(
                 'scheduler.filters.base')]
    assert 'Filter ComputeFilter returned 3 host(s)' in debug
    assert 'Filter RamFilter returned 0 host(s)' in debug


def test_no_info_line_when_hosts_remain(caplog):
    caplog.set_level(logging.INFO, logger='scheduler')
    _run([ram.RamFilter()], spec=fixtures.request(memory_mb=1024))
    assert not [r for r in caplog.records if r.levelno >= logging.INFO
                and r.name == 'scheduler.filters.base']


def test_no_filters_pass_everything():
    hosts = _three_hosts()
    assert _run([], hosts=hosts) == hosts


def test_an_empty_host_list_blames_no_filter(caplog):
    caplog.set_level(logging.INFO, logger='scheduler')
    spec = fixtures.request(instance_uuid=fixtures.uuid(6))
    assert _run([ram.RamFilter()], hosts=[], spec=spec) == []
    infos = [r.getMessage() for r in caplog.records
             if r.levelno == logging.INFO]
    assert infos == ['No host to filter for the request with instance ID '
                     '%s' % fixtures.uuid(6)]
