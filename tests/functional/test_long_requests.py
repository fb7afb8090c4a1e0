"""A long request holds no one up: other callers and host reports go on.

Issue 11, item 8: a valid ``num_instances=1000`` once blocked every other
caller for seconds.  Requests are capped now, but the largest accepted
one (``[limits] max_instances_per_request`` instances, each filtered
and weighed over a few hundred hosts, through a JsonFilter query) still
takes a while; the service must serve short requests and process host
reports while it runs, on either concurrency runtime.

What is asserted is an order, not a duration: every short request, and
a host that first reports during the long one, must be answered before
the long one is.  Under eventlet the long request lets others run at
each instance (``concurrency.cooperative_yield``, and oslo.db's yield
when a database connection goes back to its pool); under threading
each request has its own thread.  A service that serves one request at
a time fails this test (checked with ``[DEFAULT]
executor_thread_pool_size = 1``: the short requests then wait behind
the long one, on both runtimes).
"""

import json
import threading

import pytest

from scheduler import context
from scheduler.filters import json_filter
from scheduler import objects
from scheduler import rpcapi
from tests.functional import daemons
from tests.functional.test_scheduler_service import make_spec
from tests.functional.test_scheduler_service import uuids
from tests.functional.test_scheduler_service import wait_for_hosts

HOSTS = 300
SHORT_REQUESTS = 5

EXTRA_CONFIG = """
[filter_scheduler]
enabled_filters = %s

[limits]
max_instances_per_request = %d

[oslo_messaging_rabbit]
# The RPC servers stop within a sixth of this (their poll timeout),
# not 10 s: the test stays short.
heartbeat_timeout_threshold = 10
"""

#: JsonFilter runs too, with the longest query it accepts, evaluated
#: for every host for every instance.
FILTERS = 'ComputeFilter,RamFilter,DiskFilter,VCPUFilter,JsonFilter'


def _longest_query() -> str:
    """127 operators and variables (JsonFilter accepts 128), every
    simulated host passing."""
    clause = ['>=', '$free_ram_mb', 0]
    return json.dumps(['and'] + [clause] * ((json_filter.MAX_TERMS - 1)
                                            // 2))


class _Completions:
    """The order in which calls were answered, across threads."""

    def __init__(self):
        self._lock = threading.Lock()
        self.order: list = []
        self.errors: list = []

    def record(self, name: str, call) -> None:
        try:
            call()
        except Exception as e:  # reported by the test
            with self._lock:
                self.errors.append('%s: %r' % (name, e))
        with self._lock:
            self.order.append(name)


@pytest.mark.parametrize('executor', ['eventlet', 'threading'])
def test_short_requests_and_reports_interleave_with_a_long_one(
        cluster, conf, tmp_path, executor):
    db = 'sqlite:///%s' % (tmp_path / 'inventory.sqlite')
    limit = 100
    daemon = cluster.start_scheduler(
        db, scheduler_opts={'executor': executor, 'service_down_time': 60,
                            'report_interval': 10},
        extra=EXTRA_CONFIG % (FILTERS, limit))
    cluster.start_sim(hosts=HOSTS, report_interval=10, debug=False)
    wait_for_hosts(conf, db, HOSTS)
    assert 'executor %s' % executor in daemon.log()

    done = _Completions()
    long_ctxt = context.RequestContext(user_id='tester',
                                       project_id='functional')
    long_api = rpcapi.SchedulerAPI(timeout=120)
    long_spec = make_spec(ram=64, num=limit,
                          scheduler_hints={'query': [_longest_query()]})
    long_call = threading.Thread(target=done.record, args=(
        'long', lambda: long_api.select_destinations(
            long_ctxt, long_spec, uuids(limit))))
    long_call.start()
    try:
        # The service has begun the long request when its first
        # filter step is logged under that request's id.
        daemons.wait_for(
            lambda: long_ctxt.request_id in daemon.log(), 60,
            what='the long request to start')

        # A host the service has never heard of reports now: it must
        # be processed (and schedulable) before the long request ends.
        late = objects.HostState(host='late-001', nodename='late-001',
                                 memory_mb=4096, vcpus=4, local_gb=100)
        cluster.api.update_service_capabilities(cluster.admin_ctxt, late)
        done.record('late host', lambda: daemons.wait_for(
            lambda: cluster.api.select_destinations(
                cluster.admin_ctxt,
                make_spec(ram=64, force_hosts=['late-001']),
                uuids(1)), 60, interval=0.05,
            what='the late host to be schedulable'))
        for index in range(SHORT_REQUESTS):
            done.record('short %d' % index,
                        lambda: cluster.api.select_destinations(
                            cluster.ctxt, make_spec(ram=64), uuids(1)))
    finally:
        long_call.join(120)

    assert done.errors == []
    assert done.order[-1] == 'long', (
        'the long request was answered before: %s' % done.order)
    assert len(done.order) == SHORT_REQUESTS + 2
