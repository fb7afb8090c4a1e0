"""The freshness read on PostgreSQL: statements, no transaction.

Before every request a worker reads what other workers changed: the
changed reports and usage rows, then the reports and pending claims of
the nodes that changed.  Every request waits for that read, and each
round trip of it waits for the server and for the worker's other green
threads; a transaction made each of the last two reads three round
trips (BEGIN, SELECT, COMMIT).  Here the statements and commits the
driver sees are counted.
"""

import uuid

from oslo_utils import timeutils

from scheduler.db import api
from scheduler.db import usage
from tests.functional.db import statement_log

_LIMITS = {'memory_mb': 4096, 'vcpu': 8, 'disk_gb': 100}


def _node(name: str):
    usage.apply_reports([usage.NodeReport(name, name, 0, 0, 0, 0,
                                          timeutils.utcnow(), frozenset())])


def test_pending_claims_of_nodes_are_one_statement_outside_a_transaction(
        postgresql):
    _node('n1')
    _node('n2')
    placed = usage.claim_many([usage.ClaimRequest(
        str(uuid.uuid4()), 'n1', 'n1', 1024, 1, 10, limits=dict(_LIMITS))])
    with statement_log.StatementLog() as driver:
        found = usage.pending_claims([('n1', 'n1'), ('n2', 'n2')])
    assert [p['instance_uuid'] for p in found] == \
        [placed[0]['instance_uuid']]
    assert len(driver.statements) == 1, driver.statements
    assert driver.commits == 0
    assert driver.begins == 0


def test_stored_reports_of_nodes_are_one_statement_outside_a_transaction(
        postgresql):
    api.host_reports_save([{
        'host': name, 'nodename': name,
        'uuid': '00000000-0000-4000-8000-%012d' % i, 'disabled': False,
        'updated_at': timeutils.utcnow(), 'report': {'free_ram_mb': 1024},
    } for i, name in enumerate(('h1', 'h2'))])
    with statement_log.StatementLog() as driver:
        found = api.host_reports_get([('h1', 'h1')])
    assert [(r['host'], r['nodename']) for r in found] == [('h1', 'h1')]
    assert len(driver.statements) == 1, driver.statements
    assert driver.commits == 0
    assert driver.begins == 0
