"""Taken casts in the inventory (``scheduler.db.taken_casts``), on a
migrated SQLite file: the takeover, and the claim that renews a row.

The same scenarios run against PostgreSQL and MariaDB in
tests/functional/db/test_backends.py.
"""

import datetime

from oslo_utils import timeutils
import pytest
import sqlalchemy as sa

from scheduler.db import engine
from scheduler.db import models
from scheduler.db import taken_casts
from scheduler.db import usage
from scheduler import exception
from tests.unit import fixtures

LATER = datetime.timedelta(seconds=600)


@pytest.fixture(autouse=True)
def node(inventory):
    usage.apply_reports([usage.NodeReport(
        'h1', 'h1', memory_mb_used=0, vcpus_used=0, local_gb_used=0,
        num_instances=0, updated_at=timeutils.utcnow(),
        instance_uuids=frozenset())])
    return inventory


def _claim(n):
    return usage.claim(usage.ClaimRequest(
        fixtures.uuid(n), 'h1', 'h1', 1024, 1, 10,
        limits={'memory_mb': 4096}))


def _rows() -> list:
    return engine.run_read(lambda conn: [
        dict(r._mapping) for r in conn.execute(sa.select(
            models.TakenCast.__table__))])


def _overdue() -> list:
    return taken_casts.overdue(timeutils.utcnow() + LATER)


def test_exactly_one_worker_takes_an_overdue_cast_over():
    taken = taken_casts.record([fixtures.uuid(1)], {'args': {}}, 'dead:1')
    assert taken_casts.overdue(timeutils.utcnow() - LATER) == []
    # Both workers read the row before either takes it.
    seen_by_a, seen_by_b = _overdue(), _overdue()
    won = taken_casts.take_over(seen_by_a[0], 'a:2')
    lost = taken_casts.take_over(seen_by_b[0], 'b:3')
    assert lost is None
    assert (won.id, won.instance_uuids, won.taken_by) == (
        taken.id, [fixtures.uuid(1)], 'a:2')
    assert won.token != taken.token
    [row] = _rows()
    assert (row['taken_by'], row['token']) == ('a:2', won.token)


def test_a_claim_renews_its_cast_which_keeps_the_instance():
    """Until its build is sent (the cast ends, ``forget``), a claimed
    instance stays in the row: a worker killed in between leaves it to
    a takeover."""
    taken = taken_casts.record([fixtures.uuid(1), fixtures.uuid(2)],
                               {'args': {}}, 'me:1')
    [before] = _rows()
    with taken_casts.serving(taken):
        _claim(1)
    [row] = _rows()
    assert row['instance_uuids'] == '["%s", "%s"]' % (fixtures.uuid(1),
                                                      fixtures.uuid(2))
    assert row['taken_at'] >= before['taken_at']
    assert row['token'] == taken.token
    assert taken_casts.forget(taken)
    assert _rows() == []


def test_a_claim_outside_any_cast_leaves_the_rows_alone():
    taken_casts.record([fixtures.uuid(1)], {'args': {}}, 'me:1')
    _claim(1)
    assert len(_rows()) == 1


def test_the_claim_of_a_cast_taken_over_rolls_back():
    """The original worker was only slow: the worker that took the cast
    over builds it, the original's claim is refused and undone."""
    taken = taken_casts.record([fixtures.uuid(1)], {'args': {}}, 'slow:1')
    assert taken_casts.take_over(_overdue()[0], 'other:2') is not None
    before = usage.usage_get_all()
    with taken_casts.serving(taken), \
            pytest.raises(exception.CastTakenOver):
        _claim(1)
    assert usage.placements_get([fixtures.uuid(1)]) == {}
    assert usage.usage_get_all() == before
    assert [r['taken_by'] for r in _rows()] == ['other:2']


def test_forget_deletes_only_a_row_this_worker_still_holds():
    taken = taken_casts.record([fixtures.uuid(1)], {'args': {}}, 'slow:1')
    over = taken_casts.take_over(_overdue()[0], 'other:2')
    assert not taken_casts.forget(taken)
    assert taken_casts.forget(over)
    assert _rows() == []
