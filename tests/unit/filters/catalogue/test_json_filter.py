"""JsonFilter: the guide's queries, every operator, the allow-list of
variables, and hostile queries (always InvalidRequest)."""

import json

import pytest

from scheduler import exception
from scheduler.filters import json_filter as mod
from tests.unit.filters.catalogue import host
from tests.unit.filters.catalogue import passing
from tests.unit.filters.catalogue import request


@pytest.fixture(autouse=True)
def _fresh_cache():
    mod.compile_query.cache_clear()


def _hosts():
    return [
        host('big', memory_mb=16384, memory_mb_used=2048, local_gb=500,
             vcpus=32, vcpus_used=4, num_instances=3,
             hypervisor_hostname='big.example', hypervisor_type='QEMU',
             metrics={'cpu.frequency': 2400.0},
             cpu_info={'vendor': 'Intel', 'topology.cores': '8'},
             host_ip='10.0.0.1'),
        host('small', memory_mb=2048, memory_mb_used=1536, local_gb=20,
             vcpus=4, vcpus_used=4, num_instances=12,
             hypervisor_hostname='small.example',
             metrics={'cpu.frequency': 1200.0},
             cpu_info={'vendor': 'AMD', 'topology.cores': '2'}),
    ]


def _run(query) -> list:
    text = query if isinstance(query, str) else json.dumps(query)
    return passing(mod.JsonFilter(), _hosts(), request(
        hints={'query': text}))


def test_guide_example():
    # --hint query='[">=","$free_ram_mb",1024]'
    assert _run('[">=","$free_ram_mb",1024]') == ['big']


@pytest.mark.parametrize('query, expected', [
    (['=', '$vcpus_used', 4], ['big', 'small']),
    (['<', '$num_instances', 10], ['big']),
    (['>', '$free_disk_mb', 100 * 1024], ['big']),
    (['<=', '$total_usable_ram_mb', 2048], ['small']),
    (['>=', '$vcpus_total', 32], ['big']),
    (['=', '$free_vcpus', 0], ['small']),
    (['>=', '$total_usable_disk_gb', 100], ['big']),
    (['in', '$hypervisor_hostname', 'small.example', 'x'], ['small']),
    (['=', '$host_ip', '10.0.0.1'], ['big']),
    (['not', ['=', '$host', 'big']], ['small']),
    (['or', ['=', '$host', 'big'], ['=', '$host', 'small']],
     ['big', 'small']),
    (['and', ['>=', '$free_ram_mb', 512], ['>', '$num_instances', 5]],
     ['small']),
    (['>', '$metrics.cpu.frequency', 2000], ['big']),
    (['=', '$cpu_info.vendor', 'AMD'], ['small']),
    # cpu_info values are strings: compared as numbers with numbers.
    (['>=', '$cpu_info.topology.cores', 4], ['big']),
    # A variable a host lacks is dropped, as nova does.
    (['=', '$metrics.cpu.missing', 1], []),
    (['=', '$hypervisor_type', 'QEMU'], ['big']),
    # Several arguments: the first against each other one.
    (['<', 4, '$num_instances', 20], ['small']),
    ([], ['big', 'small']),
])
def test_operators_and_variables(query, expected):
    assert _run(query) == expected


def test_no_query_skips():
    assert mod.JsonFilter().prepare(request()) is mod.base.SKIP


def test_runs_for_every_instance():
    assert not mod.JsonFilter.run_filter_once_per_request


def test_compiled_once_per_query_text():
    flt = mod.JsonFilter()
    spec = request(hints={'query': '[">=","$free_ram_mb",1024]'})
    flt.filter_all(_hosts(), spec)
    flt.filter_all(_hosts(), spec)
    assert mod.compile_query.cache_info().hits >= 1


