"""Options in ``[scheduler]``: the service and the choice of driver."""

from oslo_config import cfg

scheduler_group = cfg.OptGroup(
    'scheduler', title='Scheduler service options',
    help='How the scheduler service listens and which driver it runs.')

executor_opt = cfg.StrOpt(
    'executor',
    default='eventlet',
    choices=[('eventlet', 'green threads; the standard library is '
                          'monkey-patched (the default)'),
             ('threading', 'native threads: oslo.service\'s threading '
                           'backend and oslo.messaging\'s threading '
                           'executor')],
    help="""
The concurrency runtime of the service, the simulator and the demo.
Read before anything else starts (from the same configuration files),
so a change needs a restart, not a SIGHUP.  The environment variable
``SCHEDULER_EXECUTOR`` overrides it.  Both runtimes give the same
answers; ``threading`` is where upstream OpenStack is heading.

Related options:

* ``[DEFAULT] executor_thread_pool_size`` (oslo.messaging): requests
  served at once by one worker
* ``workers``
""")

scheduler_opts = [
    executor_opt,
    cfg.StrOpt(
        'topic',
        default='scheduler',
        help="""
The message bus topic the scheduler service listens on.  Callers
(``scheduler.rpcapi.SchedulerAPI``) and compute agents send to this
topic; every scheduler on the bus with the same topic shares the work.

Related options:

* ``[DEFAULT] host``: the server name of this scheduler on the topic
* ``[compute] topic``: where ``run_instance`` casts go
"""),
    cfg.StrOpt(
        'driver',
        default='filter_scheduler',
        help="""
The scheduler driver to run.

Either the name of an entry point in the ``scheduler.drivers`` namespace
(in-tree: ``filter_scheduler``, ``chance_scheduler``, ``ip_scheduler``)
or the dotted path of a class that inherits from
``scheduler.driver.Scheduler``, for example
``mypackage.ip_scheduler.IPScheduler``.  An unknown value stops the
service at start-up with an error naming this option.

Related options:

* ``[filter_scheduler]`` options apply to ``filter_scheduler``
* ``[ip_scheduler]`` options apply to ``ip_scheduler``
"""),
    cfg.IntOpt(
        'workers',
        default=1,
        min=1,
        help="""
Number of scheduler worker processes.  Every worker consumes the same
topic queue (requests are shared round robin); ``report_workers`` of
them consume the host report queues, and every worker reads the
reports the others took from the inventory, so each keeps a full view
of the hosts.  Claims are written to the inventory before a caller is
answered, and every worker reads the others' before it chooses, so any
number of workers (and of scheduler services sharing ``[database]
connection``) place exactly the capacity there is.

Related options:

* ``report_workers``
"""),
    cfg.IntOpt(
        'report_workers',
        default=1,
        min=0,
        help="""
How many workers of this service consume the compute report queues:
the shared intake (full reports, API 1.5) and the liveness messages
(API 1.6).  0: every worker, as before this option.

Each report on those queues is taken by one consumer of the deployment
whatever their number; the workers that do not consume them read what
changed from the inventory before each request (and the times of quiet
hosts periodically), as they read the reports other workers took.  A
consumer more only adds CPU (each message wakes a process of its own),
so the default, 1, costs a service about one report's work per report.
But one worker takes reports at most as fast as one core does: past
about that rate (doc/performance.md) reports wait on the bus, the
report lag grows (``scheduler_report_lag_seconds``, a WARNING once it
passes ``report_interval``) and hosts are judged down late rather than
wrongly.  Raise it (or add services) for a larger fleet.

The turns are exclusive locks on files under ``[DEFAULT]
state_path``/report-workers, one per turn and service (topic and
``[DEFAULT] host``); workers without one try to take a free turn every
second, so when a consumer dies (even by SIGKILL) another starts
consuming within about a second, and what the dead one had not
acknowledged is delivered again.  A state directory that cannot hold
the files makes every worker consume, with a WARNING.

The 1.4 fanout (``<topic>_reports``: reports of older computes and
every compute's instance news) is still consumed by every worker: a
fanout message is not delivered again, so a worker killed while the
others did not consume it would lose it.  A restart is needed to change
this option.

Related options:

* ``workers``
* ``report_interval``, ``service_down_time``
* ``report_intake``, ``report_liveness`` (the computes' side)
* ``[DEFAULT] state_path``
"""),
    cfg.IntOpt(
        'service_down_time',
        default=60,
        min=1,
        help="""
Seconds after a host's last report at which the scheduler considers it
down and stops scheduling to it.  Should be several times
``report_interval`` so that one lost report does not take a host out.

Related options:

* ``report_interval``
"""),
    cfg.IntOpt(
        'report_interval',
        default=10,
        min=1,
        help="""
Seconds between two reports of a compute agent's host state
(``update_service_capabilities`` fanout casts).  Used by the compute
simulator; real compute agents have their own setting and should keep
it well below ``service_down_time``.

Related options:

* ``service_down_time``
"""),
    cfg.BoolOpt(
        'report_intake',
        default=True,
        help="""
Compute side: send this compute's reports to the schedulers' shared
intake queue (API 1.5), where one worker of the whole deployment takes
each report, instead of the fanout cast that every worker of every
scheduler takes (1.4 and before).  The intake costs the deployment one
report's work instead of one per worker.  The worker that takes a new
or changed report writes it to the inventory within a fraction of a
second, before it uses it, and every worker reads the changed reports
before each request, so that every worker knows a host as soon as one
does; a report that only says the host is alive is written at the
worker's next flush (``periodic_task_interval``).

A compute uses the intake only when the schedulers take it: its
``[upgrade_levels] scheduler`` cap allows 1.5, or, without a cap, the
intake queue has consumers (asked every 15 s until it has); otherwise it
sends the 1.4 fanout.  The compute's broker user needs write (and
configure) permission on the ``<topic>_reports`` exchange as well as
``<topic>_reports_fanout`` (admin guide, "Security and trust"): a
report the broker refuses on the intake is sent by the fanout instead,
with a warning, and the compute tries the intake again ten minutes
later.  Set it to false to keep every report on the fanout.

Related options:

* ``periodic_task_interval``
* ``[upgrade_levels] scheduler``
* ``report_liveness``
"""),
    cfg.BoolOpt(
        'report_liveness',
        default=True,
        help="""
Compute side: when this compute's state has not changed since its last
full report, send a small liveness message (API 1.6: the host, the node
and a digest of that report) instead of the full report.  Schedulers
renew such a host without decoding or writing a report, and ask the
compute for its full report (compute API 1.1 ``send_report``) when they
cannot renew it: the digest is not that of the report they hold, the
host was down, or the inventory's usage of the node differs from what
its report says (an instance deleted or built behind the scheduler's
back), so that reconciliation still runs on a full report.  Only a
compute that serves ``send_report`` sends liveness messages (the
simulator's hosts do once its RPC server runs); turn this off for a
compute that reports without serving it.  Needs ``report_intake``;
used only when the schedulers speak 1.6 (the same cap and queue checks
as the intake), so an older scheduler still gets full reports.

Related options:

* ``report_intake``
* ``[upgrade_levels] scheduler``
"""),
    cfg.IntOpt(
        'periodic_task_interval',
        default=10,
        min=1,
        help="""
Seconds between runs of the scheduler's periodic tasks: writing new
host reports to the inventory, logging hosts that went silent and
re-reading aggregates changed by other workers.
"""),
    cfg.IntOpt(
        'claim_attempts',
        default=10,
        min=1,
        help="""
How many times one request may be placed before it fails with
NoValidHost.  The claims of a request's instances are made together,
after every instance was given a node; they fail when another worker
or scheduler filled one of those nodes between this worker's choice
and the claims (the inventory checks every claim).  The node is then
refreshed and the request placed again.  Conflicts are counted in
``scheduler_claim_conflicts_total``.

Related options:

* ``[filter_scheduler] host_subset_size``: the first try is a random
  pick among that many best hosts, which spreads concurrent requests
* ``workers``
"""),
    cfg.IntOpt(
        'cast_takeover_time',
        default=0,
        min=0,
        help="""
Seconds after which a ``schedule_run_instance`` cast that a worker took
and has not finished with is served again by another worker (0: the
value of ``service_down_time``).

oslo.messaging acknowledges a cast before a worker serves it, so the
broker cannot redeliver a cast whose worker was killed: each worker
records every such cast in the inventory (table ``taken_casts``) until
the builds of its instances are sent or it ends otherwise, and every
worker's
periodic task (each ``periodic_task_interval``) takes over the rows
older than this, one worker each, and serves them as fresh casts
(logged at INFO with the instance uuids); an instance claimed and not
yet listed by its compute keeps its placement, and its build is sent
to that host again.  A row is renewed at each
instance the worker claims.  The default is the age at which claims
never confirmed expire: by then the worker that took the cast is dead
or stuck.  A worker still serving a cast that was taken over stops at
its next claim, which the inventory refuses, so a short value costs
only work done twice, never an instance built twice.

Related options:

* ``service_down_time``
* ``periodic_task_interval``
"""),
    cfg.IntOpt(
        'max_attempts',
        default=3,
        min=1,
        help="""
How many hosts a caller may try for one instance: the first choice plus
``max_attempts - 1`` alternates returned by ``select_destinations`` when
the caller asks for alternates.
"""),
    cfg.BoolOpt(
        'accept_legacy_casts',
        default=True,
        help="""
Whether the request topic (``topic``) still takes the casts that change
the scheduler's state: compute reports and instance info
(``update_service_capabilities``, ``update/delete/sync_instance_info``)
and operator casts (``update_aggregates``, ``delete_aggregate``).
Clients of RPC API 1.4 and later send them on their own topics and
exchanges (``<topic>_reports`` and ``<topic>_ops``), which broker
permissions can restrict to the computes' and operators' credentials;
older clients send them on the request topic.  Callers may publish
there too, so each such cast is held to the broker user that published
it: a compute cast only from the service's own user, ``[trust]
admin_users`` or a compute user that ``[trust] compute_users`` names
(not by its ``*`` entry) for its own host; an operator cast only from an
admin context of the first two.
Keep true while older computes or tools run; set false once all are
upgraded, so that the request topic takes no state-changing cast at all
(see the admin guide, "Security and trust").

Related options:

* ``topic``: the request topic; the other two are derived from it
* ``[upgrade_levels] scheduler``: clients capped below 1.4 send these
  casts on the request topic
"""),
]


def list_opts() -> dict:
    return {scheduler_group: scheduler_opts}
