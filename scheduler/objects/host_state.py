"""HostState: what a compute agent reports about one of its nodes.

Computes send it by fanout cast (``update_service_capabilities``).  The
scheduler keeps the newest report per (host, nodename), adds what only
it knows (aggregates from the inventory, claims not yet seen by the
compute) as plain attributes, and consumes
resources on it as it places instances.
"""

import hashlib
import json

from oslo_utils import timeutils
from oslo_utils import versionutils
from oslo_versionedobjects import base as ovo_base

from scheduler.objects import base
from scheduler.objects import fields
from scheduler.resources import aggregates
from scheduler.resources import compute
from scheduler.resources import limits_scope
from scheduler.resources import liveness

RESOURCES = aggregates.RATIO_RESOURCES


class HostResources:
    """What filters and weighers read and change on a host, in one place.

    Shared by the wire object (``HostState``) and the scheduler's fast
    working copy (``scheduler.host_view.HostView``), so that a filter
    works on either and the arithmetic exists once.
    """

    @property
    def free_ram_mb(self) -> int:
        return self.memory_mb - self.memory_mb_used

    @property
    def free_disk_mb(self) -> int:
        """Free disk, capped by ``disk_available_least`` (nova's rule)."""
        return compute.free_disk_gb(self) * 1024

    @property
    def free_vcpus(self) -> int:
        return self.vcpus - self.vcpus_used

    @property
    def vcpus_total(self) -> int:
        # nova's name, which extra specs use: capabilities:vcpus_total.
        return self.vcpus

    @property
    def total_usable_ram_mb(self) -> int:
        return self.memory_mb

    @property
    def total_usable_disk_gb(self) -> int:
        return self.local_gb

    # -- nova's HostState names that differ from ours, for plugins and
    # debugging aids written against nova (the table is in
    # doc/authoring-guide.md, "Nova's names").

    @property
    def disk_mb_used(self) -> int:
        return self.local_gb_used * 1024

    @property
    def pci_stats(self) -> list:
        return self.pci_pools

    @property
    def updated(self):
        return self.updated_at

    @property
    def instances(self) -> dict:
        """nova maps uuid -> Instance; the scheduler keeps uuids only."""
        return dict.fromkeys(self.instance_uuids or ())

    @property
    def availability_zones(self) -> set:
        return aggregates.zones_of(self.aggregates)

    @property
    def aggregate_keys(self) -> set:
        """Every metadata key set by one of the host's aggregates."""
        return {key for agg in self.aggregates for key in agg.metadata}

    def aggregate_values(self, key: str) -> list:
        """Values of metadata ``key`` in the host's aggregates."""
        return [agg.metadata[key] for agg in self.aggregates
                if key in agg.metadata]

    def allocation_ratio(self, resource: str) -> float:
        """The ratio for ``'cpu'``, ``'ram'`` or ``'disk'`` on this host.

        An aggregate of the host with metadata ``<resource>_allocation_ratio``
        overrides what the compute reported
        (``scheduler.resources.aggregates.ratio_overrides``).
        """
        override = aggregates.ratio_overrides(self.aggregates).get(resource)
        if override is None:
            return getattr(self, '%s_allocation_ratio' % resource)
        return override

    @property
    def limits(self) -> dict:
        """The current request's limits for this host (writable).

        Per request, never shared: see ``scheduler.request_limits``.
        """
        return limits_scope.for_host(self.key())

    def seconds_since_report(self, now: float | None = None) -> float:
        """Age of the report by ``scheduler.resources.liveness``' clock."""
        return (liveness.now() if now is None else now) - self.received_at

    def is_up(self, now: float | None = None) -> bool:
        """Reported within ``[scheduler] service_down_time`` and not
        forced down (``scheduler.resources.liveness.is_up``)."""
        return liveness.is_up(self, now)

    def key(self) -> tuple:
        return (self.host, self.nodename)

    def consume_from_request(self, spec_obj) -> None:
        """Account for one instance of ``spec_obj`` placed on this host."""
        memory_mb, vcpus, disk_gb = compute.resources_of(spec_obj)
        self.apply_claim(memory_mb, vcpus, disk_gb,
                         spec_obj.obj_get('instance_uuid'))

    def apply_claim(self, memory_mb: int, vcpus: int, disk_gb: int,
                    instance_uuid: str | None = None, sign: int = 1) -> None:
        """Add (``sign=1``) or give back (``sign=-1``) one instance's usage."""
        self.memory_mb_used += sign * memory_mb
        self.local_gb_used += sign * disk_gb
        if self.disk_available_least is not None:
            # The compute's own measure of free disk shrinks too.
            self.disk_available_least -= sign * disk_gb
        self.vcpus_used += sign * vcpus
        self.num_instances = max(0, self.num_instances + sign)
        self.num_io_ops = max(0, self.num_io_ops + sign)
        uuids = list(self.instance_uuids)
        if instance_uuid and sign > 0 and instance_uuid not in uuids:
            self.instance_uuids = uuids + [instance_uuid]
        elif instance_uuid and sign < 0 and instance_uuid in uuids:
            uuids.remove(instance_uuid)
            self.instance_uuids = uuids

    def __repr__(self) -> str:
        return ('(%s, %s) ram: %sMB disk: %sMB io_ops: %s instances: %s'
                % (self.host, self.nodename, self.free_ram_mb,
                   self.free_disk_mb, self.num_io_ops, self.num_instances))


