"""The bounds every call's decoded arguments are checked against.

``check_arguments`` walks every value from one iterator per container
(``message_limits._walk``); the random test holds it to the plain walk
below, one stack entry per value: the same arguments refused, with the
same first problem named.
"""

import random

import pytest

from scheduler import exception
from scheduler import message_limits

CTXT = {'user': 'u', 'project_id': 'p', 'is_admin': True, 'roles': ['a'],
        'request_id': 'req-1', 'remote_address': None, 'read_only': False}


def _outcome(check, *args):
    try:
        check(*args)
    except exception.InvalidRequest as e:
        return str(e)
    return None


LEAVES = ['s', '', None, True, False, 0, -1, 2 ** 63 - 1, -2 ** 63, 2 ** 63,
          -2 ** 63 - 1, 10 ** 30, 1.5, float('inf'), ('a', 2 ** 70)]


def _random_value(rng, depth):
    roll = rng.random()
    if depth > 0 and roll < 0.25:
        return [_random_value(rng, depth - 1)
                for _ in range(rng.randrange(6))]
    if depth > 0 and roll < 0.5:
        return {_random_key(rng): _random_value(rng, depth - 1)
                for _ in range(rng.randrange(6))}
    if roll > 0.995:
        return list(range(rng.randrange(20, 200)))
    # Mostly good values: a problem is then one among many.
    if rng.random() < 0.9:
        return rng.choice(['host', None, 1, 2.5, True, 'x' * 5])
    return rng.choice(LEAVES)


def _random_key(rng):
    return rng.choice(['a', 'b', 'c', 'd', 'e', 'f', 1, 2 ** 64, None])


def _plain_walk(args, ctxt, max_depth, max_items):
    """The walk the checks mean: every value popped off one stack."""
    budget = max_items
    stack = [(args, 1), (ctxt, 1)]
    while stack:
        value, depth = stack.pop()
        budget -= 1
        if budget < 0:
            raise exception.InvalidRequest(
                reason='more than %d values in the arguments '
                       '([limits] max_argument_items)' % max_items)
        if isinstance(value, dict):
            children = list(value.keys()) + list(value.values())
        elif isinstance(value, list):
            children = value
        else:
            if (isinstance(value, int) and not isinstance(value, bool)
                    and not -2 ** 63 <= value < 2 ** 63):
                raise exception.InvalidRequest(
                    reason='an integer does not fit in 64 bits')
            continue
        if depth >= max_depth and children:
            raise exception.InvalidRequest(
                reason='arguments nested deeper than %d levels '
                       '([limits] max_argument_depth)' % max_depth)
        stack.extend((child, depth + 1) for child in children)


def _problem(outcome) -> str | None:
    for word in ('integer', 'deeper', 'values'):
        if outcome and word in outcome:
            return word
    return outcome


def test_the_walk_refuses_what_the_plain_walk_refuses(conf):
    rng = random.Random(20261124)
    problems = set()
    for _ in range(4000):
        # From the smallest limits the options take.
        max_depth = rng.randrange(4, 9)
        budget = rng.randrange(100, 250)
        conf.config(max_argument_depth=max_depth,
                    max_argument_items=budget, group='limits')
        args = {'arg%d' % n: _random_value(rng, rng.randrange(10))
                for n in range(rng.randrange(5))}
        ctxt = dict(CTXT) if rng.random() < 0.7 else {}
        expected = _outcome(_plain_walk, args, ctxt,
                            max_depth, budget)
        assert _outcome(message_limits.check_arguments, 'm', ctxt,
                        args) == expected, (args, max_depth, budget)
        problems.add(_problem(expected))
    # Arguments that pass, and each of the three problems, were met.
    assert problems == {None, 'integer', 'deeper', 'values'}


def _shallow_value(rng):
    """A value of the shapes ``_shallow_count`` counts itself (leaves,
    lists of leaves, lists of lists of leaves: a context, a liveness
    message), now and then one it leaves to the walk."""
    roll = rng.random()
    if roll < 0.3:
        return [[rng.choice(LEAVES) if rng.random() < 0.05 else 'h%d' % n,
                 'n', 'd'] for n in range(rng.randrange(40))]
    if roll < 0.5:
        return [rng.choice(LEAVES) if rng.random() < 0.1 else 'role'
                for _ in range(rng.randrange(60))]
    if roll < 0.53:
        return [[[]], {'a': 1}, [['x', [1]]]][rng.randrange(3)]
    return rng.choice(LEAVES) if rng.random() < 0.2 else rng.choice(
        ['s', None, True, 1.5, 7])


