"""HostView: the scheduler's working copy of one compute node.

Filters and weighers run over thousands of hosts per request, so they
must not pay the versioned-object machinery on every attribute read.
The HostManager turns each ``objects.HostState`` report into a
HostView: the same fields as plain attributes, plus what only the
scheduler knows (aggregates, the limits filters set, when the report
arrived) and the claims it made since.  Both classes share their
resource arithmetic (``objects.host_state.HostResources``), so a filter
works on either.
"""

import copy
import time

from scheduler.objects import host_state as host_state_obj

#: Fields whose values are mutable containers, copied per view.
_CONTAINERS = ('cpu_info', 'supported_instances', 'instance_uuids',
               'metrics', 'pci_pools')


class HostView(host_state_obj.HostResources):
    """One node as the scheduler sees it right now."""

    def __init__(self, report: host_state_obj.HostState,
                 received_at: float | None = None):
        report.set_defaults()
        #: The report as the compute sent it, without our claims: what
        #: the inventory saves.
        self.report = report
        for name in host_state_obj.HostState.fields:
            value = getattr(report, name)
            if name in _CONTAINERS:
                value = copy.copy(value)
            elif name == 'numa_topology' and value is not None:
                value = value.obj_clone()
                for cell in value.cells:
                    # A compute may leave usage out: it means none.
                    cell.obj_set_defaults()
            setattr(self, name, value)
        self.received_at = time.time() if received_at is None \
            else received_at
        self.limits: dict = {}
        self.aggregates: list = []
        self._zones: set = set()
        self._ratios: dict = {}
        self._metadata: dict = {}
        self._aggregate_keys: frozenset = frozenset()

    def set_aggregates(self, aggregates: list) -> None:
        """Attach the host's aggregates; derived values are computed once."""
        self.aggregates = list(aggregates)
        self._zones = host_state_obj.zones_of(self.aggregates)
        self._metadata = {}
        for agg in self.aggregates:
            for key, value in agg.metadata.items():
                self._metadata.setdefault(key, []).append(value)
        self._aggregate_keys = frozenset(self._metadata)
        self._ratios = host_state_obj.ratio_overrides(self.host,
                                                      self.aggregates)

    @property
    def availability_zones(self) -> set:
        return self._zones

    @property
    def aggregate_keys(self) -> frozenset:
        return self._aggregate_keys

    def aggregate_values(self, key: str) -> list:
        return self._metadata.get(key, [])

    def allocation_ratio(self, resource: str) -> float:
        override = self._ratios.get(resource)
        if override is None:
            return getattr(self, '%s_allocation_ratio' % resource)
        return override

    def obj_get(self, name: str, default=None):
        """Like the versioned object's, for code written against either."""
        return getattr(self, name, default)