@base.SchedulerObjectRegistry.register
class HostState(HostResources, base.SchedulerObject):
    # Version 1.0: Initial version
    # Version 1.1: Added failed_builds
    # Version 1.2: Added stats, forced_down, disk_available_least,
    #              cell_uuid and instance_image_properties
    VERSION = '1.2'

    fields = {
        'host': fields.StringField(),
        'nodename': fields.StringField(),
        'uuid': fields.UUIDField(nullable=True, default=None),
        'memory_mb': fields.NonNegativeIntegerField(),
        'memory_mb_used': fields.IntegerField(default=0),
        'local_gb': fields.NonNegativeIntegerField(),
        'local_gb_used': fields.IntegerField(default=0),
        'vcpus': fields.NonNegativeIntegerField(),
        'vcpus_used': fields.IntegerField(default=0),
        'cpu_allocation_ratio': fields.NonNegativeFloatField(default=1.0),
        'ram_allocation_ratio': fields.NonNegativeFloatField(default=1.0),
        'disk_allocation_ratio': fields.NonNegativeFloatField(default=1.0),
        'hypervisor_type': fields.StringField(nullable=True, default=None),
        'hypervisor_version': fields.IntegerField(nullable=True,
                                                  default=None),
        'hypervisor_hostname': fields.StringField(nullable=True,
                                                  default=None),
        'host_ip': fields.IPAddressField(nullable=True, default=None),
        # Free-form CPU description (architecture, model, vendor,
        # features), as a dict of strings; nested keys flattened with
        # dots, e.g. ``topology.cores``.
        'cpu_info': fields.DictOfStringsField(default={}),
        # [architecture, hypervisor_type, vm_mode] triples.
        'supported_instances': fields.ListOfListsOfStringsField(default=[]),
        'num_instances': fields.NonNegativeIntegerField(default=0),
        'num_io_ops': fields.NonNegativeIntegerField(default=0),
        'instance_uuids': fields.ListOfStringsField(default=[]),
        'metrics': fields.DictOfFloatsField(default={}),
        'pci_pools': fields.ListOfObjectsField('PciDevicePool', default=[]),
        'numa_topology': fields.ObjectField('NUMATopology', nullable=True,
                                            default=None),
        'disabled': fields.BooleanField(default=False),
        'disabled_reason': fields.StringField(nullable=True, default=None),
        'failed_builds': fields.NonNegativeIntegerField(default=0),
        'updated_at': fields.DateTimeField(nullable=True, default=None),
        # Free-form counters the compute keeps (nova's ``stats``), such
        # as ``num_os_type_windows``; ComputeCapabilitiesFilter and
        # JsonFilter (``$stats.<key>``) read them.
        'stats': fields.DictOfStringsField(default={}),
        # An operator marked the compute service down (nova's
        # ``forced_down``): no scheduling to it, however fresh its
        # reports.  Distinct from a stale report.
        'forced_down': fields.BooleanField(default=False),
        # What the disk images can still grow into, in GiB, as the
        # hypervisor measures it; free disk is the smaller of this and
        # local_gb - local_gb_used.  None: not measured.
        'disk_available_least': fields.IntegerField(nullable=True,
                                                    default=None),
        # The cell the host belongs to (uuid or name); None: no cells.
        'cell_uuid': fields.StringField(nullable=True, default=None),
        # How many of the host's instances run an image with each
        # property, keyed ``name=value`` (ImagePropertiesWeigher).
        'instance_image_properties': fields.DictOfIntegersField(
            default={}),
    }

    #: Fields added by each version, dropped for older peers.
    _ADDED = {(1, 1): ('failed_builds',),
              (1, 2): ('stats', 'forced_down', 'disk_available_least',
                       'cell_uuid', 'instance_image_properties')}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # Set by the scheduler, never sent by computes.
        self.aggregates = []
        self.received_at = liveness.now()

    def obj_make_compatible(self, primitive, target_version):
        super().obj_make_compatible(primitive, target_version)
        target = versionutils.convert_version_to_tuple(target_version)
        for version, names in self._ADDED.items():
            if target < version:
                for name in names:
                    primitive.pop(name, None)

    def obj_load_attr(self, attrname):
        # A report from an older compute lacks newer fields: give them
        # their defaults instead of failing inside a filter.
        field = self.fields[attrname]
        if not field.default == fields.UnspecifiedDefault:
            self.obj_set_defaults(attrname)
            return
        super().obj_load_attr(attrname)

    def set_defaults(self) -> 'HostState':
        """Fill every unset field that has a default, then return self."""
        for name, field in self.fields.items():
            if (not self.obj_attr_is_set(name)
                    and field.default != fields.UnspecifiedDefault):
                self.obj_set_defaults(name)
        if self.updated_at is None:
            self.updated_at = timeutils.utcnow(with_timezone=True)
        return self


