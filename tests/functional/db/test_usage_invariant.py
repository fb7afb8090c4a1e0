"""The claim protocol's invariant on PostgreSQL (``usage_machine``):
row locks, READ COMMITTED and native sequences, which SQLite has not."""

from hypothesis import settings

from tests.unit.db import usage_machine


class PostgresqlMachine(usage_machine.UsageMachine):
    reset = staticmethod(usage_machine.reset_tables)


PostgresqlMachine.TestCase.settings = settings(
    max_examples=40, stateful_step_count=30, deadline=None)


def test_usage_invariant_on_postgresql(postgresql):
    PostgresqlMachine.TestCase('runTest').runTest()
