"""Resource arithmetic shared by the host model, filters, weighers and claims.

One home for every derived value, so that a filter, a weigher and the
host manager cannot disagree about it:

* ``aggregates``: zones, comma lists, the smallest numeric value of a
  metadata key (allocation ratios, weigher multipliers, per-aggregate
  limits), parsed and warned about in one place;
* ``compute``: RAM, disk and vCPU of a request and of a host;
* ``numa``: NUMA cell fitting and usage;
* ``pci``: PCI pool matching and usage;
* ``server_groups``: members of a server group on a host;
* ``images``: canonical architecture, hypervisor type and VM mode names;
* ``liveness``: the clock up/down decisions read.

Nothing here imports a filter or weigher: they import this.
"""
