"""Casts a worker took and has not finished with, for another to serve.

Revision ID: a9c51e07f3d2
Revises: e7b20c4d91f5
Create Date: 2026-11-27

oslo.messaging acknowledges a ``schedule_run_instance`` cast before a
worker serves it: a worker killed meanwhile lost it.  Each taken cast
is now a row until its instances are claimed or it is refused; rows
older than ``[scheduler] cast_takeover_time`` are served again by
another worker (``scheduler.db.taken_casts``).
"""

from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import mysql

revision = 'a9c51e07f3d2'
down_revision = 'e7b20c4d91f5'
branch_labels = None
depends_on = None

_TABLE_ARGS = {
    'mysql_engine': 'InnoDB',
    'mysql_charset': 'utf8mb4',
    'mysql_collate': 'utf8mb4_bin',
}
_DATETIME = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mysql',
                                       'mariadb')
_LONG_TEXT = sa.Text().with_variant(mysql.MEDIUMTEXT(), 'mysql', 'mariadb')


def upgrade() -> None:
    op.create_table(
        'taken_casts',
        sa.Column('id', sa.String(36), primary_key=True),
        sa.Column('token', sa.String(36), nullable=False),
        sa.Column('instance_uuids', _LONG_TEXT, nullable=False),
        sa.Column('message', _LONG_TEXT, nullable=False),
        sa.Column('taken_by', sa.String(255), nullable=False),
        sa.Column('taken_at', _DATETIME, nullable=False),
        **_TABLE_ARGS)
    op.create_index('taken_casts_taken_at_idx', 'taken_casts', ['taken_at'])
