"""Computes join, leave and come back while requests flow, on every database.

The inventory once stopped saving for good on SQLite when a new compute
joined a running fleet (a re-inserted report row collided with a new
one's id, and the failed batch was retried for ever).  Here the
scheduler must keep saving through the churn, and afterwards the
inventory must say what the fleet is: every node's report, and usage
rows whose pending counts are exactly the pending placements.
"""

import threading

import pytest

from scheduler.db import api as db_api
from scheduler.db import usage
from scheduler import exception
from tests.functional import daemons
from tests.unit import fixtures


class _Load:
    """Requests sent one after the other until stopped; unexpected errors
    are kept."""

    def __init__(self, cluster):
        self.cluster = cluster
        self.errors: list = []
        self.placed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run)
        self._thread.start()

    def _run(self):
        n = 0
        while not self._stop.is_set():
            n += 1
            try:
                self.cluster.api.select_destinations(
                    self.cluster.ctxt, fixtures.request(memory_mb=64),
                    [fixtures.uuid(900000 + n)])
                self.placed += 1
            except exception.NoValidHost:
                pass
            except Exception as e:  # anything else is a failure
                self.errors.append(repr(e))
            self._stop.wait(0.05)

    def stop(self):
        self._stop.set()
        self._thread.join(60)


def _explain(cluster) -> dict:
    return cluster.api.explain(cluster.admin_ctxt, fixtures.request())


def _consistent_inventory(conf, url: str) -> tuple:
    """Nodes saved, and whether every usage row matches its placements."""
    conf.config(connection=url, group='database')
    db_api.reset_engine()
    try:
        nodes = sorted(r['nodename'] for r in db_api.host_reports_get_all())
        pending: dict = {}
        for placement in db_api.instance_get_all():
            if placement['pending']:
                key = (placement['host'], placement['nodename'])
                pending[key] = pending.get(key, 0) + 1
        mismatched = [
            (r['host'], r['nodename']) for r in usage.usage_get_all()
            if r['claimed_instances'] != pending.get(
                (r['host'], r['nodename']), 0)]
        return nodes, mismatched
    finally:
        db_api.reset_engine()


@pytest.mark.parametrize('db', ['sqlite', 'postgresql_url', 'mysql_url'])
def test_hosts_join_leave_and_rejoin_while_requests_flow(
        cluster, conf, request, tmp_path, db):
    url = ('sqlite:///%s' % (tmp_path / 'inventory.sqlite')
           if db == 'sqlite' else request.getfixturevalue(db))
    scheduler = cluster.start_scheduler(
        url, scheduler_opts={'service_down_time': 30})
    left = cluster.start_sim(hosts=3, name='left')
    daemons.wait_for(lambda: _explain(cluster)['passed'] == 3, 60,
                     what='the first three hosts')
    load = _Load(cluster)
    try:
        # New computes join a running fleet ...
        cluster.start_sim(hosts=3, name='right')
        daemons.wait_for(lambda: _explain(cluster)['hosts_known'] == 6, 60,
                         what='the new hosts to join')
        # ... some leave, and come back.
        left.stop()
        cluster.daemons.remove(left)
        cluster.start_sim(hosts=3, name='left')
        daemons.wait_for(lambda: _explain(cluster)['passed'] == 6, 60,
                         what='the hosts to come back')
    finally:
        load.stop()
    assert load.errors == []
    assert load.placed > 0
    expected = sorted(['left-%03d' % i for i in (1, 2, 3)]
                      + ['right-%03d' % i for i in (1, 2, 3)])
    daemons.wait_for(
        lambda: _consistent_inventory(conf, url) == (expected, []), 30,
        what='the inventory to hold the fleet and match its placements')
    log = scheduler.log()
    assert 'Could not write to the inventory' not in log
    assert 'Traceback' not in log
