"""Checks a plugin author calls in their own tests: do a plugin's forms
agree?

A filter or weigher may state its rule twice: per host (``passes`` or
``host_passes``, ``_weigh_object``) and over columns
(``filter_columns``, ``weigh_columns``, ``column_multipliers``; see
``scheduler.columns``).  The scheduler runs whichever is faster and
``explain`` runs the per-host one, so the two must decide alike, to the
bit.  ``check_filter`` and ``check_weigher`` run both over the same
hosts and request and raise ``AssertionError`` naming the first hosts
where they differ.  The in-tree plugins are held to them by a property
test over random fleets and requests (``tests/unit/test_plugin_forms.py``);
feed yours the hosts and requests you care about.
"""

import numpy as np

from scheduler import columns
from scheduler.filters import base as filters_base
from scheduler.weights import base as weights_base

#: Hosts named in a failure message, at most.
_SHOWN = 5


def host_columns(hosts: list) -> columns.Columns:
    """``hosts`` (``HostView``s, e.g. from ``pipeline.host_views``) as
    the ``Columns`` a vector form receives, in the same order."""
    store = columns.ColumnStore(capacity=max(len(hosts), 1))
    for index, host in enumerate(hosts):
        store.view_changed(index, host)
    snapshot = store.snapshot()
    return columns.Columns(snapshot, snapshot.ordered)


def _differ(what: str, plugin, hosts: list, per_host, vector) -> None:
    wrong = [i for i, (a, b) in enumerate(zip(per_host, vector))
             if not (a == b or (a != a and b != b))]
    if wrong:
        shown = ', '.join('%s: per host %r, columns %r'
                          % (filters_base.host_key(hosts[i]), per_host[i],
                             vector[i]) for i in wrong[:_SHOWN])
        raise AssertionError('%s: %s differ on %d of %d host(s): %s'
                             % (plugin.name(), what, len(wrong), len(hosts),
                                shown))


def _shaped(what: str, plugin, value, n: int, scalar: bool) -> np.ndarray:
    """``value`` as ``n`` values; one value stands for every host only
    where ``scalar`` allows it (weights, multipliers), as the scheduler
    takes it (``plugin_outputs``)."""
    value = np.asarray(value)
    if value.shape != (n,) and not (scalar and value.ndim == 0):
        raise AssertionError('%s: %s has shape %s, not one per host (%d)'
                             % (plugin.name(), what, value.shape, n))
    return np.broadcast_to(value, n)


def check_filter(flt, hosts: list, spec_obj) -> None:
    """Assert that ``flt``'s forms agree on ``hosts`` for ``spec_obj``:
    ``host_passes`` on each host, ``filter_all`` on the list, the vector
    form (when the scheduler would use it and it answers for this
    request), and that every rejected host has a reason."""
    by_host = [bool(flt.host_passes(h, spec_obj)) for h in hosts]
    kept = {id(h) for h in flt.filter_all(list(hosts), spec_obj)}
    _differ('host_passes and filter_all', flt, hosts, by_host,
            [id(h) in kept for h in hosts])
    for host, passed in zip(hosts, by_host):
        if not passed:
            reason = flt.rejection_reason(host, spec_obj)
            if not isinstance(reason, str) or not reason:
                raise AssertionError('%s: no reason for rejecting %s'
                                     % (flt.name(),
                                        filters_base.host_key(host)))
    method = columns.vector_form(flt, 'filter_columns',
                                 columns.FILTER_METHODS)
    if method is None:
        return
    prepared = spec_obj
    if isinstance(flt, filters_base.RequestScopedFilter):
        prepared = flt.prepare(spec_obj)
        if prepared is filters_base.SKIP:
            return
    mask = method(host_columns(hosts), prepared)
    if mask is None:
        return
    _differ('host_passes and filter_columns', flt, hosts, by_host,
            _shaped('filter_columns', flt, mask, len(hosts), False)
            .astype(bool).tolist())


def check_weigher(weigher, hosts: list, spec_obj) -> None:
    """Assert that ``weigher``'s raw weights and multipliers per host
    (``weigh_objects``, ``weight_multipliers``) equal, to the bit, its
    vector forms' (``weigh_columns``, ``column_multipliers``) on
    ``hosts`` for ``spec_obj``, where the scheduler would use them."""
    cols = host_columns(hosts)
    n = len(hosts)
    method = columns.vector_form(weigher, 'weigh_columns',
                                 columns.WEIGH_METHODS)
    raw = None if method is None else method(cols, spec_obj)
    if raw is not None:
        per_host = weigher.weigh_objects(
            [weights_base.WeighedHost(h) for h in hosts], spec_obj)
        _differ('raw weights', weigher, hosts,
                [float(w) for w in per_host],
                _shaped('weigh_columns', weigher, raw, n, True)
                .astype(float).tolist())
    method = columns.vector_form(weigher, 'column_multipliers',
                                 columns.MULTIPLIER_METHODS)
    if method is not None:
        _differ('multipliers', weigher, hosts,
                [float(m) for m in weigher.weight_multipliers(list(hosts))],
                _shaped('column_multipliers', weigher, method(cols), n,
                        True).astype(float).tolist())
