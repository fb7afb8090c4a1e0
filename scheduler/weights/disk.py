"""DiskWeigher: prefer hosts with more free disk (or less, if negative)."""

from oslo_config import cfg

from scheduler.weights import base

CONF = cfg.CONF


class DiskWeigher(base.BaseHostWeigher):
    """Weighs hosts by free local disk."""

    def weight_multiplier(self, host_state) -> float:
        return CONF.filter_scheduler.disk_weight_multiplier

    def _weigh_object(self, host_state, spec_obj) -> float:
        return host_state.free_disk_mb
