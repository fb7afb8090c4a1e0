"""JsonFilter: the host satisfies the JSON query of the ``query``
scheduler hint."""

import functools
import json
import numbers
import operator
import reprlib
import typing

from scheduler import exception
from scheduler.filters import base

HINT = 'query'

#: Longest query text accepted, in characters.
MAX_QUERY_CHARS = 4096
#: Deepest nesting of expressions accepted (``[op, [op, ...]]`` is 2).
MAX_DEPTH = 16
#: Most operators and ``$variables`` in one query: the work per host.
MAX_TERMS = 128


_REPR = reprlib.Repr()
_REPR.maxlevel = 2
_REPR.maxstring = 60
_REPR.maxother = 60


def _show(value) -> str:
    """A short, bounded rendering of part of a query for error messages."""
    return _REPR.repr(value)


def _attr(name: str):
    return operator.attrgetter(name)


def _host_ip(host_state):
    ip = host_state.host_ip
    return None if ip is None else str(ip)


#: ``$name`` -> how to read it from a host.  Only these names resolve:
#: a query is user input and must not reach arbitrary attributes of the
#: scheduler's objects (``$report``, ``$__class__``, methods...).
_SCALARS = {name: _attr(name) for name in (
    'host', 'nodename', 'uuid', 'hypervisor_type', 'hypervisor_version',
    'hypervisor_hostname', 'memory_mb', 'memory_mb_used', 'local_gb',
    'local_gb_used', 'vcpus', 'vcpus_used', 'cpu_allocation_ratio',
    'ram_allocation_ratio', 'disk_allocation_ratio', 'num_instances',
    'num_io_ops', 'failed_builds', 'disabled', 'forced_down',
    'disk_available_least', 'cell_uuid',
    # Derived by HostResources.
    'free_ram_mb', 'free_disk_mb', 'free_vcpus', 'total_usable_ram_mb',
    'total_usable_disk_gb')}
_SCALARS['host_ip'] = _host_ip
# The name nova's HostState uses, and the guide's examples.
_SCALARS['vcpus_total'] = _attr('vcpus')

#: ``$name.key...`` -> the dict to look ``key`` up in.
_DICTS = {'metrics': _attr('metrics'), 'cpu_info': _attr('cpu_info'),
          'stats': _attr('stats')}


def known_variables() -> list:
    """The ``$variables`` a query may use, for error messages and docs."""
    return sorted(['$' + n for n in _SCALARS]
                  + ['$%s.<key>' % n for n in _DICTS])


def _invalid(reason: str) -> exception.InvalidRequest:
    return exception.InvalidRequest(reason='JsonFilter query hint: %s'
                                    % reason)


def _dict_getter(root, path: str):
    """Read ``path`` from the dict ``root`` returns.

    Metric names and cpu_info keys are flat and contain dots
    (``cpu.frequency``, ``topology.cores``): the whole dotted path is
    tried first, then a walk through nested dicts.
    """
    parts = path.split('.')

    def get(host_state):
        mapping = root(host_state)
        if not isinstance(mapping, dict):
            return None
        if path in mapping:
            return mapping[path]
        value = mapping
        for part in parts:
            if not isinstance(value, dict):
                return None
            value = value.get(part)
        return value
    return get


def _variable(text: str):
    name, dot, path = text[1:].partition('.')
    if not dot and name in _SCALARS:
        return _SCALARS[name]
    if dot and path and name in _DICTS:
        return _dict_getter(_DICTS[name], path)
    if name in _DICTS:
        raise _invalid('$%s needs a key, as in $%s.<key>' % (name, name))
    if dot and name in _SCALARS:
        raise _invalid('$%s has no keys (in %s)' % (name, _show(text)))
    raise _invalid('unknown variable %s; known variables: %s'
                   % (_show(text), ', '.join(known_variables())))


def _number(value):
    """``value`` as a number for a comparison, or None if it is none."""
    if isinstance(value, numbers.Number):
        return value
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _comparison(op, symbol: str):
    def compare(a, b) -> bool:
        if isinstance(a, str) != isinstance(b, str):
            # "4" from cpu_info against 4 from the query: compare as
            # numbers when both read as numbers.
            na, nb = _number(a), _number(b)
            if na is None or nb is None:
                if op is operator.eq:
                    return False
                raise _invalid('cannot compare %s %s %s'
                               % (_show(a), symbol, _show(b)))
            a, b = na, nb
        try:
            return bool(op(a, b))
        except TypeError:
            raise _invalid('cannot compare %s %s %s'
                           % (_show(a), symbol, _show(b)))

    def command(args: list) -> bool:
        if len(args) < 2:
            return False
        first = args[0]
        return all(compare(first, other) for other in args[1:])
    return command


def _in(args: list) -> bool:
    return len(args) >= 2 and args[0] in args[1:]


def _not(args: list) -> bool:
    # nova returns a list and takes any() of it at the top: the same.
    return any(not a for a in args)


def _or(args: list) -> bool:
    return any(args)


