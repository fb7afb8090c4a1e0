"""Options of the filter and weigher catalogue.

The filters and weighers beyond the core resource ones read these:
most live in ``[filter_scheduler]`` next to the pipeline options, the
metrics filter and weigher in ``[metrics]`` (as in nova).  Every
weigher multiplier here may be overridden per host by the same key in
the metadata of an aggregate of the host (the smallest value wins).
"""

from oslo_config import cfg

from scheduler.conf import filter_scheduler

filter_group = filter_scheduler.filter_group

metrics_group = cfg.OptGroup(
    'metrics', title='Metrics weigher and filter options',
    help='Which metrics reported by the computes the MetricsWeigher '
         'weighs, how much each counts, and what happens to hosts that '
         'do not report them.')

filter_opts = [
    cfg.StrOpt(
        'aggregate_image_properties_isolation_namespace',
        mutable=True,
        help="""
Namespace of the aggregate metadata keys AggregateImagePropertiesIsolation
compares with image properties.  When set, only keys that start with
this namespace followed by
``aggregate_image_properties_isolation_separator`` are compared (for
example ``isolation.os_distro`` with namespace ``isolation`` and
separator ``.``); other aggregate metadata is ignored.  When unset,
every aggregate metadata key is compared with the image property of the
same name.

Related options:

* ``aggregate_image_properties_isolation_separator``
* ``enabled_filters``: must name ``AggregateImagePropertiesIsolation``
"""),
    cfg.StrOpt(
        'aggregate_image_properties_isolation_separator',
        default='.',
        mutable=True,
        help="""
Separator between the namespace and the key of the aggregate metadata
AggregateImagePropertiesIsolation compares with image properties.  Only
used when ``aggregate_image_properties_isolation_namespace`` is set.

Related options:

* ``aggregate_image_properties_isolation_namespace``
"""),
    cfg.IntOpt(
        'max_io_ops_per_host',
        default=8,
        min=0,
        mutable=True,
        help="""
Maximum number of concurrent I/O intensive operations (instances being
built, resized, snapshotted, migrated, rescued or unshelved) a host may
have and still be chosen.  IoOpsFilter drops hosts with this many or
more; AggregateIoOpsFilter uses the ``max_io_ops_per_host`` metadata of
the host's aggregates instead (the smallest wins) and falls back to
this value.  Every instance the scheduler places counts as one more
operation until the compute reports again.

Related options:

* ``enabled_filters``: ``IoOpsFilter`` or ``AggregateIoOpsFilter``
* ``io_ops_weight_multiplier``
"""),
    cfg.IntOpt(
        'max_instances_per_host',
        default=50,
        min=1,
        mutable=True,
        help="""
Maximum number of instances a host may run and still be chosen.
NumInstancesFilter drops hosts with this many or more;
AggregateNumInstancesFilter uses the ``max_instances_per_host``
metadata of the host's aggregates instead (the smallest wins) and
falls back to this value.

Related options:

* ``enabled_filters``: ``NumInstancesFilter`` or
  ``AggregateNumInstancesFilter``
* ``num_instances_weight_multiplier``
"""),
    cfg.ListOpt(
        'isolated_images',
        default=[],
        mutable=True,
        help="""
Image ids that may only run on ``isolated_hosts`` (IsolatedHostsFilter).
An instance of one of these images passes only isolated hosts.

Related options:

* ``isolated_hosts``
* ``restrict_isolated_hosts_to_isolated_images``
* ``enabled_filters``: must name ``IsolatedHostsFilter``
"""),
    cfg.ListOpt(
        'isolated_hosts',
        default=[],
        mutable=True,
        help="""
Host names reserved for ``isolated_images`` (IsolatedHostsFilter).
Whether they also refuse every other image is set by
``restrict_isolated_hosts_to_isolated_images``.

Related options:

* ``isolated_images``
* ``restrict_isolated_hosts_to_isolated_images``
"""),
    cfg.BoolOpt(
        'restrict_isolated_hosts_to_isolated_images',
        default=True,
        mutable=True,
        help="""
Whether ``isolated_hosts`` run only ``isolated_images``.  When True an
instance of any other image, or one booted from a volume (no image),
never lands on an isolated host.  When False isolated hosts take any
instance, and only instances of isolated images are confined to them.

Related options:

* ``isolated_images``
* ``isolated_hosts``
"""),
    cfg.FloatOpt(
        'io_ops_weight_multiplier',
        default=-1.0,
        mutable=True,
        help="""
Multiplier of the IoOpsWeigher, which weighs hosts by their number of
concurrent I/O intensive operations.  Negative values (the default)
prefer lightly loaded hosts; positive values prefer busy hosts; ``0.0``
disables the weigher.  An aggregate's ``io_ops_weight_multiplier``
metadata overrides it for the aggregate's hosts.

Related options:

* ``weight_classes``
* ``max_io_ops_per_host``
"""),
    cfg.FloatOpt(
        'pci_weight_multiplier',
        default=1.0,
        min=0.0,
        mutable=True,
        help="""
Multiplier of the PCIWeigher, which keeps hosts with PCI devices free
for the requests that need them: instances without PCI requests prefer
hosts with fewer devices, instances with PCI requests prefer the host
whose devices they fit most tightly.  Only positive values (or ``0.0``
to disable) are allowed: a negative value would push instances without
PCI requests onto PCI hosts.  A negative aggregate override
(``pci_weight_multiplier`` metadata) is logged and treated as ``0.0``.

Related options:

* ``weight_classes``
* ``enabled_filters``: ``PciPassthroughFilter`` or
  ``NUMATopologyFilter`` should run for this weigher to be useful
"""),
    cfg.FloatOpt(
        'soft_affinity_weight_multiplier',
        default=1.0,
        min=0.0,
        mutable=True,
        help="""
Multiplier of the ServerGroupSoftAffinityWeigher: for members of a
server group with the ``soft-affinity`` policy, hosts running more
members of the group weigh more.  Only positive values (or ``0.0`` to
disable) are allowed; a negative aggregate override
(``soft_affinity_weight_multiplier`` metadata) is logged and treated as
``0.0``.

Related options:

* ``weight_classes``
* ``soft_anti_affinity_weight_multiplier``
"""),
    cfg.FloatOpt(
        'soft_anti_affinity_weight_multiplier',
        default=1.0,
        min=0.0,
        mutable=True,
        help="""
Multiplier of the ServerGroupSoftAntiAffinityWeigher: for members of a
server group with the ``soft-anti-affinity`` policy, hosts running
more members of the group weigh less.  Only positive values (or
``0.0`` to disable) are allowed; a negative aggregate override
(``soft_anti_affinity_weight_multiplier`` metadata) is logged and
treated as ``0.0``.

Related options:

* ``weight_classes``
* ``soft_affinity_weight_multiplier``
"""),
    cfg.FloatOpt(
        'build_failure_weight_multiplier',
        default=1000000.0,
        mutable=True,
        help="""
Multiplier of the BuildFailureWeigher, which sinks hosts that recently
failed to build instances (the ``failed_builds`` count the computes
report).  The default is deliberately huge so that it outweighs every
resource weigher: a host with failures is chosen only when no host
without them passed the filters.  Lower it if user errors (which also
count as failures) take good hosts out of rotation; ``0.0`` disables
the weigher.

Related options:

* ``weight_classes``
"""),
    cfg.FloatOpt(
        'hypervisor_version_weight_multiplier',
        default=1.0,
        mutable=True,
        help="""
Multiplier of the HypervisorVersionWeigher.  Positive values (the
default) prefer hosts with newer hypervisors; negative values prefer
older ones; ``0.0`` disables the weigher.  Versions of different
hypervisor types are not comparable: group such hosts into aggregates
and override this per aggregate, or filter on the hypervisor type.

Related options:

* ``weight_classes``
"""),
    cfg.FloatOpt(
        'num_instances_weight_multiplier',
        default=0.0,
        mutable=True,
        help="""
Multiplier of the NumInstancesWeigher.  The default ``0.0`` does
nothing; positive values prefer hosts running more instances (packing);
negative values prefer hosts running fewer (spreading).

Related options:

* ``weight_classes``
* ``max_instances_per_host``
"""),
    cfg.FloatOpt(
        'cross_cell_move_weight_multiplier',
        default=1000000.0,
        mutable=True,
        help="""
Multiplier of the CrossCellWeigher.  On a move that may cross cells
(``requested_destination`` names the instance's cell and allows
cross-cell moves), hosts in that cell weigh +1 and the others -1,
times this multiplier.  The default is deliberately huge, so that an
instance leaves its cell only when no host of its cell passed the
filters; a negative value prefers other cells; ``0.0`` disables the
weigher.  An aggregate's ``cross_cell_move_weight_multiplier``
metadata overrides it for the aggregate's hosts.

Related options:

* ``weight_classes``
"""),
    cfg.FloatOpt(
        'image_props_weight_multiplier',
        default=0.0,
        mutable=True,
        help="""
Multiplier of the ImagePropertiesWeigher, which weighs hosts by how
many of their instances run an image with the same properties as the
requested one.  Positive values pack instances of like images
together; negative values spread them; the default ``0.0`` disables
the weigher (an aggregate's ``image_props_weight_multiplier`` metadata
then does not turn it on, as in nova).

Related options:

* ``image_props_weight_setting``
* ``weight_classes``
"""),
    cfg.ListOpt(
        'image_props_weight_setting',
        default=[],
        mutable=True,
        help="""
The image properties the ImagePropertiesWeigher counts and the ratio
of each, as ``name=ratio`` pairs: ``os_distro=1.0, hw_machine_type=-1``.
A host's raw weight is then, for each listed property of the requested
image, the number of its instances whose image has the same value,
times the ratio; unlisted properties count 0.  Empty (the default):
every property counts with ratio 1.  An entry that is not
``name=ratio`` with a numeric ratio is logged and ignored.

Related options:

* ``image_props_weight_multiplier``
"""),
    cfg.StrOpt(
        'image_properties_default_architecture',
        choices=['alpha', 'armv6', 'armv7l', 'armv7b', 'aarch64', 'cris',
                 'i686', 'ia64', 'lm32', 'm68k', 'microblaze',
                 'microblazeel', 'mips', 'mipsel', 'mips64', 'mips64el',
                 'openrisc', 'parisc', 'parisc64', 'ppc', 'ppcle', 'ppc64',
                 'ppc64le', 'ppcemb', 's390', 's390x', 'sh4', 'sh4eb',
                 'sparc', 'sparc64', 'unicore32', 'x86_64', 'xtensa',
                 'xtensaeb'],
        mutable=True,
        help="""
The architecture ImagePropertiesFilter assumes for an image that names
none (no ``hw_architecture`` property).  Unset (the default), such an
image runs on any architecture; set, it runs only on hosts supporting
this one.

Related options:

* ``enabled_filters``: ``ImagePropertiesFilter``
"""),
]

