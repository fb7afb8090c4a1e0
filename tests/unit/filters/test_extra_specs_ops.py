"""The operators of extra specs, one by one (admin guide's list).

With no operator the host value must equal the requirement as a string
(``s==``).  ``=`` is "at least", as for vCPUs.
"""

import pytest

from scheduler.filters import extra_specs_ops

CASES = [
    # (host value, requirement, matches)
    # no operator: string equality
    ('QEMU', 'QEMU', True),
    ('qemu', 'QEMU', False),
    (48, '48', True),
    ('1.0', '1', False),
    (True, 'True', True),
    # '=': at least, as a number
    (48, '= 48', True),
    (64, '= 48', True),
    (24, '= 48', False),
    ('64', '= 48.0', True),
    # '==' and '!=': numeric (in)equality
    (2, '== 2.0', True),
    ('2', '== 2', True),
    (3, '== 2', False),
    (3, '!= 2', True),
    (2, '!= 2.0', False),
    # '>=', '<='
    (5, '>= 5', True),
    (4, '>= 5', False),
    (10, '<= 10', True),
    (11, '<= 10', False),
    (1005003, '>= 1005003', True),
    # string comparisons
    ('2.1.0', 's== 2.1.0', True),
    ('2.1.0', 's== 2.1', False),
    ('kvm', 's!= xen', True),
    ('xen', 's!= xen', False),
    ('b', 's>= a', True),
    ('a', 's>= a', True),
    ('a', 's>= b', False),
    ('b', 's> a', True),
    ('a', 's> a', False),
    ('a', 's<= a', True),
    ('b', 's<= a', False),
    ('a', 's< b', True),
    ('b', 's< b', False),
    # ... compare as strings, not numbers: '10' < '9'
    ('10', 's< 9', True),
    # a bare '<' is no operator: the whole text must equal the value
    (10, '< 9', False),
    ('< 9', '< 9', True),
    # <in>: substring
    ('compute-01', '<in> compute', True),
    ('gpu-01', '<in> compute', False),
    ('Intel(R) Xeon(R) Gold', '<in> Xeon(R) Gold', True),
    # <all-in>: every word in the collection (a list or its text)
    (['aes', 'mmx', 'sse2'], '<all-in> aes mmx', True),
    (['aes', 'sse2'], '<all-in> aes mmx', False),
    ("['aes', 'mmx']", '<all-in> aes mmx', True),
    ('aes,mmx,sse2', '<all-in> mmx sse2', True),
    ('aes', '<all-in>', False),
    # <or>: one of these
    ('fpu', '<or> fpu <or> gpu', True),
    ('gpu', '<or> fpu <or> gpu', True),
    ('tpu', '<or> fpu <or> gpu', False),
    # numbers that are not numbers, missing operands, missing values
    ('many', '>= 5', False),
    (5, '>=', False),
    (None, '>= 5', False),
    (None, 'None', False),
    ('', '', True),
]


@pytest.mark.parametrize('value, requirement, expected', CASES)
def test_match(value, requirement, expected):
    assert extra_specs_ops.match(value, requirement) is expected


def test_every_operator_of_the_admin_guide_is_covered():
    ops = {'=', '==', '!=', '>=', '<=', 's==', 's!=', 's>=', 's>', 's<=',
           's<', '<in>', '<all-in>', '<or>'}
    used = {req.split()[0] for _value, req, _ in CASES if req.split()}
    assert ops <= used
