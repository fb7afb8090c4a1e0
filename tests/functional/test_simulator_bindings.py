"""The simulator's host routing keys come back when its queue is lost.

A simulator serves every host's ``run_instance`` from one queue, bound
once per host routing key (``scheduler.simulator.routing``).  A broker
restart loses that non-durable queue; oslo.messaging declares it again
when it reconnects, with its own binding only.  Before, every build cast
to a simulated host was then unroutable for as long as the simulator
ran.  Deleting the queue under the running simulator is what a restart
does to it (the shared broker is not restarted).
"""

import uuid as uuid_lib

import kombu

from scheduler.db import api as db_api
from scheduler.simulator import routing
from tests.functional import daemons
from tests.functional.test_scheduler_service import make_spec
from tests.functional.test_scheduler_service import wait_for_hosts

BROKER = 'amqp://guest:guest@127.0.0.1:5672//'


def _queue_exists(name: str) -> bool:
    with kombu.Connection(BROKER, connect_timeout=5) as conn:
        channel = conn.channel()
        try:
            channel.queue_declare(queue=name, passive=True)
            return True
        except Exception:  # NOT_FOUND closes the channel
            return False


def _delete_queue(name: str) -> None:
    with kombu.Connection(BROKER, connect_timeout=5) as conn:
        conn.default_channel.queue_delete(queue=name)


def _active(conf, url: str) -> set:
    conf.config(connection=url, group='database')
    db_api.reset_engine()
    try:
        return {i['instance_uuid'] for i in db_api.instance_get_all()
                if i['status'] == 'active'}
    finally:
        db_api.reset_engine()


def test_host_bindings_come_back_after_the_queue_is_lost(cluster, conf,
                                                         tmp_path):
    db = 'sqlite:///%s' % (tmp_path / 'inventory.sqlite')
    daemon = cluster.start_scheduler(db)
    server = daemons.unique_topic('fleet')
    cluster.start_sim(hosts=3, extra_args=('--server-name', server))
    hosts = wait_for_hosts(conf, db, 3)
    queue = routing.queue_name(cluster.compute_topic, server)

    _delete_queue(queue)
    daemons.wait_for(lambda: _queue_exists(queue), 30,
                     what='oslo.messaging to declare the fleet queue again')

    # Not the first host: before, the fleet's queue came back with
    # oslo.messaging's own binding and none of the hosts'.  Each try is
    # a new build forced onto that host; one must be delivered.
    target = hosts[-1]

    def one_build_delivered() -> bool:
        uuid = str(uuid_lib.uuid4())
        cluster.api.schedule_run_instance(
            cluster.admin_ctxt, make_spec(force_hosts=[target]), [uuid])
        outcome = daemons.wait_for(
            lambda: ('active' if uuid in _active(conf, db) else None)
            or ('lost' if 'Build of instance %s lost' % uuid in daemon.log()
                else None), 20,
            what='build %s to be delivered or reported lost' % uuid)
        return outcome == 'active'
    daemons.wait_for(one_build_delivered, 30, interval=0.5,
                     what='a build cast to %s to reach the simulator'
                     % target)


def test_a_stopped_simulator_removes_the_queues_only_it_used(cluster, conf):
    # Before, stopping left the compute topic queue on the broker, and
    # nothing said how to remove what stays.
    server = daemons.unique_topic('fleet')
    sim = cluster.start_sim(hosts=2, extra_args=('--server-name', server))
    queue = routing.queue_name(cluster.compute_topic, server)
    daemons.wait_for(lambda: _queue_exists(queue), 60,
                     what='the simulator to declare its queue')
    assert _queue_exists(cluster.compute_topic)
    assert sim.stop() == 0
    assert not _queue_exists(queue)
    assert not _queue_exists(cluster.compute_topic)
    assert 'Left on the broker for other processes' in sim.log()
