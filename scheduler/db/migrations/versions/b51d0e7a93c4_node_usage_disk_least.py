"""node_usage remembers the compute's disk_available_least.

Revision ID: b51d0e7a93c4
Revises: 7c4e2a91b0d3
Create Date: 2026-11-27

A claim's conditional UPDATE must check the disk the node really has
free (``disk_available_least``, which can be far below its totals), so
the usage row keeps the value of the report behind ``reported_*``.
Rows saved before this revision have none (NULL: not checked) until
their node's next report is written.
"""

from alembic import op
import sqlalchemy as sa

revision = 'b51d0e7a93c4'
down_revision = '7c4e2a91b0d3'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('node_usage') as batch:
        batch.add_column(sa.Column('reported_disk_least', sa.Integer,
                                   nullable=True))
