"""Limits filters set for one request, kept with that request.

A compute enforces the limits the scheduler sends with each
destination (how far RAM, disk and vCPUs may be oversubscribed, NUMA
ratios).  nova's filters write them onto the host state they test; here
host views are shared by every request a worker serves at once, so a
value written there would leak into the answers of other requests
(and survive a reload that removed the filter that wrote it).

``scope()`` opens a request's own store; ``HostView.limits`` returns
that store's dict for the host, so a filter written the nova way
(``host_state.limits['memory_mb'] = ...``) still works and writes only
into its request.  Outside a scope a view's limits are an empty dict
that nothing keeps.  In-tree filters do not write while filtering at
all: they answer ``host_limits()`` for the few hosts a request returns.
"""

from scheduler.filters import base as filters_base
from scheduler.resources import limits_scope

# The store itself lives below the wire objects, which read it.
scope = limits_scope.scope
for_host = limits_scope.for_host


def collect(host_state, spec_obj, filters: list) -> dict:
    """Every limit for ``host_state``: the filters' and plugins' writes
    (``filters``: all of them, or those ``limiting`` kept)."""
    found: dict = {}
    for flt in filters:
        if _sets_limits(flt):
            found.update(flt.host_limits(host_state, spec_obj) or {})
    found.update(for_host(host_state.key()))
    return found


def limiting(filters: list) -> list:
    """The ``filters`` that answer ``host_limits`` with something: what
    ``collect`` needs to be given, once per request."""
    return [flt for flt in filters if _sets_limits(flt)]


#: Filter class -> whether it answers ``host_limits`` with anything
#: but the base class's empty dict (asked for every destination and
#: alternate of every request, answered once per class).
_SETS_LIMITS: dict = {}


def _sets_limits(flt) -> bool:
    cls = type(flt)
    found = _SETS_LIMITS.get(cls)
    if found is None:
        found = _SETS_LIMITS[cls] = getattr(cls, 'host_limits', None) \
            not in (None, filters_base.BaseHostFilter.host_limits)
    return found or 'host_limits' in getattr(flt, '__dict__', ())
