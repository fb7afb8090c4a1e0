"""Host weighers: the authoring API and the handler that combines them.

A weigher gives each candidate host a raw weight (``_weigh_object`` per
host, or ``weigh_objects`` for all at once).  The handler clamps them
to the weigher's ``minval``/``maxval``, normalises them to [0, 1] over
the candidates (nova's rule), multiplies them by
the weigher's ``weight_multiplier`` and sums them: the highest total
wins.  Register a weigher as an entry point in ``scheduler.weighers`` or
name its class path in ``[filter_scheduler] weight_classes``.
"""

from scheduler.weights.base import BaseHostWeigher
from scheduler.weights.base import HostWeightHandler
from scheduler.weights.base import WeighedHost
from scheduler.weights.base import WeigherScore
from scheduler.weights.base import clamp
from scheduler.weights.base import normalize
from scheduler import loader

__all__ = ['BaseHostWeigher', 'HostWeightHandler', 'WeighedHost',
           'WeigherScore', 'all_weighers', 'clamp', 'normalize']


def all_weighers() -> list:
    """Every weigher class registered in the ``scheduler.weighers`` namespace.
    """
    return loader.all_classes(loader.WEIGHER_NAMESPACE)
