"""MetricsFilter: hosts lacking a weighed metric are dropped."""

from scheduler.filters import metrics as mod
from tests.unit.filters.catalogue import host
from tests.unit.filters.catalogue import passing
from tests.unit.filters.catalogue import request


def _hosts():
    return [host('both', metrics={'cpu.frequency': 2400.0,
                                  'cpu.percent': 0.4}),
            host('one', metrics={'cpu.frequency': 2000.0}),
            host('none')]


def test_hosts_must_report_every_weighed_metric(conf):
    conf.config(weight_setting=['cpu.frequency=1.0', 'cpu.percent=-1.0'],
                group='metrics')
    flt = mod.MetricsFilter()
    assert passing(flt, _hosts(), request()) == ['both']
    assert flt.rejection_reason(_hosts()[1], request()) == (
        'does not report metric(s) cpu.percent')


def test_quoted_list_as_in_the_guide(conf):
    conf.config(weight_setting=['"cpu.frequency=1.0', 'cpu.percent=-1.0"'],
                group='metrics')
    assert mod.weight_setting() == (('cpu.frequency', 1.0),
                                    ('cpu.percent', -1.0))


def test_bad_entries_are_ignored(conf):
    conf.config(weight_setting=['cpu.frequency=fast', 'noratio', '=1',
                                'cpu.percent = 2', 'x=nan'],
                group='metrics')
    assert mod.weight_setting() == (('cpu.percent', 2.0),)


def test_nothing_weighed_skips():
    flt = mod.MetricsFilter()
    assert flt.prepare(request()) is mod.base.SKIP
    assert passing(flt, _hosts(), request()) == ['both', 'one', 'none']
