"""Tests of the weigher catalogue (fakes shared with the filter tests)."""

from scheduler import weights


def ranking(weigher, hosts: list, spec) -> list:
    """Host names, best first, as the handler ranks them."""
    weighed = weights.HostWeightHandler().get_weighed_objects(
        [weigher], hosts, spec)
    return [w.obj.host for w in weighed]


def contributions(weigher, hosts: list, spec) -> dict:
    """``{host: weight}`` after normalisation and multiplier."""
    weighed = weights.HostWeightHandler().get_weighed_objects(
        [weigher], hosts, spec)
    return {w.obj.host: w.weight for w in weighed}
