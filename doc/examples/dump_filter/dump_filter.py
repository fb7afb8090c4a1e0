"""DumpFilter: log what the filters see, reject nothing.

The debugging aid of a well-known nova scheduler walkthrough: enable
it and every request logs, at DEBUG, the request once and then each
candidate host as the filters receive it (a ``HostView``: the
compute's last report, the scheduler's claims since, the aggregates
and the limits set by the filters before this one).  It passes every
host, so it changes no decision.  Put it first in ``enabled_filters``
to see every candidate, or last to see the survivors::

    [DEFAULT]
    debug = true

    [filter_scheduler]
    available_filters = scheduler.filters.all_filters
    available_filters = dump_filter.DumpFilter
    enabled_filters = DumpFilter,ComputeFilter,RamFilter,DiskFilter

With ``debug`` off it costs one check per request.  Remove it when
done: on a large fleet it writes one line per host per request.
"""

from oslo_log import log as logging

from scheduler import filters

LOG = logging.getLogger(__name__)

#: Host attributes dumped, in this order (the walkthrough's list, in
#: our names).
HOST_FIELDS = (
    'memory_mb', 'memory_mb_used', 'free_ram_mb', 'local_gb',
    'local_gb_used', 'free_disk_mb', 'vcpus', 'vcpus_used', 'free_vcpus',
    'ram_allocation_ratio', 'cpu_allocation_ratio', 'disk_allocation_ratio',
    'num_instances', 'num_io_ops', 'failed_builds', 'host_ip',
    'hypervisor_type', 'hypervisor_version', 'hypervisor_hostname',
    'cpu_info', 'supported_instances', 'metrics', 'pci_pools',
    'numa_topology', 'disabled', 'limits', 'updated_at')


def describe_host(host_state) -> str:
    values = ['%s=%s' % (name, getattr(host_state, name, None))
              for name in HOST_FIELDS]
    values.append('aggregates=%s' % sorted(a.name
                                           for a in host_state.aggregates))
    values.append('availability_zones=%s'
                  % sorted(host_state.availability_zones))
    values.append('seconds_since_report=%.1f'
                  % host_state.seconds_since_report())
    return '%s/%s: %s' % (host_state.host, host_state.nodename,
                          ' '.join(values))


def describe_request(spec_obj) -> str:
    flavor = spec_obj.flavor
    values = [
        'instance_uuid=%s' % spec_obj.obj_get('instance_uuid'),
        'num_instances=%s' % spec_obj.num_instances,
        'project_id=%s' % spec_obj.obj_get('project_id'),
        'flavor=%s' % flavor.obj_get('name'),
        'memory_mb=%s' % flavor.memory_mb, 'vcpus=%s' % flavor.vcpus,
        'root_gb=%s' % flavor.root_gb,
        'ephemeral_gb=%s' % flavor.ephemeral_gb, 'swap=%s' % flavor.swap,
        'extra_specs=%s' % dict(flavor.extra_specs),
        'image_properties=%s' % spec_obj.image_properties,
        'is_bfv=%s' % spec_obj.is_bfv,
        'availability_zone=%s' % spec_obj.availability_zone,
        'scheduler_hints=%s' % spec_obj.scheduler_hints,
        'force_hosts=%s' % spec_obj.force_hosts,
        'ignore_hosts=%s' % spec_obj.ignore_hosts,
        'instance_group=%s' % (spec_obj.instance_group.to_dict()
                               if spec_obj.instance_group else None),
        'retry=%s' % (spec_obj.retry.to_dict() if spec_obj.retry else None),
    ]
    return ' '.join(values)


class DumpFilter(filters.BaseHostFilter):
    """Logs the request and every host at DEBUG; passes every host."""

    def filter_all(self, host_states, spec_obj) -> list:
        # The handler calls filter_all once per instance with all the
        # candidates: the request is logged once, not once per host.
        host_states = list(host_states)
        if LOG.isEnabledFor(logging.DEBUG):
            LOG.debug('DumpFilter request: %s', describe_request(spec_obj))
            for host_state in host_states:
                LOG.debug('DumpFilter host %s', describe_host(host_state))
        return host_states

    def host_passes(self, host_state, spec_obj) -> bool:
        # Used when something calls the filter one host at a time.
        if LOG.isEnabledFor(logging.DEBUG):
            LOG.debug('DumpFilter host %s', describe_host(host_state))
        return True
