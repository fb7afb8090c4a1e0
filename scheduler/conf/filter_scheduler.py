"""Options in ``[filter_scheduler]``: the filter scheduler's pipeline."""

from oslo_config import cfg

filter_group = cfg.OptGroup(
    'filter_scheduler', title='Filter scheduler options',
    help='Which filters and weighers the filter scheduler runs, and how it '
         'picks among the best hosts.')

filter_opts = [
    cfg.MultiStrOpt(
        'available_filters',
        default=['scheduler.filters.all_filters'],
        mutable=True,
        help="""
Filter classes the filter scheduler may use.  May be given several
times.  Each value is one of:

* ``scheduler.filters.all_filters``: every filter registered in the
  ``scheduler.filters`` entry point namespace, in-tree or installed by
  another package;
* the dotted path of a filter class, for example
  ``mypackage.filters.TroveImageFilter``;
* the name of one entry point in the ``scheduler.filters`` namespace.

A filter must be available *and* named in ``enabled_filters`` to run.
A reload (SIGHUP) picks up new class paths; a package installed after
start-up (new entry points) needs a restart.

Related options:

* ``enabled_filters``
"""),
    cfg.ListOpt(
        'enabled_filters',
        default=['ComputeFilter', 'AvailabilityZoneFilter',
                 'ComputeCapabilitiesFilter', 'ImagePropertiesFilter',
                 'RamFilter', 'DiskFilter', 'VCPUFilter'],
        mutable=True,
        help="""
Filters to run, by class name, in this order.  Put the filters that
remove the most hosts cheaply first.  Every name must be the class name
of a filter in ``available_filters``; an unknown name stops the
service at start-up with an error naming it.

Related options:

* ``available_filters``
"""),
    cfg.ListOpt(
        'weight_classes',
        default=['scheduler.weights.all_weighers'],
        mutable=True,
        help="""
Weighers that rank the hosts that passed the filters.  Each value is
``scheduler.weights.all_weighers`` (every weigher in the
``scheduler.weighers`` entry point namespace), the dotted path of a
weigher class, or an entry point name.  Each weigher's raw weights are
normalised to [0, 1] over the candidates, multiplied by its multiplier
and summed.

Related options:

* every ``*_weight_multiplier`` option of this group, and
  ``[metrics] weight_multiplier``: each weigher's multiplier, which
  aggregate metadata of the same name overrides per host
"""),
    cfg.IntOpt(
        'host_subset_size',
        default=1,
        min=1,
        mutable=True,
        help="""
Size of the subset of best hosts from which the scheduler picks one at
random.  ``1`` always picks the best-weighed host; a larger value
spreads concurrent requests over more hosts, which lowers the chance
that several schedulers race for the same host.  Values larger than the
number of candidates are capped.
"""),
    cfg.IntOpt(
        'max_concurrent_decisions',
        default=1,
        min=1,
        help="""
How many requests one worker filters and weighs at the same time; the
others wait their turn, in the order they came.  A request of many
instances that has had its turn for a few milliseconds lets those
waiting go first between two of its instances, so short requests are
not held up behind it.  Claims (the database transaction that follows
a choice) are not counted: they overlap with the next request's
choice.

Filtering and weighing is CPU-bound Python, so a worker gains nothing
by running two at once: under the ``threading`` executor they contend
for the interpreter lock with the threads that receive messages and
send replies, and under either executor a host's report or claim that
arrives while two decisions read the host columns costs a copy of the
columns.  Raise it only if an out-of-tree filter or weigher waits on
I/O (a call to another service): other requests then choose while it
waits.

Related options:

* ``[scheduler] executor``
* ``[scheduler] workers``
"""),
    cfg.BoolOpt(
        'shuffle_best_same_weighed_hosts',
        default=False,
        mutable=True,
        help="""
Shuffle the hosts that share the best weight before picking among the
best ``host_subset_size``.  With identical hosts (all weighing the same)
this spreads instances that would otherwise all go to the first such
host in the list, which matters most when ``host_subset_size`` is 1.

Related options:

* ``host_subset_size``
"""),
    cfg.BoolOpt(
        'columnar',
        default=True,
        mutable=True,
        help="""
Filter and weigh over columns of numbers (numpy arrays kept current as
reports, claims and aggregate changes arrive) instead of host by host.
The decisions are the same: the same filter walk, survivors, weights
and choice.  Filters and weighers with a vectorised form
(``filter_columns``, ``weigh_columns``: every in-tree one that reads
numbers, zones or supported instance types) run once over all hosts;
any other one, in-tree or out-of-tree, runs host by host on the hosts
that survived the filters before it, as it always did.  Requests that
force hosts or nodes, or name a ``requested_destination``, and
``explain``, always take the per-host path.  ``false`` takes the
per-host path for every request (and keeps no columns).

Related options:

* ``enabled_filters``, ``weight_classes``: the plugins that run
"""),
    cfg.FloatOpt(
        'ram_weight_multiplier',
        default=1.0,
        mutable=True,
        help="""
Multiplier of the RAMWeigher.  Positive values spread instances over
the hosts with the most free RAM; negative values stack them onto the
hosts with the least free RAM; ``0.0`` disables the weigher.

Related options:

* ``weight_classes``
"""),
    cfg.FloatOpt(
        'cpu_weight_multiplier',
        default=1.0,
        mutable=True,
        help="""
Multiplier of the CPUWeigher.  Positive values spread instances over
the hosts with the most free vCPUs; negative values stack them;
``0.0`` disables the weigher.

Related options:

* ``weight_classes``
"""),
    cfg.FloatOpt(
        'disk_weight_multiplier',
        default=1.0,
        mutable=True,
        help="""
Multiplier of the DiskWeigher.  Positive values spread instances over
the hosts with the most free disk; negative values stack them;
``0.0`` disables the weigher.

Related options:

* ``weight_classes``
"""),
]


def list_opts() -> dict:
    return {filter_group: filter_opts}