def fields_at(version: str) -> list:
    """The names of HostState's fields at ``version``, sorted; raises
    ValueError for a version this code does not know."""
    target = versionutils.convert_version_to_tuple(version)
    if target > versionutils.convert_version_to_tuple(HostState.VERSION):
        raise ValueError('HostState %s is newer than %s'
                         % (version, HostState.VERSION))
    dropped = {name for added, names in HostState._ADDED.items()
               if target < added for name in names}
    return sorted(set(HostState.fields) - dropped)


def content_digest(source, version: str = HostState.VERSION) -> str:
    """What a report says, its time aside, as a short text:
    ``<version>:<hash>``.

    A compute that has nothing new to say sends this in its liveness
    message (API 1.6) instead of the whole report, and the scheduler
    renews the node only when the report it holds has the same digest,
    so both sides must make it alike from equal values: ``source`` is a
    ``HostState`` (the compute's, or one read back) or a
    ``host_view.HostView``; the fields are those of HostState
    ``version`` (the version the compute's full reports are sent at),
    and values are made canonical first (sets sorted, integral floats
    as integers, addresses and times as text, nested objects as their
    fields with defaults for what is unset), so that the wire, the
    scheduler's views and the inventory's JSON give the same digest.
    """
    values = [[name, _canonical(getattr(source, name))]
              for name in fields_at(version) if name != 'updated_at']
    text = json.dumps(values, sort_keys=True, separators=(',', ':'),
                      default=str)
    return '%s:%s' % (version, hashlib.blake2b(
        text.encode('utf-8'), digest_size=16).hexdigest())


def _canonical(value):
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else value
    if isinstance(value, int):
        return value
    if isinstance(value, ovo_base.VersionedObject):
        data = {}
        for name, field in value.fields.items():
            if value.obj_attr_is_set(name):
                data[name] = _canonical(getattr(value, name))
            elif field.default != fields.UnspecifiedDefault:
                data[name] = _canonical(field.default)
            else:
                data[name] = None
        return [value.obj_name(), data]
    if isinstance(value, (set, frozenset)):
        return sorted(_canonical(item) for item in value)
    if isinstance(value, (list, tuple)):
        return [_canonical(item) for item in value]
    if isinstance(value, dict):
        return {str(key): _canonical(item) for key, item in value.items()}
    return str(value)


#: The simulator's name for it; the arithmetic lives in
#: ``scheduler.resources.compute``.
resources_of = compute.resources_of
