"""HostState: what a compute agent reports about one of its nodes.

Computes send it by fanout cast (``update_service_capabilities``).  The
scheduler keeps the newest report per (host, nodename), adds what only
it knows (aggregates from the inventory, the limits the filters set,
claims not yet seen by the compute) as plain attributes, and consumes
resources on it as it places instances.
"""

import time

from oslo_config import cfg
from oslo_log import log as logging
from oslo_utils import timeutils
from oslo_utils import versionutils

from scheduler.objects import base
from scheduler.objects import fields

LOG = logging.getLogger(__name__)
CONF = cfg.CONF


RESOURCES = ('cpu', 'ram', 'disk')


def zones_of(aggregates: list) -> set:
    """Availability zones named by ``aggregates``' metadata."""
    return {agg.metadata['availability_zone'] for agg in aggregates
            if agg.metadata.get('availability_zone')}


def ratio_overrides(host: str, aggregates: list) -> dict:
    """``{resource: ratio}`` set by ``<resource>_allocation_ratio`` metadata.

    With several aggregates setting one ratio the smallest wins (the
    safe choice) and the conflict is logged; a non-numeric value is
    logged and ignored.
    """
    found: dict = {}
    for agg in aggregates:
        for resource in RESOURCES:
            key = '%s_allocation_ratio' % resource
            value = agg.metadata.get(key)
            if value is None:
                continue
            try:
                ratio = float(value)
            except ValueError:
                LOG.warning('Aggregate %(agg)s has a non-numeric %(key)s '
                            '%(value)r; ignoring it',
                            {'agg': agg.name, 'key': key, 'value': value})
                continue
            found.setdefault(resource, []).append(ratio)
    out = {}
    for resource, values in found.items():
        if len(set(values)) > 1:
            LOG.debug('%(host)s is in aggregates with different '
                      '%(resource)s allocation ratios %(values)s; using the '
                      'smallest', {'host': host, 'resource': resource,
                                   'values': values})
        out[resource] = min(values)
    return out


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
        return (self.local_gb - self.local_gb_used) * 1024

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
        return zones_of(self.aggregates)

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
        overrides what the compute reported (see ``ratio_overrides``).
        """
        override = ratio_overrides(self.host, self.aggregates).get(resource)
        if override is None:
            return getattr(self, '%s_allocation_ratio' % resource)
        return override

    def seconds_since_report(self, now: float | None = None) -> float:
        return (now or time.time()) - self.received_at

    def is_up(self, now: float | None = None) -> bool:
        """Reported within ``[scheduler] service_down_time``."""
        return (self.seconds_since_report(now)
                <= CONF.scheduler.service_down_time)

    def key(self) -> tuple:
        return (self.host, self.nodename)

    def consume_from_request(self, spec_obj) -> None:
        """Account for one instance of ``spec_obj`` placed on this host."""
        memory_mb, vcpus, disk_gb = resources_of(spec_obj)
        self.apply_claim(memory_mb, vcpus, disk_gb,
                         spec_obj.obj_get('instance_uuid'))

    def apply_claim(self, memory_mb: int, vcpus: int, disk_gb: int,
                    instance_uuid: str | None = None, sign: int = 1) -> None:
        """Add (``sign=1``) or give back (``sign=-1``) one instance's usage."""
        self.memory_mb_used += sign * memory_mb
        self.local_gb_used += sign * disk_gb
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
    VERSION = '1.1'

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
    }

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # Set by the scheduler, never sent by computes.
        self.aggregates = []
        self.limits = {}
        self.received_at = time.time()

    def obj_make_compatible(self, primitive, target_version):
        super().obj_make_compatible(primitive, target_version)
        if versionutils.convert_version_to_tuple(target_version) < (1, 1):
            primitive.pop('failed_builds', None)

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


def resources_of(spec_obj) -> tuple:
    """``(memory_mb, vcpus, disk_gb)`` one instance of ``spec_obj`` uses here.

    Swap counts as disk, rounded up to whole GiB; the root disk does not
    count when the instance boots from a volume.
    """
    flavor = spec_obj.flavor
    disk_gb = flavor.ephemeral_gb + (flavor.swap + 1023) // 1024
    if not spec_obj.obj_get('is_bfv', False):
        disk_gb += flavor.root_gb
    return flavor.memory_mb, flavor.vcpus, disk_gb
