"""The weigher base class and the handler that sums weighers' votes."""

import typing

from oslo_log import log as logging

LOG = logging.getLogger(__name__)


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

    def weight_multiplier(self, host_state) -> float:
        return 1.0

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
                            spec_obj) -> list:
        weighed = [WeighedHost(h) for h in hosts]
        if not weighed:
            return weighed
        for weigher in weighers:
            raw = weigher.weigh_objects(weighed, spec_obj)
            norm = normalize(raw, weigher.minval, weigher.maxval)
            name = weigher.name()
            for w, value in zip(weighed, norm):
                contribution = weigher.weight_multiplier(w.obj) * value
                w.contributions[name] = contribution
                w.weight += contribution
        weighed.sort(key=lambda w: w.weight, reverse=True)
        LOG.debug('Weighed %(hosts)s', {'hosts': weighed[:10]})
        return weighed