def test_shallow_arguments_are_refused_as_the_plain_walk_refuses(conf):
    # What the walk skips for contexts and liveness messages: the count
    # around the limit, big integers in lists, keys, the shapes it
    # leaves to the walk.
    rng = random.Random(20261128)
    problems, counted = set(), 0
    for _ in range(4000):
        max_depth = rng.randrange(4, 6)
        budget = rng.randrange(100, 300)
        conf.config(max_argument_depth=max_depth,
                    max_argument_items=budget, group='limits')
        args = {'nodes' if n == 0 else rng.choice(['sent_at', 2 ** 64, 3]):
                _shallow_value(rng) for n in range(rng.randrange(4))}
        ctxt = {key: _shallow_value(rng) if rng.random() < 0.3 else value
                for key, value in CTXT.items()}
        expected = _outcome(_plain_walk, args, ctxt, max_depth, budget)
        assert _outcome(message_limits.check_arguments, 'm', ctxt,
                        args) == expected, (args, ctxt, max_depth, budget)
        problems.add(_problem(expected))
        counted += message_limits._shallow_count(ctxt, args) is not None
    assert problems == {None, 'integer', 'deeper', 'values'}
    assert 1000 < counted < 4000


def test_arguments_within_the_least_limits_need_not_read_them(conf):
    # Small shallow arguments are accepted without reading the limits:
    # no value of theirs could refuse them (oslo.config enforces the
    # options' minimums, on a reload too).
    with pytest.raises(ValueError):
        conf.config(max_argument_items=message_limits.LEAST_ITEMS - 1,
                    group='limits')
    with pytest.raises(ValueError):
        conf.config(max_argument_depth=message_limits.LEAST_DEPTH - 1,
                    group='limits')
    conf.config(max_argument_items=message_limits.LEAST_ITEMS,
                group='limits')
    nodes = [['h%d' % n, 'n', 'd'] for n in range(20)]
    assert _outcome(message_limits.check_arguments, 'report_alive',
                    dict(CTXT), {'nodes': nodes}) is None
    # Past the least limit the option is read: the value of now.
    nodes = nodes * 2
    assert 'more than 100 values' in _outcome(
        message_limits.check_arguments, 'report_alive', dict(CTXT),
        {'nodes': nodes})
    conf.config(max_argument_items=1000, group='limits')
    assert _outcome(message_limits.check_arguments, 'report_alive',
                    dict(CTXT), {'nodes': nodes}) is None


def _request():
    spec = {'versioned_object.name': 'RequestSpec',
            'versioned_object.data': {
                'flavor': {'versioned_object.data': {'memory_mb': 2048,
                                                     'extra_specs': {}}},
                'scheduler_hints': {'group': ['g']}, 'num_instances': 1}}
    return {'spec_obj': spec, 'instance_uuids': ['u1'],
            'return_objects': True, 'peer_manifest': {'Selection': '1.1'}}


def _nested(levels: int):
    value = 'deep'
    for _ in range(levels):
        value = [value]
    return value


CASES = {
    'a request': (_request(), None),
    'an integer beyond 64 bits': (
        {'spec_obj': {'n': 2 ** 63}}, 'an integer does not fit in 64 bits'),
    'a negative one': (
        {'spec_obj': {'n': [-2 ** 63 - 1]}},
        'an integer does not fit in 64 bits'),
    'a key beyond 64 bits': (
        {'spec_obj': {2 ** 64: 1}}, 'an integer does not fit in 64 bits'),
    'a boolean is no integer': ({'a': [True, False]}, None),
    'too deep': ({'a': _nested(40)}, 'nested deeper than'),
    'deep enough': ({'a': _nested(29)}, None),
    'too many values': ({'a': list(range(100000))}, 'values in the arguments'),
}


@pytest.mark.parametrize('case', sorted(CASES))
def test_arguments_checked(case, conf):
    args, error = CASES[case]
    found = _outcome(message_limits.check_arguments, 'select_destinations',
                     dict(CTXT), args)
    if error is None:
        assert found is None
    else:
        assert error in found
