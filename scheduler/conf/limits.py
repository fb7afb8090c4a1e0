"""Options in ``[limits]``: what one caller may ask of the service.

The scheduler serves many callers from one process.  These bounds keep
a single request or message (by mistake or on purpose) from holding a
worker, eating memory or flooding the log; whatever exceeds them is
refused with ``InvalidRequest`` / ``MalformedObject`` and one log line.
"""

from oslo_config import cfg

limits_group = cfg.OptGroup(
    'limits', title='Request and message limits',
    help='Bounds on what one request or message may ask of the service.')

limits_opts = [
    cfg.IntOpt(
        'max_instances_per_request',
        default=100,
        min=1,
        help="""
Most instances one ``select_destinations`` or ``schedule_run_instance``
request may place (its ``num_instances``).  Every instance runs the
filter and weigher pipeline over every candidate host, so the cost of a
request grows with this number times the number of hosts; larger
requests are refused with ``InvalidRequest``.  The default matches the
scale of nova's default instance quota.

Related options:

* ``json_query_max_cost``: the other per-request cost bound
* ``[scheduler] max_attempts``: alternates returned per instance
"""),
    cfg.IntOpt(
        'json_query_max_cost',
        default=1000000,
        min=1,
        help="""
Largest cost of a JsonFilter ``query`` scheduler hint: the number of
operators and values in the query times the number of known hosts (how
many evaluations one instance costs).  Requests over it are refused
with ``InvalidRequest`` before any filter runs.

Related options:

* ``max_instances_per_request``
* ``[filter_scheduler] enabled_filters``: the query is only read when
  ``JsonFilter`` is enabled
"""),
    cfg.IntOpt(
        'max_message_bytes',
        default=1048576,
        min=1024,
        help="""
Largest message body, in bytes, the service decodes from the bus.  A
larger body is dropped before it is parsed (one warning line, counted
in ``scheduler_rejected_messages_total``); its caller gets no reply and
times out.  A large report (a host with thousands of instances) is
about 100 KiB.  Set RabbitMQ's own ``max_message_size`` too, so that
the broker refuses such bodies before they reach any consumer.

Related options:

* ``max_argument_depth``, ``max_argument_items``: the shape of what
  is decoded
"""),
    cfg.IntOpt(
        'max_argument_depth',
        default=32,
        min=4,
        help="""
Deepest nesting of lists and dicts accepted in the arguments of an RPC
call or cast; a deeper one is refused with ``InvalidRequest`` before
any object is built from it.  A versioned RequestSpec nests about 10
levels.

Related options:

* ``max_argument_items``, ``max_message_bytes``
"""),
    cfg.IntOpt(
        'max_argument_items',
        default=100000,
        min=100,
        help="""
Most values (every list item, dict key and value counted) accepted in
the arguments of one RPC call or cast; more is refused with
``InvalidRequest`` before any object is built from it.

Related options:

* ``max_argument_depth``, ``max_message_bytes``
"""),
    cfg.IntOpt(
        'rejection_log_interval',
        default=60,
        min=0,
        help="""
Seconds during which a repeated, identical rejection (the same method,
error type and reason) is not logged again.  The first is logged as one
warning line; the next one logged after the interval says how many
were suppressed.  Every rejection is counted in the
``scheduler_rejected_requests_total`` metric regardless.  0 logs every
rejection.

Related options:

* ``[prometheus] enabled``: where the counter is published
"""),
]


def list_opts() -> dict:
    return {limits_group: limits_opts}
