"""Weighers whose multiplier may not be negative.

Not a weigher: the mixin of PCIWeigher and the server group soft
(anti-)affinity weighers.  Their options refuse negative values when
the configuration is loaded (``min=0.0``); an aggregate override
(metadata) cannot be checked then, so a negative one is logged and
treated as ``0.0`` (the weigher off for that host).
"""

import numpy as np
from oslo_log import log as logging

LOG = logging.getLogger(__name__)

#: (weigher, host, value) already warned about: log each mistake once,
#: not once per request.
_warned: set = set()


def _clip(weigher, host_state, value: float) -> float:
    if value >= 0:
        return value
    key = (weigher.name(), getattr(host_state, 'host', None), value)
    if key not in _warned:
        _warned.add(key)
        LOG.warning('%(weigher)s: aggregate metadata %(option)s=%(value)s '
                    'of host %(host)s is negative; only positive '
                    'multipliers are allowed, using 0.0 (weigher off for '
                    'this host)',
                    {'weigher': weigher.name(),
                     'option': weigher.multiplier_option, 'value': value,
                     'host': key[1]})
    return 0.0


class NonNegativeMultiplier:
    """Mixin for a ``BaseHostWeigher``: negative multipliers become 0.0."""

    def weight_multiplier(self, host_state) -> float:
        value = super().weight_multiplier(host_state)
        return value if host_state is None else _clip(self, host_state,
                                                      value)

    def column_multipliers(self, columns):
        values = super().column_multipliers(columns)
        if np.ndim(values) == 0 and values >= 0:
            # The configured value (its option refuses negatives).
            return values
        if np.ndim(values) == 0:
            values = np.full(len(columns), float(values))
        negative = np.flatnonzero(values < 0)
        if len(negative):
            views = columns.views()
            for i in negative.tolist():
                values[i] = _clip(self, views[i], values[i])
        return values

    def weight_multipliers(self, hosts: list) -> list:
        return [_clip(self, host, value) for host, value in
                zip(hosts, super().weight_multipliers(hosts))]
