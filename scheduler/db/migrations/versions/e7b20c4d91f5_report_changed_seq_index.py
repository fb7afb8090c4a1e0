"""Host reports are found by the sequence number of their last change.

Revision ID: e7b20c4d91f5
Revises: d3a8f61c2e90
Create Date: 2026-11-28

Every worker asks, before every request, for the reports that changed
since the highest ``changed_seq`` it saw (a new host, a new capacity):
with an index that is one probe which finds nothing when nothing
changed, however many hosts only sent a new time.
"""

from alembic import op

revision = 'e7b20c4d91f5'
down_revision = 'd3a8f61c2e90'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('hosts') as batch:
        batch.create_index('hosts_changed_seq_idx', ['changed_seq'])
