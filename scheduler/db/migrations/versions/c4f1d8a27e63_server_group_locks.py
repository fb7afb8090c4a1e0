"""A lock row per server group, for its members' claims to take.

Revision ID: c4f1d8a27e63
Revises: a9c51e07f3d2
Create Date: 2026-11-29

Two workers claiming members of one affinity group on two hosts each
locked only their own node's usage row, so neither saw the other's
placement and the group was split.  The claims of a group's members
now take its row first (``scheduler.db.usage._hold_group``).
"""

from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import mysql

revision = 'c4f1d8a27e63'
down_revision = 'a9c51e07f3d2'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'server_group_locks',
        sa.Column('group_uuid', sa.String(36), primary_key=True),
        sa.Column('locked_at', sa.DateTime().with_variant(
            mysql.DATETIME(fsp=6), 'mysql', 'mariadb'), nullable=False),
        mysql_engine='InnoDB', mysql_charset='utf8mb4',
        mysql_collate='utf8mb4_bin')
