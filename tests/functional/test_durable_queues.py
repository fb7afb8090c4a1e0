"""Durable and quorum queues, as doc/admin-guide.md tells operators to set.

``[oslo_messaging_rabbit] rabbit_quorum_queue`` or ``amqp_durable_queues``
keep the computes' queues, and what is queued in them, across a broker
restart (issue 11, item 3).  Here the scheduler, a simulated fleet and
this caller all run with one of them, on a control exchange of their
own (a durable party cannot share an exchange another party declared
non-durable), and the queues the broker holds are asked for their type
and durability.
"""

import json
import shutil
import subprocess
import uuid

import pytest

from scheduler.db import api as db_api
from tests.functional import daemons
from tests.functional import services
from tests.functional.test_scheduler_service import make_spec
from tests.functional.test_scheduler_service import uuids
from tests.functional.test_scheduler_service import wait_for_hosts


def _rabbitmqctl(*args) -> list:
    """``rabbitmqctl <args>`` as JSON; skip (CI: fail) without it."""
    path = shutil.which('rabbitmqctl')
    if path is None:
        services.unreachable('rabbitmqctl not found: cannot ask the broker '
                             'what its queues are')
    done = subprocess.run([path, '-q', '--formatter', 'json'] + list(args),
                          capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        services.unreachable('rabbitmqctl %s failed: %s'
                             % (' '.join(args), done.stderr.strip()))
    return json.loads(done.stdout)


def _active(conf, url: str, instance: str) -> bool:
    conf.config(connection=url, group='database')
    db_api.reset_engine()
    try:
        return any(i['instance_uuid'] == instance and i['status'] == 'active'
                   for i in db_api.instance_get_all())
    finally:
        db_api.reset_engine()


@pytest.mark.parametrize('option, queue_type', [
    ('rabbit_quorum_queue', 'quorum'),
    ('amqp_durable_queues', 'classic'),
])
def test_scheduling_over_durable_queues(cluster, conf, tmp_path, option,
                                        queue_type):
    db = 'sqlite:///%s' % (tmp_path / 'inventory.sqlite')
    exchange = cluster.private_exchange({option: True})
    cluster.start_scheduler(db)
    cluster.start_sim(hosts=2)
    hosts = wait_for_hosts(conf, db, 2)

    [[selection]] = cluster.api.select_destinations(cluster.ctxt,
                                                    make_spec(), uuids(1))
    assert selection.service_host in hosts
    instance = str(uuid.uuid4())
    cluster.api.schedule_run_instance(cluster.ctxt, make_spec(), [instance])
    daemons.wait_for(lambda: _active(conf, db, instance), 30,
                     what='the build to reach the compute and be reported')

    queues = {q['name']: q for q in _rabbitmqctl('list_queues', 'name',
                                                 'type', 'durable')}
    [fleet] = cluster.fleet_names
    # Requests, compute reports and operator casts, each shared by the
    # topic and addressed to this scheduler; run_instance to the fleet.
    expected = [cluster.topic + suffix + server
                for suffix in ('', '_reports', '_ops')
                for server in ('', '.sched')]
    expected += [cluster.compute_topic, '%s.%s' % (cluster.compute_topic,
                                                   fleet)]
    for name in expected:
        assert name in queues, '%s is not on the broker' % name
        assert (queues[name]['type'], queues[name]['durable']) == (
            queue_type, True), queues[name]
    exchanges = {e['name']: e for e in _rabbitmqctl('list_exchanges', 'name',
                                                    'durable')}
    for name in (exchange, cluster.topic + '_reports',
                 cluster.topic + '_ops'):
        assert exchanges[name]['durable'] is True, exchanges[name]
