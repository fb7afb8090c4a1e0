"""Initial schema: hosts, aggregates and their hosts and metadata, instances.

Revision ID: 615e5e7d8de1
Revises:
Create Date: 2025-11-22

Written by hand and frozen: it must not import ``scheduler.db.models``,
which will change with later revisions.  Migrations only go forward:
restore a backup to go back.
"""

from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import mysql

revision = '615e5e7d8de1'
down_revision = None
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


def _timestamps() -> list[sa.Column]:
    return [
        sa.Column('created_at', _DATETIME, nullable=True),
        sa.Column('updated_at', _DATETIME, nullable=True),
    ]


def upgrade() -> None:
    op.create_table(
        'hosts',
        sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
        sa.Column('host', sa.String(255), nullable=False),
        sa.Column('nodename', sa.String(255), nullable=False),
        sa.Column('uuid', sa.String(36), nullable=True),
        sa.Column('report', _LONG_TEXT, nullable=False),
        sa.Column('disabled', sa.Boolean, nullable=False),
        *_timestamps(),
        sa.UniqueConstraint('host', 'nodename',
                            name='uniq_hosts0host0nodename'),
        **_TABLE_ARGS,
    )
    op.create_table(
        'aggregates',
        sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
        sa.Column('uuid', sa.String(36), nullable=False),
        sa.Column('name', sa.String(255), nullable=False),
        *_timestamps(),
        sa.UniqueConstraint('uuid', name='uniq_aggregates0uuid'),
        sa.UniqueConstraint('name', name='uniq_aggregates0name'),
        **_TABLE_ARGS,
    )
    op.create_table(
        'aggregate_hosts',
        sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
        sa.Column('aggregate_id', sa.Integer,
                  sa.ForeignKey('aggregates.id', ondelete='CASCADE',
                                name='aggregate_hosts_aggregate_id_fkey'),
                  nullable=False),
        sa.Column('host', sa.String(255), nullable=False),
        sa.UniqueConstraint('aggregate_id', 'host',
                            name='uniq_aggregate_hosts0aggregate_id0host'),
        **_TABLE_ARGS,
    )
    op.create_table(
        'aggregate_metadata',
        sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
        sa.Column('aggregate_id', sa.Integer,
                  sa.ForeignKey('aggregates.id', ondelete='CASCADE',
                                name='aggregate_metadata_aggregate_id_fkey'),
                  nullable=False),
        sa.Column('key', sa.String(255), nullable=False),
        sa.Column('value', sa.String(255), nullable=False),
        sa.UniqueConstraint('aggregate_id', 'key',
                            name='uniq_aggregate_metadata0aggregate_id0key'),
        **_TABLE_ARGS,
    )
    op.create_table(
        'instances',
        sa.Column('instance_uuid', sa.String(36), primary_key=True),
        sa.Column('host', sa.String(255), nullable=False),
        sa.Column('nodename', sa.String(255), nullable=False),
        sa.Column('project_id', sa.String(255), nullable=True),
        sa.Column('user_id', sa.String(255), nullable=True),
        sa.Column('memory_mb', sa.Integer, nullable=False),
        sa.Column('vcpus', sa.Integer, nullable=False),
        sa.Column('disk_gb', sa.Integer, nullable=False),
        sa.Column('status', sa.String(16), nullable=False),
        *_timestamps(),
        **_TABLE_ARGS,
    )
    op.create_index('instances_host_idx', 'instances', ['host'])
