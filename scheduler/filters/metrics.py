"""MetricsFilter: the host reports every metric ``[metrics]
weight_setting`` weighs."""

import functools
import math

from oslo_config import cfg
from oslo_log import log as logging

from scheduler.filters import base

LOG = logging.getLogger(__name__)
CONF = cfg.CONF


@functools.lru_cache(maxsize=16)
def _parse(entries: tuple) -> tuple:
    setting = []
    for entry in entries:
        name, sep, ratio = entry.partition('=')
        name, ratio = name.strip(), ratio.strip()
        try:
            if not (sep and name):
                raise ValueError(entry)
            value = float(ratio)
            if not math.isfinite(value):
                raise ValueError(entry)
            setting.append((name, value))
        except ValueError:
            LOG.warning('[metrics] weight_setting entry %r is not '
                        '"name=ratio" with a numeric ratio; ignored', entry)
    return tuple(setting)


def weight_setting() -> tuple:
    """``((metric name, ratio), ...)`` from ``[metrics] weight_setting``.

    Shared by MetricsFilter and MetricsWeigher so that both read the
    option the same way; parsed once per distinct value (the option is
    mutable), bad entries logged once and ignored.
    """
    entries = []
    for value in CONF.metrics.weight_setting:
        # The guide quotes the whole list ("m1=1.0, m2=-1.0"): oslo
        # then keeps the quotes on the first and last items.
        for entry in value.split(','):
            entry = entry.strip().strip('"\'').strip()
            if entry:
                entries.append(entry)
    return _parse(tuple(entries))


class MetricsFilter(base.RequestScopedFilter):
    """Passes hosts that report every metric named in ``[metrics]
    weight_setting``, so that MetricsWeigher never meets a host lacking
    one (with ``[metrics] required`` it would fail the request).
    """

    run_filter_once_per_request = True

    def prepare(self, spec_obj):
        names = frozenset(name for name, _ratio in weight_setting())
        return names or base.SKIP

    def passes(self, host_state, names: frozenset) -> base.Verdict:
        return names.issubset(host_state.metrics) or base.Rejected(
            lambda: 'does not report metric(s) %s' % ', '.join(
                sorted(names.difference(host_state.metrics))))
