"""The report benchmark's senders (tools/bench/bench_reports.py): enough
of them for the fleet, each at the fleet's pace.  The benchmark itself
is not run here."""

import argparse
import importlib.util
import os
import types

import pytest

_PATH = os.path.join(os.path.dirname(__file__), '..', '..', 'tools',
                     'bench', 'bench_reports.py')


@pytest.fixture(scope='module')
def bench():
    spec = importlib.util.spec_from_file_location('bench_reports', _PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _args(**values) -> argparse.Namespace:
    return argparse.Namespace(**dict({'senders': None, 'batch': 1,
                                      'interval': 10.0}, **values))


def test_enough_senders_for_the_fleet(bench):
    """10,000 hosts every 10 s is 1,000 reports a second: more than the
    two senders it used to start could send one message at a time."""
    assert bench._senders(10000, _args()) * bench.SENDER_RATE['single'] \
        >= 1000
    assert bench._senders(10000, _args(batch=50)) == 1
    assert bench._senders(100, _args()) == 1
    assert bench._senders(10000, _args(senders=3)) == 3


@pytest.mark.parametrize('behind, moved', [(0.5, False), (25.0, True)])
def test_a_late_sender_goes_on_at_the_fleet_pace(bench, monkeypatch,
                                                 behind, moved):
    """A sender far behind its schedule starts it again from now rather
    than sending what it owes at once (a late compute reports late, not
    twice): the figures divide by the reports sent."""
    monkeypatch.setattr(bench, 'time', types.SimpleNamespace(
        monotonic=lambda: 1000.0))
    sent, step = 100, 0.01
    started = 1000.0 - sent * step - behind
    new = bench._keep_pace(started, sent, step, 10.0)
    if moved:
        assert new + sent * step == pytest.approx(1000.0)
    else:
        assert new == started


@pytest.mark.parametrize('rate, lags, flagged', [
    (400.0, [0.5, 0.7, 1.2], ''),
    # A loaded machine: senders and service starved, reports waiting.
    (150.0, [30.0, 60.0, 65.0], 'senders reached 150 of the 400'),
    (400.0, [6.0, 8.0, 9.0], 'services were behind'),
    (400.0, [], ''),
])
def test_a_run_that_did_not_keep_up_is_not_a_figure(bench, rate, lags,
                                                    flagged):
    """CPU a report is the services' CPU over the reports sent: when the
    senders fall short or the services fall behind, it is a figure of
    the machine's load, not of a report."""
    said = bench._behind({'rate': rate, 'lags': lags}, 400.0, 5.0)
    if flagged:
        assert flagged in said
    else:
        assert said == ''
