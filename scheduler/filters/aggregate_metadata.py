"""Reading host aggregate metadata the way the aggregate filters need it.

Not a filter: the helpers the ``Aggregate*`` filters share, so that
comma lists and numeric limits are parsed the same way everywhere.
Parsing is cached by the raw values: thousands of hosts share the few
values their aggregates set, and filters run for every request.
"""

import functools

from oslo_log import log as logging

LOG = logging.getLogger(__name__)


@functools.lru_cache(maxsize=4096)
def _split(raw_values: tuple) -> frozenset:
    items = set()
    for raw in raw_values:
        items.update(item.strip() for item in str(raw).split(','))
    items.discard('')
    return frozenset(items)


def split_values(raw_values: list) -> frozenset:
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
def _min_int(key: str, raw_values: tuple) -> int | None:
    found = []
    for raw in raw_values:
        try:
            found.append(int(str(raw).strip()))
        except ValueError:
            LOG.warning('Aggregate metadata %(key)s=%(raw)r is not an '
                        'integer; ignored', {'key': key, 'raw': raw})
    return min(found) if found else None


def min_int(host_state, key: str, default: int) -> int:
    """The smallest integer of metadata ``key``, else ``default``.

    Several aggregates disagreeing: the smallest is the safe limit.  A
    value that is not an integer is logged (once) and ignored, so that
    one typo in an aggregate does not take its hosts out of scheduling.
    """
    raw_values = host_state.aggregate_values(key)
    if not raw_values:
        return default
    found = _min_int(key, tuple(raw_values))
    return default if found is None else found
