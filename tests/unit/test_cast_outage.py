"""A cast whose serving met a database outage keeps its row, and is
served once the inventory is back (``scheduler.cast_ledger``).

Dropping the row whatever the driver raised (as for a driver bug, see
test_cast_takeover.py) passed every unit test (issue 24, mutation
pass): the instances of a cast that met an outage would never be built.
"""

import contextlib

from scheduler import exception
from tests.unit import fixtures
from tests.unit.test_cast_takeover import CTX
from tests.unit.test_cast_takeover import _manager
from tests.unit.test_cast_takeover import _rows
from tests.unit.test_cast_takeover import _take_over_later
from tests.unit.test_cast_takeover import ram_decides  # noqa: F401


def test_a_cast_that_met_an_outage_keeps_its_row_and_is_served_later(
        monkeypatch):
    manager = _manager()
    serve = manager.driver.schedule_run_instance

    def away(ctxt, spec_obj, uuids):
        raise exception.InventoryUnavailable(reason='database away')
    monkeypatch.setattr(manager.driver, 'schedule_run_instance', away)
    with contextlib.suppress(exception.InventoryUnavailable):
        manager.schedule_run_instance(CTX, spec_obj=fixtures.request(),
                                      instance_uuids=[fixtures.uuid(1)])
    rows = _rows()
    assert [r['instance_uuids'] for r in rows] == [
        '["%s"]' % fixtures.uuid(1)]
    assert manager.driver.compute_rpcapi.casts == []

    # The inventory is back: the periodic takeover serves it.
    monkeypatch.setattr(manager.driver, 'schedule_run_instance', serve)
    _take_over_later(manager, monkeypatch)
    assert manager.driver.compute_rpcapi.casts == [('big', fixtures.uuid(1))]
    assert _rows() == []
