"""Bounds on what the service reads from the bus, checked before the work.

Two layers: raw bodies are measured before kombu parses them (a large
JSON document costs many times its size in objects, and the allocator
keeps much of that memory after it is freed), and decoded arguments are
walked once, without recursion, before any versioned object is built
from them.  Arguments of the common shallow shapes (a context, a
liveness message) are counted without the walk, and without reading the
limits when they hold fewer values than any limit may be set to.
"""

import bz2
import itertools
import lzma
import zlib

from kombu import compression as kombu_compression
from kombu import serialization as kombu_serialization
from kombu.utils import json as kombu_json
from oslo_config import cfg

from scheduler import exception

CONF = cfg.CONF

#: Integers beyond 64 bits have no meaning for the scheduler, and would
#: overflow the database and numpy columns.
_INT_LIMIT = 2 ** 63


class MessageTooLarge(exception.SchedulerException):
    msg_fmt = ('Message body of %(size)d bytes is larger than [limits] '
               'max_message_bytes (%(limit)d): dropped unread')


def _check_size(data) -> None:
    limit = CONF.limits.max_message_bytes
    if len(data) > limit:
        raise MessageTooLarge(size=len(data), limit=limit)


def _bounded_json_loads(data):
    _check_size(data)
    return kombu_json.loads(data)


def _bounded(decompress_class):
    """A decompressor that stops at ``max_message_bytes`` of output."""
    def decompress(body):
        _check_size(body)
        limit = CONF.limits.max_message_bytes
        decompressor = decompress_class()
        out = decompressor.decompress(body, limit + 1)
        if len(out) > limit:
            raise MessageTooLarge(size=len(out), limit=limit)
        return out
    return decompress


def _refuse(body):
    raise exception.MalformedObject(what='message',
                                    reason='compression not accepted')


def install() -> None:
    """Bound JSON bodies and decompression in this process (idempotent).

    oslo.messaging's rabbit driver decodes every body through kombu's
    registries; our decoders check the size first.  Compressed bodies
    (which oslo.messaging never sends unless ``kombu_compression`` is
    set) are inflated at most to the same limit.
    """
    kombu_serialization.register(
        'json', kombu_json.dumps, _bounded_json_loads,
        content_type='application/json', content_encoding='utf-8')
    kombu_compression.register(zlib.compress,
                               _bounded(zlib.decompressobj),
                               'application/x-gzip',
                               aliases=['gzip', 'zlib'])
    kombu_compression.register(bz2.compress,
                               _bounded(bz2.BZ2Decompressor),
                               'application/x-bz2',
                               aliases=['bzip2', 'bzip'])
    kombu_compression.register(lzma.compress,
                               _bounded(lzma.LZMADecompressor),
                               'application/x-lzma', aliases=['lzma', 'xz'])
    for content_type in ('application/x-brotli', 'application/zstd'):
        kombu_compression.register(None, _refuse, content_type)


def check_arguments(method, ctxt, args) -> None:
    """Refuse arguments too deep, too many or with absurd numbers.

    Raises InvalidRequest naming the first problem found; walks with an
    explicit stack so that the walk itself cannot overflow.
    """
    if not isinstance(method, str) or not method or len(method) > 255:
        raise exception.InvalidRequest(reason='no method name')
    if not isinstance(args, dict):
        raise exception.InvalidRequest(
            reason='arguments must be a mapping, not %s'
            % type(args).__name__)
    if not isinstance(ctxt, dict):
        raise exception.InvalidRequest(
            reason='context must be a mapping, not %s' % type(ctxt).__name__)
    count = _shallow_count(ctxt, args)
    if count is not None and (count <= LEAST_ITEMS or
                              count <= CONF.limits.max_argument_items):
        return
    _walk(args, ctxt, CONF.limits.max_argument_depth,
          CONF.limits.max_argument_items)


def _least(name: str) -> int:
    from scheduler.conf import limits
    for opt in limits.limits_opts:
        if opt.name == name:
            return opt.type.min
    raise LookupError(name)


#: The least ``max_argument_items`` and ``max_argument_depth`` may be
#: (the options' minimums, which oslo.config enforces on every value):
#: arguments within both are accepted without reading them.
LEAST_ITEMS = _least('max_argument_items')
LEAST_DEPTH = _least('max_argument_depth')

#: Nesting ``_shallow_count`` accepts: a container at this depth at most
#: (the context and the arguments are at 1), whatever the limit is.
SHALLOW_DEPTH = 3
assert SHALLOW_DEPTH < LEAST_DEPTH


def _fits(value) -> bool:
    """Whether ``_walk`` takes ``value`` as a leaf it accepts: neither a
    container nor an integer beyond 64 bits."""
    if isinstance(value, (dict, list)):
        return False
    return (not isinstance(value, int) or type(value) is bool
            or -_INT_LIMIT <= value < _INT_LIMIT)


def _shallow_count(ctxt: dict, args: dict) -> int | None:
    """How many values ``_walk`` would count in ``ctxt`` and ``args``,
    when it would find no problem in their shape whatever the limits:
    each holds leaves, lists of leaves and lists of lists of leaves
    (what a context and most casts are: ``SHALLOW_DEPTH``), every
    integer fits.  None otherwise: the walk decides, and names the
    problem.

    What the walk spends on every value on a stack of iterators, this
    spends only on the containers, and on the leaves a type look-up.
    """
    count = 2
    for mapping in (ctxt, args):
        count += 2 * len(mapping)
        for key, value in mapping.items():
            if type(key) is not str and not _fits(key):
                return None
            kind = type(value)
            if kind is str or value is None or kind is bool \
                    or kind is float:
                continue
            if kind is not list:
                if not _fits(value):
                    return None
                continue
            count += len(value)
            for item in value:
                kind = type(item)
                if kind is str or item is None:
                    continue
                if kind is not list:
                    if not _fits(item):
                        return None
                    continue
                count += len(item)
                for leaf in item:
                    if type(leaf) is not str and not _fits(leaf):
                        return None
    return count


def _walk(args: dict, ctxt: dict, max_depth: int, max_items: int) -> None:
    """Every value of ``ctxt`` and then of ``args``, depth first and the
    children of each in reverse order; InvalidRequest at the first
    problem.

    Each container's children are taken from one iterator that the
    stack keeps: the strings and None that most values are cost a
    count each, and no entry on the stack.
    """
    budget = max_items
    stack = [(iter((ctxt, args)), 1)]
    while stack:
        children, depth = stack[-1]
        for child in children:
            budget -= 1
            if budget < 0:
                raise exception.InvalidRequest(
                    reason='more than %d values in the arguments '
                           '([limits] max_argument_items)' % max_items)
            kind = type(child)
            if kind is str or child is None:
                continue
            if isinstance(child, dict):
                grandchildren = itertools.chain(reversed(child.values()),
                                                reversed(child.keys()))
            elif isinstance(child, list):
                grandchildren = reversed(child)
            else:
                if (isinstance(child, int) and kind is not bool
                        and not -_INT_LIMIT <= child < _INT_LIMIT):
                    raise exception.InvalidRequest(
                        reason='an integer does not fit in 64 bits')
                continue
            if child and depth >= max_depth:
                raise exception.InvalidRequest(
                    reason='arguments nested deeper than %d levels '
                           '([limits] max_argument_depth)' % max_depth)
            stack.append((grandchildren, depth + 1))
            break
        else:
            stack.pop()