@pytest.mark.parametrize('query', [
    # Not JSON, or JSON of the wrong shape.
    'not json', '{"a": 1}', '"$free_ram_mb"', '42', '[1, 2]',
    '[">=", "$free_ram_mb", {"a": 1}]', '[">=", [], 1]',
    '["eval", "$host"]', '[["=", 1, 1]]', '[null]',
    # Variables outside the allow-list.
    '["=", "$__class__", 1]', '["=", "$report", 1]',
    '["=", "$_private", 1]', '["=", "$aggregates", 1]',
    '["=", "$limits", 1]', '["=", "$consume_from_request", 1]',
    '["=", "$obj_get", 1]', '["=", "$__dict__", 1]',
    '["=", "$host.__class__", 1]', '["=", "$metrics", 1]',
    '["=", "$", 1]', '["=", "$free_ram_mb.x", 1]',
    # Wrong types.
    '["<", "$hypervisor_hostname", 5]', '["<", "$free_ram_mb", "lots"]',
    '[">", "$cpu_info.vendor", 1]', '["<", ["=", 1, 1], "x"]',
    # Too deep, too big.
    '["and", ' * 20 + 'true' + ']' * 20,
    '[' * 3000 + ']' * 3000,
    '["in", "$host", ' + ', '.join(['"x"'] * 2000) + ']',
    '["=", 1, ' + '9' * 5000 + ']',
])
def test_hostile_or_bad_queries_are_invalid_requests(query):
    with pytest.raises(exception.InvalidRequest) as err:
        _run(query)
    assert 'JsonFilter query hint' in str(err.value)


def test_unknown_variable_message_lists_the_known_ones():
    with pytest.raises(exception.InvalidRequest) as err:
        _run(['=', '$report', 1])
    assert '$free_ram_mb' in str(err.value)
    assert '$report' in str(err.value)


def test_several_query_hints_are_invalid():
    spec = request(hints={'query': ['["=", 1, 1]', '["=", 2, 2]']})
    with pytest.raises(exception.InvalidRequest):
        mod.JsonFilter().filter_all(_hosts(), spec)


def test_depth_limit_is_inclusive():
    ok = '["and", ' * (mod.MAX_DEPTH - 1) + '["=", 1, 1]' + \
        ']' * (mod.MAX_DEPTH - 1)
    assert _run(ok) == ['big', 'small']
    too_deep = '["and", ' + ok + ']'
    with pytest.raises(exception.InvalidRequest):
        _run(too_deep)


def test_rejection_reason_quotes_the_query():
    spec = request(hints={'query': '[">=","$free_ram_mb",1024]'})
    reason = mod.JsonFilter().rejection_reason(_hosts()[1], spec)
    assert '$free_ram_mb' in reason


def test_term_budget_bounds_the_work_per_host():
    many = ['or'] + [['=', '$host', 'h%d' % i] for i in range(mod.MAX_TERMS)]
    with pytest.raises(exception.InvalidRequest) as err:
        _run(many)
    assert 'operators and variables' in str(err.value)
    fits = ['or'] + [['=', '$host', 'h%d' % i]
                     for i in range((mod.MAX_TERMS - 1) // 2)]
    assert _run(fits) == []


def test_long_constant_lists_are_fine():
    names = ['x%d' % i for i in range(300)] + ['small']
    assert _run(['in', '$host'] + names) == ['small']


def test_constant_expressions():
    assert _run(['=', 1, 1]) == ['big', 'small']
    assert _run(['and', ['=', 1, 1], ['>', 1, 2]]) == []
    with pytest.raises(exception.InvalidRequest):
        _run(['<', 'x', 1])


def test_stats_keys_are_variables():
    hosts = [host('win', stats={'num_os_type_windows': '3'}),
             host('linux', stats={'num_os_type_linux': '9'})]
    spec = request(scheduler_hints={
        'query': ['[">=", "$stats.num_os_type_windows", 2]']})
    assert passing(mod.JsonFilter(), hosts, spec) == ['win']
    assert '$stats.<key>' in mod.known_variables()