def _and(args: list) -> bool:
    return all(args)


COMMANDS = {
    '=': _comparison(operator.eq, '='),
    '<': _comparison(operator.lt, '<'),
    '>': _comparison(operator.gt, '>'),
    '<=': _comparison(operator.le, '<='),
    '>=': _comparison(operator.ge, '>='),
    'in': _in,
    'not': _not,
    'or': _or,
    'and': _and,
}


def _compile(expr, depth: int, budget: list):
    """Turn ``[op, arg, ...]`` into a function of a host, checking it all.

    Every error a hostile or mistaken query can cause is found here,
    before any host is looked at, except comparisons of values whose
    types only the hosts reveal.  ``budget`` (a one-item list) counts
    down the operators and variables left, which bounds the work per
    host.
    """
    if depth > MAX_DEPTH:
        raise _invalid('nested deeper than %d levels' % MAX_DEPTH)
    if not isinstance(expr, list) or not expr:
        raise _invalid('an expression must be a non-empty list '
                       '[operator, argument, ...], not %s'
                       % _show(expr))
    op = expr[0]
    if not isinstance(op, str) or op not in COMMANDS:
        raise _invalid('unknown operator %s; operators: %s'
                       % (_show(op), ' '.join(COMMANDS)))
    _spend(budget)
    command = COMMANDS[op]
    # (reader, constant): a reader of the host, or None and a constant.
    args = []
    for arg in expr[1:]:
        if isinstance(arg, list):
            args.append((_compile(arg, depth + 1, budget), None))
        elif isinstance(arg, str) and arg.startswith('$'):
            _spend(budget)
            args.append((_variable(arg), None))
        elif arg is None or arg == '':
            # nova drops empty arguments.
            continue
        elif isinstance(arg, (str, int, float, bool)):
            args.append((None, arg))
        else:
            raise _invalid('unsupported argument %s' % _show(arg))
    if all(reader is None for reader, _value in args):
        result = command([value for _reader, value in args])
        return lambda host_state: result

    def evaluate(host_state):
        cooked = []
        for reader, value in args:
            if reader is not None:
                value = reader(host_state)
                if value is None:
                    continue
            cooked.append(value)
        return command(cooked)
    return evaluate


def _spend(budget: list) -> None:
    budget[0] -= 1
    if budget[0] < 0:
        raise _invalid('more than %d operators and variables' % MAX_TERMS)


@functools.lru_cache(maxsize=256)
def compile_query(text: str) -> typing.Callable | None:
    """The host predicate of a query text; raises InvalidRequest.

    Cached: the same query is compiled once for every instance of a
    request and for later requests that repeat it.
    """
    if len(text) > MAX_QUERY_CHARS:
        raise _invalid('%d characters, more than the %d allowed'
                       % (len(text), MAX_QUERY_CHARS))
    try:
        query = json.loads(text)
    except RecursionError:
        raise _invalid('nested deeper than %d levels' % MAX_DEPTH)
    except ValueError as e:
        raise _invalid('not valid JSON (%s)' % e)
    if not isinstance(query, list):
        raise _invalid('must be a JSON list such as '
                       '[">=", "$free_ram_mb", 1024]')
    if not query:
        return None
    return _compile(query, 1, [MAX_TERMS])


class JsonFilter(base.RequestScopedFilter):
    """Passes hosts that satisfy the request's ``query`` hint, a JSON
    list such as ``["and", [">=", "$free_ram_mb", 1024], ["<",
    "$num_instances", 10]]``.

    Operators: ``=``, ``<``, ``>``, ``<=``, ``>=`` (the first argument
    against each of the others), ``in`` (the first among the others),
    ``not``, ``or``, ``and``.  ``$variables`` name host values from a
    fixed list (``known_variables()``: the HostState fields, the
    derived ``free_ram_mb``, ``free_disk_mb``, ``free_vcpus``,
    ``total_usable_ram_mb``, ``total_usable_disk_gb``, nova's
    ``vcpus_total``, and keys of ``metrics``, ``cpu_info`` and
    ``stats`` as in ``$metrics.cpu.frequency`` or
    ``$stats.num_os_type_windows``).  A variable the host lacks is dropped
    from its expression, as nova does.

    The query is user input: anything but a well-formed query of at
    most MAX_QUERY_CHARS characters, MAX_DEPTH levels and MAX_TERMS
    operators and variables raises InvalidRequest (returned to the
    caller), never another error.
    """

    def prepare(self, spec_obj):
        text = spec_obj.get_scheduler_hint(HINT)
        if text is None or text == '':
            return base.SKIP
        if not isinstance(text, str):
            raise _invalid('give one JSON string, not %d values'
                           % len(text))
        predicate = compile_query(text)
        return base.SKIP if predicate is None else (predicate, text)

    def passes(self, host_state, prepared) -> base.Verdict:
        predicate, text = prepared
        return bool(predicate(host_state)) or base.Rejected(
            'does not satisfy the query hint %s', text[:200])
