"""Real free disk across workers, on real RabbitMQ and the default
inventory (SQLite under ``state_path``).

One simulated node reports 1,000 GB in its totals but only 20 GB of
``disk_available_least`` (what its disk can really still give): two
instances of 8 GB fit, a third does not, whichever of the service's two
workers serves each request, however many callers ask at once, and
after the compute has built the instances and reported them (their
usage moves from pending to reported without being counted twice or
lost).
"""

import concurrent.futures
import json

import oslo_messaging
import pytest

from scheduler.db import api as db_api
from scheduler.db import migration
from scheduler.db import usage
from scheduler import exception
from tests.functional import daemons
from tests.unit import fixtures

HOST = 'tight-001'
TOTAL_GB = 1000
LEAST_GB = 20
ROOT_GB = 8
FITS = LEAST_GB // ROOT_GB
#: Claims must not expire while the test runs (select_destinations'
#: claims are never built).
SCHEDULER_OPTS = {'service_down_time': 120, 'workers': 2}
CALLERS = 8


def _fleet(tmp_path) -> str:
    path = tmp_path / 'fleet.json'
    path.write_text(json.dumps({'groups': [{
        'prefix': 'tight', 'count': 1, 'memory_mb': 65536,
        'local_gb': TOTAL_GB, 'disk_available_least': LEAST_GB,
        'vcpus': 64, 'ram_allocation_ratio': 1.0,
        'cpu_allocation_ratio': 1.0, 'disk_allocation_ratio': 1.0}]}))
    return str(path)


@pytest.fixture
def default_inventory(cluster, conf):
    """The service's default inventory, ``sqlite:///$state_path/
    scheduler.sqlite``, made first as ``scheduler-manage db sync``
    would, and read from this (the caller's) process too."""
    state = cluster.tmp / 'state'
    state.mkdir(exist_ok=True)
    url = 'sqlite:///%s' % (state / 'scheduler.sqlite')
    migration.db_sync(connection=url)
    conf.config(connection=url, group='database')
    db_api.reset_engine()
    yield url
    db_api.reset_engine()


def _start(cluster) -> None:
    daemon = cluster.start_scheduler(None, scheduler_opts=SCHEDULER_OPTS,
                                     wait=False)
    cluster.start_sim(fleet=_fleet(cluster.tmp))
    cluster.wait_ready(daemon, 'sched', SCHEDULER_OPTS['workers'])
    assert 'connection' not in (cluster.tmp / 'sched.conf').read_text()
    daemons.wait_for(
        lambda: cluster.api.explain(cluster.admin_ctxt, fixtures.request(
            root_gb=ROOT_GB))['passed'] == 1,
        60, what='the simulated host to report')


def _ask(cluster, first: int, num: int = 1, root_gb: int = ROOT_GB):
    """Host of each instance, or None for NoValidHost."""
    spec = fixtures.request(root_gb=root_gb, num_instances=num)
    uuids = [fixtures.uuid(n) for n in range(first, first + num)]
    try:
        selections = cluster.api.select_destinations(cluster.ctxt, spec,
                                                     uuids)
    except (exception.NoValidHost, oslo_messaging.MessagingTimeout):
        return None
    return [alts[0].service_host for alts in selections]


def _row() -> dict:
    [row] = [r for r in usage.usage_get_all() if r['host'] == HOST]
    return row


def _served_by_both_workers(cluster) -> bool:
    log = cluster.scheduler.log()
    pids = set()
    for line in log.splitlines():
        if 'select_destinations' in line or 'NoValidHost' in line:
            parts = line.split()
            if len(parts) > 2 and parts[2].isdigit():
                pids.add(parts[2])
    return len(pids) >= 2


def test_a_node_takes_only_the_disk_it_really_has(cluster, conf,
                                                  default_inventory):
    _start(cluster)
    # One request for more than fits: refused whole.
    assert _ask(cluster, 1, num=FITS + 1) is None
    assert usage.pending_claims() == []
    # Many callers at once, served by both workers: exactly what fits.
    with concurrent.futures.ThreadPoolExecutor(CALLERS) as pool:
        answers = list(pool.map(lambda n: _ask(cluster, 100 + n),
                                range(CALLERS)))
    placed = [a for a in answers if a]
    assert placed == [[HOST]] * FITS, answers
    row = _row()
    assert row['reported_disk_least'] == LEAST_GB
    assert row['claimed_disk_gb'] == FITS * ROOT_GB
    # One after another, each worker in turn: still nothing more.
    for n in range(2):
        assert _ask(cluster, 200 + n) is None
    assert len(usage.pending_claims()) == FITS

    # The compute deletes them; then builds what fits, and reports it.
    for placement in usage.pending_claims():
        cluster.api.delete_instance_info(cluster.admin_ctxt, HOST,
                                         placement['instance_uuid'])
    daemons.wait_for(lambda: _row()['claimed_instances'] == 0, 30,
                     what='the deletions to reach the inventory')
    built = [fixtures.uuid(300 + n) for n in range(FITS + 1)]
    for uuid in built:
        cluster.api.schedule_run_instance(
            cluster.ctxt, fixtures.request(root_gb=ROOT_GB,
                                           instance_uuid=uuid), [uuid])
    daemons.wait_for(
        lambda: (_row()['reported_instances'], _row()['claimed_instances'])
        == (FITS, 0), 60, what='the compute to report what it built')
    row = _row()
    # Moved from pending to reported: the compute's own measure counts
    # them now, and nothing is pending against it any more.
    assert row['reported_disk_least'] == LEAST_GB - FITS * ROOT_GB
    assert row['reported_disk_gb'] == FITS * ROOT_GB
    # Two workers take the casts at once, so which FITS of them won is
    # not fixed; how many is.
    won = {p['instance_uuid'] for p in usage.placements_get(built).values()}
    assert len(won) == FITS and won <= set(built), won
    # Neither lost (another 8 GB does not fit) nor counted twice (what
    # is really left, 4 GB, does).
    assert _ask(cluster, 400) is None
    left = LEAST_GB - FITS * ROOT_GB
    assert _ask(cluster, 401, root_gb=left) == [HOST]
    assert _ask(cluster, 402, root_gb=1) is None
    assert _served_by_both_workers(cluster)
