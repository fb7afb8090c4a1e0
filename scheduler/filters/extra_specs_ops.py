"""The comparison language of extra specs and capability filters.

A requirement is ``[<op>] <value>``: with no operator, the host value
must equal it (numerically when both are numbers, ``=`` style as nova:
"at least").  Operators:

* ``=``    host value >= requirement (numbers)
* ``==``   equal (numbers);  ``!=`` not equal (numbers)
* ``>=``, ``<=``           numeric bounds
* ``s==``, ``s!=``, ``s>=``, ``s>``, ``s<=``, ``s<``  string comparisons
* ``<in>``  the requirement is a substring of the host value
* ``<all-in>``  every listed word is in the host value (a list or text)
* ``<or>``  ``<or> a <or> b``: host value equals any of them
"""

import operator

_STRING_OPS = {
    's==': operator.eq, 's!=': operator.ne, 's<': operator.lt,
    's<=': operator.le, 's>': operator.gt, 's>=': operator.ge,
}

_NUMBER_OPS = {
    '=': operator.ge, '==': operator.eq, '!=': operator.ne,
    '>=': operator.ge, '<=': operator.le,
}


def _float(value):
    return float(value)


def match(value, req: str) -> bool:
    """Whether a host's ``value`` satisfies the requirement string ``req``."""
    if value is None:
        return False
    words = str(req).split()
    if not words:
        return str(value) == str(req)
    op = words[0]
    if op == '<or>':
        options = [w for w in words[1:] if w != '<or>']
        return str(value) in options
    if op == '<in>':
        return ' '.join(words[1:]) in str(value)
    if op == '<all-in>':
        wanted = words[1:]
        have = (value if isinstance(value, (list, tuple, set))
                else str(value).replace(',', ' ').replace('[', ' ')
                .replace(']', ' ').replace("'", ' ').split())
        have = {str(h) for h in have}
        return bool(wanted) and all(w in have for w in wanted)
    if op in _STRING_OPS:
        return _STRING_OPS[op](str(value), ' '.join(words[1:]))
    if op in _NUMBER_OPS:
        try:
            return _NUMBER_OPS[op](_float(value), _float(words[1]))
        except (ValueError, TypeError, IndexError):
            return False
    return str(value) == str(req)
