"""The weigher base class and the handler that sums weighers' votes."""

import dataclasses
import typing

import numpy as np
from oslo_config import cfg
from oslo_log import log as logging

from scheduler.resources import aggregates

LOG = logging.getLogger(__name__)
CONF = cfg.CONF


def normalize(weights: list, minval: float | None = None,
              maxval: float | None = None) -> list:
    """Scale ``weights`` linearly to [0, 1]; all equal gives all 0.

    ``minval``/``maxval``, when given, replace the observed minimum and
    maximum as the ends of the scale (nova's ``normalize``); use
    ``clamp`` first so that no weight falls outside them.
    """
    if not weights:
        return []
    maxval = float(max(weights) if maxval is None else maxval)
    minval = float(min(weights) if minval is None else minval)
    if maxval == minval:
        return [0.0] * len(weights)
    span = maxval - minval
    return [(w - minval) / span for w in weights]


def clamp(weights: list, minval: float | None = None,
          maxval: float | None = None) -> list:
    """``weights`` with each value held within ``[minval, maxval]``.

    nova's RAM, CPU, Disk and IoOps weighers set ``minval = 0``: a host
    with negative free RAM (overcommitted) weighs 0 instead of
    stretching the scale every other host is normalised on.
    """
    if minval is None and maxval is None:
        return list(weights)
    low = float('-inf') if minval is None else minval
    high = float('inf') if maxval is None else maxval
    return [min(max(w, low), high) for w in weights]


def aggregate_override(host_state, key: str, default: float) -> float:
    """``key`` from the host's aggregate metadata, else ``default``
    (``scheduler.resources.aggregates.host_value``: the smallest of
    several values; an unreadable one means ``default``)."""
    return aggregates.host_value(host_state, key, default, float)


class WeighedHost:
    """A host with its total weight and each weigher's contribution.

    When weighed with ``explain``, ``details`` maps each weigher's name
    to a ``WeigherScore`` (raw value, normalised value, multiplier and
    contribution) and ``contributions`` to the contribution alone.
    """

    __slots__ = ('obj', 'weight', 'contributions', 'details')

    def __init__(self, obj, weight: float = 0.0):
        self.obj = obj
        self.weight = weight
        self.contributions: dict = {}
        self.details: dict = {}

    def __repr__(self) -> str:
        return 'WeighedHost [host: %r, weight: %s]' % (self.obj, self.weight)


class BaseHostWeigher:
    """Base class of weighers.

    Implement ``_weigh_object`` (one host) or ``weigh_objects`` (all
    candidates).  ``weight_multiplier`` usually reads a config option;
    it may look at the host (per-aggregate overrides).
    """

    #: Bounds of the raw weights: values outside are clamped to them,
    #: and they replace the observed min/max as the ends of the
    #: normalisation scale (nova's ``minval``/``maxval``).
    minval: float | None = None
    maxval: float | None = None

    #: The ``[filter_scheduler]`` option holding this weigher's
    #: multiplier; the same key in a host's aggregate metadata overrides
    #: it for that host.  None means a fixed multiplier of 1.0.
    multiplier_option: str | None = None

    def configured_multiplier(self) -> float:
        """The multiplier the configuration sets, before any aggregate
        override (1.0 without ``multiplier_option``)."""
        if self.multiplier_option is None:
            return 1.0
        return getattr(CONF.filter_scheduler, self.multiplier_option)

    def weight_multiplier(self, host_state) -> float:
        """The multiplier for ``host_state`` (``None``: the configured one)."""
        default = self.configured_multiplier()
        if self.multiplier_option is None or host_state is None:
            return default
        return aggregate_override(host_state, self.multiplier_option,
                                  default)

    def weight_multipliers(self, hosts: list) -> list:
        """Multipliers of ``hosts``, in order; config is read once."""
        if self.multiplier_option is None:
            return [self.weight_multiplier(h) for h in hosts]
        default = self.configured_multiplier()
        key = self.multiplier_option
        multipliers = [default] * len(hosts)
        for i, host in enumerate(hosts):
            # Most hosts' aggregates do not set this key: skip them fast.
            if key in host.aggregate_keys:
                multipliers[i] = aggregate_override(host, key, default)
        return multipliers

    def column_multipliers(self, columns):
        """``weight_multipliers`` over columns (``scheduler.columns``):
        the configured multiplier, or the host's aggregate override;
        one number when no host's aggregates override it (the usual
        case: no array to fill for every request)."""
        default = np.float64(self.configured_multiplier())
        override = None if self.multiplier_option is None else \
            columns.aggregate_number(self.multiplier_option)
        if override is None:
            return default
        return np.where(np.isnan(override), default, override)

    def _weigh_object(self, host_state, spec_obj) -> float:
        raise NotImplementedError()

    def weigh_objects(self, weighed_hosts: list, spec_obj) -> list:
        """Raw weights of ``weighed_hosts``, in order."""
        return [self._weigh_object(w.obj, spec_obj) for w in weighed_hosts]

    @classmethod
    def name(cls) -> str:
        return cls.__name__


@dataclasses.dataclass(frozen=True)
class WeigherScore:
    """What one weigher gave one host."""

    raw: float
    normalized: float
    multiplier: float

    @property
    def contribution(self) -> float:
        return self.multiplier * self.normalized


class HostWeightHandler:
    """Applies weighers and sorts hosts, heaviest first."""

    def get_weighed_objects(self, weighers: list, hosts: typing.Iterable,
                            spec_obj, explain: bool = False,
                            detailed: int | None = None) -> list:
        """``hosts`` as WeighedHosts, heaviest first.

        As in nova, a single candidate is not weighed (weight 0).  Each
        weigher's raw weights are clamped to its ``minval``/``maxval``,
        normalised to [0, 1] over the candidates and multiplied by its
        multiplier for each host; one whose multiplier is 0 everywhere is
        skipped unless ``explain``-ing.  Per-weigher details are kept
        only when ``explain``-ing, for the ``detailed`` heaviest hosts
        (None: all).
        """
        weighed = [WeighedHost(h) for h in hosts]
        if len(weighed) <= 1:
            return weighed
        hosts = [w.obj for w in weighed]
        totals = [0.0] * len(weighed)
        scores = []
        for weigher in weighers:
            multipliers = weigher.weight_multipliers(hosts)
            if not any(multipliers) and not explain:
                continue
            raw = clamp(weigher.weigh_objects(weighed, spec_obj),
                        weigher.minval, weigher.maxval)
            norm = normalize(raw, weigher.minval, weigher.maxval)
            for i, (multiplier, value) in enumerate(zip(multipliers, norm)):
                totals[i] += multiplier * value
            if explain:
                scores.append((weigher.name(), raw, norm, multipliers))
        for w, total in zip(weighed, totals):
            w.weight = total
        # Stable: hosts of equal weight keep the candidates' order.
        order = sorted(range(len(weighed)), key=totals.__getitem__,
                       reverse=True)
        weighed = [weighed[i] for i in order]
        for i, w in zip(order[:detailed] if scores else (), weighed):
            for name, raw, norm, multipliers in scores:
                score = WeigherScore(raw[i], norm[i], multipliers[i])
                w.details[name] = score
                w.contributions[name] = score.contribution
        LOG.debug('Weighed %(hosts)s', {'hosts': weighed[:10]})
        return weighed
