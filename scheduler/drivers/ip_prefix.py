"""The IP-prefix scheduler: requests from a subnet go to a subset of hosts.

The example driver of "Customizing the OpenStack Compute (nova)
Scheduler", made configurable: the caller's source address (the request
context's ``remote_address``) selects a hostname prefix through
``[ip_scheduler] prefix_map``; the instance goes to a random up host
whose name starts with it.
"""

import ipaddress
import random

from oslo_config import cfg
from oslo_log import log as logging

from scheduler import driver
from scheduler import exception
from scheduler import pipeline

LOG = logging.getLogger(__name__)
CONF = cfg.CONF


def hostname_prefix_for(remote_ip: str | None, prefix_map: dict,
                        default: str) -> str:
    """The hostname prefix for ``remote_ip``: the longest matching source."""
    if not remote_ip:
        return default
    best, best_len = default, -1
    for source, prefix in prefix_map.items():
        source = source.strip()
        if '/' in source:
            try:
                network = ipaddress.ip_network(source, strict=False)
                matched = ipaddress.ip_address(remote_ip) in network
            except ValueError:
                matched = False
            length = network.prefixlen if matched else -1
        else:
            matched = remote_ip.startswith(source)
            # Compare text prefixes with CIDRs by the bits they pin down.
            length = 8 * source.count('.') + 8 if matched else -1
        if matched and length > best_len:
            best, best_len = prefix.strip(), length
    return best


class IPScheduler(driver.Scheduler):
    """Random up host whose name starts with the prefix mapped from the
    caller's address."""

    def _schedule(self, context, spec_obj):
        elevated = context.elevated()
        hosts = self.hosts_up(elevated)
        if not hosts:
            LOG.info('No up host to choose from')
            raise exception.NoValidHost(
                reason='Is the appropriate service running?')
        remote_ip = getattr(context, 'remote_address', None)
        prefix = hostname_prefix_for(remote_ip,
                                     CONF.ip_scheduler.prefix_map,
                                     CONF.ip_scheduler.default_host_prefix)
        hosts = [h for h in hosts if h.startswith(prefix)]
        ignored = pipeline.name_matcher(spec_obj.obj_get('ignore_hosts'))
        if ignored is not None:
            hosts = [h for h in hosts if not ignored(h)]
        if not hosts:
            LOG.info('No up host with prefix %(prefix)r for a request from '
                     '%(ip)s', {'prefix': prefix, 'ip': remote_ip})
            raise exception.NoValidHost(
                reason='Could not find another compute with prefix %r '
                       'for requests from %s' % (prefix, remote_ip))
        host = random.choice(hosts)
        LOG.debug('Request from %(remote_ip)s scheduled to %(host)s',
                  {'remote_ip': remote_ip, 'host': host})
        return host

    def select_destinations(self, context, spec_obj, instance_uuids: list,
                            return_alternates: bool = False) -> list:
        uuids = list(instance_uuids or [])
        results = []
        # Hosts other workers took the reports of (intake, API 1.5).
        self.host_manager.refresh_changed_reports()
        for index in range(spec_obj.num_instances):
            uuid = uuids[index] if index < len(uuids) else None
            host = self._schedule(context, spec_obj)
            state = next(s for s in self.host_manager.get_up_host_states()
                         if s.host == host)
            self.host_manager.claim(state, spec_obj, uuid)
            results.append([driver.selection_for(state, uuid)])
        return results

    def schedule_run_instance(self, context, spec_obj,
                              instance_uuids: list) -> None:
        self.schedule_each(context, spec_obj, instance_uuids)
