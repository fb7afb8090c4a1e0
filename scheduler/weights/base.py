"""The weigher base class and the handler that sums weighers' votes."""

import typing

from oslo_config import cfg
from oslo_log import log as logging

LOG = logging.getLogger(__name__)
CONF = cfg.CONF


def normalize(weights: list, minval: float | None = None,
              maxval: float | None = None) -> list:
    """Scale ``weights`` linearly to [0, 1]; all equal gives all 0."""
    if not weights:
        return []
    maxval = float(max(weights) if maxval is None else maxval)
    minval = float(min(weights) if minval is None else minval)
    if maxval == minval:
        return [0.0] * len(weights)
    span = maxval - minval
    return [(w - minval) / span for w in weights]


def aggregate_override(host_state, key: str, default: float) -> float:
    """``key`` from the host's aggregate metadata, else ``default``.

    Several aggregates disagreeing: the smallest value wins, logged.
    """
    values = []
    for raw in host_state.aggregate_values(key):
        try:
            values.append(float(raw))
        except ValueError:
            LOG.warning('Host %(host)s: aggregate metadata %(key)s=%(raw)r is '
                        'not a number; ignored',
                        {'host': host_state.host, 'key': key, 'raw': raw})
    if not values:
        return default
    if len(set(values)) > 1:
        LOG.info('Host %(host)s is in aggregates with different %(key)s '
                 '%(values)s; using %(min)s',
                 {'host': host_state.host, 'key': key, 'values': values,
                  'min': min(values)})
    return min(values)


class WeighedHost:
    """A host with its total weight and each weigher's contribution."""

    __slots__ = ('obj', 'weight', 'contributions')

    def __init__(self, obj, weight: float = 0.0):
        self.obj = obj
        self.weight = weight
        self.contributions: dict = {}

    def __repr__(self) -> str:
        return 'WeighedHost [host: %r, weight: %s]' % (self.obj, self.weight)


class BaseHostWeigher:
    """Base class of weighers.

    Implement ``_weigh_object`` (one host) or ``weigh_objects`` (all
    candidates).  ``weight_multiplier`` usually reads a config option;
    it may look at the host (per-aggregate overrides).
    """

    #: Bounds used for normalisation instead of the observed min/max.
    minval: float | None = None
    maxval: float | None = None

    #: The ``[filter_scheduler]`` option holding this weigher's
    #: multiplier; the same key in a host's aggregate metadata overrides
    #: it for that host.  None means a fixed multiplier of 1.0.
    multiplier_option: str | None = None

    def weight_multiplier(self, host_state) -> float:
        """The multiplier for ``host_state`` (``None``: the configured one)."""
        if self.multiplier_option is None:
            return 1.0
        default = getattr(CONF.filter_scheduler, self.multiplier_option)
        if host_state is None:
            return default
        return aggregate_override(host_state, self.multiplier_option,
                                  default)

    def weight_multipliers(self, hosts: list) -> list:
        """Multipliers of ``hosts``, in order; config is read once."""
        if self.multiplier_option is None:
            return [self.weight_multiplier(h) for h in hosts]
        default = self.weight_multiplier(None)
        key = self.multiplier_option
        multipliers = [default] * len(hosts)
        for i, host in enumerate(hosts):
            # Most hosts' aggregates do not set this key: skip them fast.
            if key in host.aggregate_keys:
                multipliers[i] = aggregate_override(host, key, default)
        return multipliers

    def _weigh_object(self, host_state, spec_obj) -> float:
        raise NotImplementedError()

    def weigh_objects(self, weighed_hosts: list, spec_obj) -> list:
        """Raw weights of ``weighed_hosts``, in order."""
        return [self._weigh_object(w.obj, spec_obj) for w in weighed_hosts]

    @classmethod
    def name(cls) -> str:
        return cls.__name__


class HostWeightHandler:
    """Applies weighers and sorts hosts, heaviest first."""

    def get_weighed_objects(self, weighers: list, hosts: typing.Iterable,
                            spec_obj, explain: bool = False) -> list:
        """``hosts`` as WeighedHosts, heaviest first.

        A weigher whose multiplier is 0 for every candidate is skipped:
        it could not change the order.  Each weigher's contribution per
        host is kept only when ``explain``-ing: the hot path needs only
        the totals.
        """
        weighed = [WeighedHost(h) for h in hosts]
        if not weighed:
            return weighed
        hosts = [w.obj for w in weighed]
        totals = [0.0] * len(weighed)
        for weigher in weighers:
            multipliers = weigher.weight_multipliers(hosts)
            if not any(multipliers) and not explain:
                continue
            raw = weigher.weigh_objects(weighed, spec_obj)
            norm = normalize(raw, weigher.minval, weigher.maxval)
            for i, (multiplier, value) in enumerate(zip(multipliers, norm)):
                totals[i] += multiplier * value
            if explain:
                name = weigher.name()
                for w, multiplier, value in zip(weighed, multipliers, norm):
                    w.contributions[name] = multiplier * value
        for w, total in zip(weighed, totals):
            w.weight = total
        weighed.sort(key=lambda w: w.weight, reverse=True)
        LOG.debug('Weighed %(hosts)s', {'hosts': weighed[:10]})
        return weighed
