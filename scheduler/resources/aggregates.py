"""Host aggregate metadata: zones, comma lists and the smallest value.

nova reads one metadata key from all the aggregates of a host: several
values mean the smallest wins (the safe limit), and a value that does
not read as a number makes the whole key fall back to the configured
default, with a warning (``validate_num_values`` in nova).  This module
is the only parser of such values.  It is cached by the raw values, so
that a conflict or a typo is logged once per distinct set of values
(that is, once per aggregate change), not once per host per request.
"""

import functools
import typing

from oslo_log import log as logging

LOG = logging.getLogger(__name__)

#: Resources whose allocation ratio an aggregate may override.
RATIO_RESOURCES = ('cpu', 'ram', 'disk')


def zones_of(aggregates: typing.Iterable) -> set:
    """Availability zones named by ``aggregates``' metadata."""
    return {agg.metadata['availability_zone'] for agg in aggregates
            if agg.metadata.get('availability_zone')}


@functools.lru_cache(maxsize=4096)
def _split(raw_values: tuple) -> frozenset:
    items = set()
    for raw in raw_values:
        items.update(item.strip() for item in str(raw).split(','))
    items.discard('')
    return frozenset(items)


def split_values(raw_values: typing.Sequence) -> frozenset:
    """The comma-separated items of several metadata values, stripped.

    ``['a, b', 'c']`` (one key set by two aggregates) gives
    ``{'a', 'b', 'c'}``; empty items are dropped.
    """
    return _split(tuple(raw_values))


def values(host_state, key: str) -> frozenset:
    """Every item of metadata ``key`` in the host's aggregates."""
    raw = host_state.aggregate_values(key)
    return _split(tuple(raw)) if raw else frozenset()


@functools.lru_cache(maxsize=4096)
def _smallest(key: str, raw_values: tuple, cast: type):
    """The smallest of ``raw_values`` cast, or None if one is unreadable.

    Cached: the log lines below are written once per distinct input.
    """
    try:
        found = [cast(str(raw).strip()) for raw in raw_values]
    except ValueError:
        LOG.warning('Aggregate metadata %(key)s has a value that is not '
                    'a%(n)s %(kind)s among %(values)s; using the '
                    'configured default instead',
                    {'key': key, 'values': list(raw_values),
                     'n': 'n' if cast is int else '',
                     'kind': 'integer' if cast is int else 'number'})
        return None
    if len(set(found)) > 1:
        LOG.info('Aggregates set %(key)s to %(values)s; using the smallest, '
                 '%(min)s', {'key': key, 'values': list(raw_values),
                             'min': min(found)})
    return min(found)


def smallest_value(raw_values: typing.Sequence, key: str, default,
                   cast: type = float):
    """nova's reading of a numeric metadata key set by several aggregates.

    No value: ``default``.  Several: the smallest.  One that does not
    read as ``cast``: ``default`` (logged once).
    """
    if not raw_values:
        return default
    found = _smallest(key, tuple(raw_values), cast)
    return default if found is None else found


def host_value(host_state, key: str, default, cast: type = float):
    """``smallest_value`` of metadata ``key`` in the host's aggregates."""
    return smallest_value(host_state.aggregate_values(key), key, default,
                          cast)


def ratio_overrides(aggregates: typing.Iterable) -> dict:
    """``{resource: ratio}`` set by ``<resource>_allocation_ratio`` metadata.

    The effective allocation ratio of a host is this override, else the
    ratio its compute reported; ``HostResources.allocation_ratio`` and
    ``HostView`` both call this.
    """
    aggregates = list(aggregates)
    out = {}
    for resource in RATIO_RESOURCES:
        key = '%s_allocation_ratio' % resource
        raw = [agg.metadata[key] for agg in aggregates
               if agg.metadata.get(key) is not None]
        value = smallest_value(raw, key, None)
        if value is not None:
            out[resource] = value
    return out
