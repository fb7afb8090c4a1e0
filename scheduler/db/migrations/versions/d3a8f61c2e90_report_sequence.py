"""Host reports carry a sequence number, for workers that did not take them.

Revision ID: d3a8f61c2e90
Revises: b51d0e7a93c4
Create Date: 2026-11-27

A compute's report is taken by one worker of the deployment, which
writes it to ``hosts``; the others read the rows written since the
highest ``seq`` they saw.  ``changed_seq`` tells a new report from a
new time.  The report sequence is row 2 of ``usage_counter`` on every
backend.  Rows saved before this revision have 0 in both.
"""

from alembic import op
import sqlalchemy as sa

revision = 'd3a8f61c2e90'
down_revision = 'b51d0e7a93c4'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('hosts') as batch:
        batch.add_column(sa.Column('seq', sa.BigInteger, nullable=False,
                                   server_default='0'))
        batch.add_column(sa.Column('changed_seq', sa.BigInteger,
                                   nullable=False, server_default='0'))
        batch.create_index('hosts_seq_idx', ['seq'])
    op.execute("INSERT INTO usage_counter (id, value) VALUES (2, 0)")
