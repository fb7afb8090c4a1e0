"""MetricsWeigher: weigh hosts by a weighted sum of the metrics their
computes report."""

from oslo_config import cfg

from scheduler import exception
from scheduler.filters import metrics as metrics_filter
from scheduler.weights import base

CONF = cfg.CONF


class MetricsWeigher(base.BaseHostWeigher):
    """Weighs hosts by the sum of each ``[metrics] weight_setting``
    metric times its ratio.  A host lacking a metric (with a non-zero
    ratio) fails the request with WeigherConfigurationError naming this
    weigher when ``[metrics] required`` is set (enable MetricsFilter to
    drop such hosts first), and otherwise weighs ``[metrics]
    weight_of_unavailable``.

    The multiplier is ``[metrics] weight_multiplier``, overridden per
    host by the ``metrics_weight_multiplier`` metadata of its
    aggregates (the smallest wins).
    """

    #: The aggregate metadata key; the option is [metrics]
    #: weight_multiplier, as in nova.
    multiplier_option = 'metrics_weight_multiplier'

    def configured_multiplier(self) -> float:
        return CONF.metrics.weight_multiplier

    def weigh_columns(self, columns, spec_obj):
        """0 everywhere without a weighed metric; else None (per host)."""
        if any(ratio for _name, ratio in metrics_filter.weight_setting()):
            return None
        return 0.0

    def weigh_objects(self, weighed_hosts: list, spec_obj) -> list:
        setting = [(name, ratio) for name, ratio
                   in metrics_filter.weight_setting() if ratio]
        if not setting:
            return [0.0] * len(weighed_hosts)
        hosts = [w.obj for w in weighed_hosts]
        multipliers = self.weight_multipliers(hosts)
        required = CONF.metrics.required
        unavailable = CONF.metrics.weight_of_unavailable
        weights = []
        for host, multiplier in zip(hosts, multipliers):
            if not multiplier:
                # Weigher off for this host: a missing metric is no error.
                weights.append(0.0)
                continue
            weights.append(self._weigh(host, setting, required,
                                       unavailable))
        return weights

    @staticmethod
    def _weigh(host_state, setting: list, required: bool,
               unavailable: float) -> float:
        metrics = host_state.metrics
        total = 0.0
        for name, ratio in setting:
            value = metrics.get(name)
            if value is None:
                if required:
                    raise exception.WeigherConfigurationError(
                        weigher='MetricsWeigher',
                        reason='host %s/%s does not report metric %s, '
                               'which [metrics] weight_setting weighs and '
                               '[metrics] required demands; enable '
                               'MetricsFilter to drop such hosts, or set '
                               '[metrics] required = False'
                        % (host_state.host, host_state.nodename, name))
                return unavailable
            total += value * ratio
        return total
