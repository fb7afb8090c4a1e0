"""The claim protocol's invariant, on SQLite, under every interleaving
hypothesis finds (``usage_machine``)."""

from hypothesis import settings

from tests.unit.db import usage_machine
from tests.unit import fixtures


class SqliteMachine(usage_machine.UsageMachine):
    @staticmethod
    def reset():
        fixtures.memory_inventory()


SqliteMachine.TestCase.settings = settings(
    max_examples=150, stateful_step_count=40, deadline=None)
TestUsageInvariantOnSqlite = SqliteMachine.TestCase
