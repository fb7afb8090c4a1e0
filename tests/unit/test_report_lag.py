"""The report lag: how long reports wait on the bus (issue 26)."""

import datetime
import logging

from scheduler.drivers import filter_scheduler
from scheduler import manager as manager_mod
from scheduler import metrics
from scheduler import report_lag
from scheduler.resources import liveness
from tests.unit import fixtures


def _at(seconds: float) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc)


def test_the_lag_is_the_least_of_the_last_reports():
    clock = [1000.0]
    liveness.set_clock(lambda: clock[0])
    try:
        lag = report_lag.ReportLag()
        assert lag.current(60) == 0.0
        lag.note(_at(990.0))
        # A compute whose clock runs late makes one report look late.
        lag.note(_at(900.0))
        lag.note(_at(997.0))
        assert lag.current(60) == 3.0
        lag.note(None)
        clock[0] += 61
        assert lag.current(60) == 0.0
    finally:
        liveness.set_clock(None)


def test_reports_waiting_on_the_bus_do_not_take_hosts_down(conf, caplog):
    """A queue behind by more than service_down_time: the host's last
    report is old, but not because the host stopped."""
    clock = [1000.0]
    liveness.set_clock(lambda: clock[0])
    conf.config(service_down_time=60, report_interval=10, group='scheduler')
    try:
        hosts = fixtures.manager_with([fixtures.report('h1')])
        manager = manager_mod.SchedulerManager(
            driver=filter_scheduler.FilterScheduler(hosts))
        clock[0] += 90
        # Reports are taken now that were sent 80 s ago.
        for _ in range(5):
            manager.reports.lag.note(_at(clock[0] - 80))
        with caplog.at_level(logging.WARNING):
            manager._watch_report_lag()
        assert 'wait 80.0 s on the bus' in caplog.text
        assert metrics._metrics.registry.get_sample_value(
            'scheduler_report_lag_seconds') == 80.0
        assert hosts.check_down_hosts() == []
        assert [s.host for s in hosts.get_up_host_states()] == ['h1']
        # The queue caught up: the same silence is a host down.
        for _ in range(report_lag.WINDOW):
            manager.reports.lag.note(_at(clock[0]))
        manager._watch_report_lag()
        assert hosts.check_down_hosts() == [('h1', 'h1')]
    finally:
        liveness.set_clock(None)
        liveness.set_intake_lag(0)
