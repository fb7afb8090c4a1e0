"""What an out-of-tree plugin returns, checked where the scheduler takes it.

A plugin that raises is named by ``rpc.Dispatcher`` from its frame in
the traceback.  One that returns a value the scheduler cannot use (a
weight that is a string or NaN, a filter's verdict in words, hosts it
was not given, a driver's answer that is not Selection lists) raises
nothing itself: in-tree code fails later, or answers wrongly, with no
frame of the plugin left to blame.  ``guard`` therefore puts a check
on every method of an out-of-tree plugin whose result the scheduler
uses, as an attribute of the instance: the class, which the columnar
path reads to find vector forms (``columns.vector_form``), is left as
its author wrote it, and in-tree plugins, trusted, run unchecked.
A value refused raises ``PluginFailed`` naming the method.
"""

import functools
import math
import numbers

import numpy as np

from scheduler import exception
from scheduler.filters import base as filters_base
from scheduler import loader
from scheduler import objects


def guard(plugin):
    """``plugin`` with its results checked when its class comes from
    outside the scheduler package (``loader.outside_package``)."""
    package = loader.outside_package(type(plugin).__module__)
    if package is None:
        return plugin
    for name, check in _CHECKS:
        method = getattr(plugin, name, None)
        if method is not None:
            vars(plugin)[name] = _checked(plugin, name, method, check,
                                          package)
    return plugin


def _checked(plugin, name: str, method, check, package: str):
    where = '%s.%s' % (type(plugin).__name__, name)

    @functools.wraps(method)
    def checked(*args, **kwargs):
        if name == 'filter_all' and args and not isinstance(args[0], list):
            # Its check needs the hosts again.
            args = (list(args[0]),) + args[1:]
        result = method(*args, **kwargs)
        wrong = check(result, *args, **kwargs)
        if wrong:
            raise exception.PluginFailed(plugin=where, package=package,
                                         error='returned %s' % wrong)
        return result
    return checked


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + '...'


def _verdict(result, *args, **kwargs) -> str | None:
    # None too: nova took a filter that returns nothing as a "no".
    if result is True or result is False or result is None or \
            isinstance(result, (filters_base.Rejected, np.bool_)):
        return None
    return '%s: a verdict is True, False or a Rejected' % _short(result)


def _hosts(result, host_states, *args, **kwargs) -> str | None:
    # The pipeline hands a list; what is returned must be from it.
    given = {id(h) for h in host_states}
    try:
        result = list(result)
    except TypeError:
        return '%s: not a list of hosts' % _short(result)
    for host in result:
        if id(host) not in given:
            return '%s among the hosts that pass: not one it was given' \
                % _short(host)
    return None


def _mask(result, columns, *args, **kwargs) -> str | None:
    if result is None:
        return None
    mask = np.asarray(result)
    if mask.dtype != bool or mask.shape != (len(columns),):
        return '%s: a mask is one boolean per candidate (%d)' % (
            _short(result), len(columns))
    return None


def _number(value) -> str | None:
    if isinstance(value, numbers.Real) and math.isfinite(value):
        return None
    return '%s: not a finite number' % _short(value)


def _one(result, *args, **kwargs) -> str | None:
    return _number(result)


def _per_host(result, hosts, *args, **kwargs) -> str | None:
    """One finite number per host of ``hosts``."""
    values = np.asarray(result) if isinstance(result, (list, tuple,
                                                       np.ndarray)) \
        else None
    if values is None or values.shape != (len(hosts),):
        return '%s: one number per host (%d)' % (_short(result), len(hosts))
    if values.dtype.kind not in 'biuf':
        return next(filter(None, map(_number, result)), None)
    if not np.isfinite(values).all():
        return '%s: not finite numbers' % _short(result)
    return None


def _column(result, columns, *args, **kwargs) -> str | None:
    """A number for every candidate, or one per candidate (None too:
    weigh host by host)."""
    if result is None or np.ndim(result) == 0:
        return None if result is None else _number(result)
    return _per_host(result, range(len(columns)))


def _multipliers(result, columns, *args, **kwargs) -> str | None:
    if np.ndim(result) == 0:
        return _number(result)
    return _per_host(result, range(len(columns)))


def _selections(result, context, spec_obj=None, *args, **kwargs
                ) -> str | None:
    spec_obj = kwargs.get('spec_obj', spec_obj)
    wanted = spec_obj.obj_get('num_instances') or 1
    if not isinstance(result, list) or len(result) != wanted:
        return '%s: one list of Selections per instance (%d)' % (
            _short(result), wanted)
    for alternates in result:
        if not isinstance(alternates, list) or not alternates or \
                not all(isinstance(s, objects.Selection)
                        for s in alternates):
            return '%s: a list of Selections, first choice first' % (
                _short(alternates))
    return None


#: (method, check of what it returns): each method the scheduler takes
#: a result from, for a filter, a weigher and a driver alike (a plugin
#: has only its kind's).
_CHECKS = (
    ('host_passes', _verdict),
    ('passes', _verdict),
    ('filter_all', _hosts),
    ('filter_columns', _mask),
    ('_weigh_object', _one),
    ('weigh_objects', _per_host),
    ('weigh_columns', _column),
    ('configured_multiplier', _one),
    ('weight_multiplier', _one),
    ('weight_multipliers', _per_host),
    ('column_multipliers', _multipliers),
    ('select_destinations', _selections),
)