metrics_opts = [
    cfg.FloatOpt(
        'weight_multiplier',
        default=1.0,
        mutable=True,
        help="""
Multiplier of the MetricsWeigher.  Positive values prefer hosts with a
larger weighted sum of ``weight_setting`` metrics; negative values
prefer smaller ones; ``0.0`` disables the weigher.  An aggregate's
``metrics_weight_multiplier`` metadata overrides it for the
aggregate's hosts.

Related options:

* ``weight_setting``
* ``[filter_scheduler] weight_classes``
"""),
    cfg.ListOpt(
        'weight_setting',
        default=[],
        mutable=True,
        help="""
The metrics to weigh and the ratio of each, as ``name=ratio`` pairs:
``cpu.frequency=1.0, cpu.percent=-1.0``.  A host's weight is the sum of
each metric's value times its ratio.  MetricsFilter drops hosts that do
not report every metric named here.  An entry that is not
``name=ratio`` with a numeric ratio is logged and ignored.

Related options:

* ``required``
* ``weight_of_unavailable``
* ``[filter_scheduler] enabled_filters``: ``MetricsFilter``
"""),
    cfg.BoolOpt(
        'required',
        default=True,
        mutable=True,
        help="""
Whether every metric of ``weight_setting`` is required.  When True a
host that lacks one fails the request with WeigherConfigurationError
naming the MetricsWeigher, the host and the metric (a configuration
problem, not NoValidHost), so enable MetricsFilter to drop such hosts
before weighing.
When False such a host gets ``weight_of_unavailable`` instead.

Related options:

* ``weight_setting``
* ``weight_of_unavailable``
"""),
    cfg.FloatOpt(
        'weight_of_unavailable',
        default=-10000.0,
        mutable=True,
        help="""
The raw weight of a host lacking a metric of ``weight_setting`` when
``required`` is False.  The default is far below any real weighted sum,
so that such hosts are chosen last.

Related options:

* ``required``
* ``weight_setting``
"""),
]


def list_opts() -> dict:
    return {filter_group: filter_opts, metrics_group: metrics_opts}
