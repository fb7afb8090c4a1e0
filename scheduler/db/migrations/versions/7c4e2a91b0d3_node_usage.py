"""Claims in the database: node_usage, pending claims, the usage sequence.

Revision ID: 7c4e2a91b0d3
Revises: 615e5e7d8de1
Create Date: 2026-11-24

Written by hand and frozen, like the initial revision.  Placements
saved before this revision were claims held in one worker's memory:
those still ``claimed`` become pending claims counted in their node's
row, so an upgraded service keeps scheduling around them.
"""

from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import mysql

revision = '7c4e2a91b0d3'
down_revision = '615e5e7d8de1'
branch_labels = None
depends_on = None

_TABLE_ARGS = {
    'mysql_engine': 'InnoDB',
    'mysql_charset': 'utf8mb4',
    'mysql_collate': 'utf8mb4_bin',
}
_DATETIME = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mysql',
                                       'mariadb')


def _counter(name: str) -> sa.Column:
    return sa.Column(name, sa.Integer, nullable=False, server_default='0')


def upgrade() -> None:
    bind = op.get_bind()
    op.create_table(
        'node_usage',
        sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
        sa.Column('host', sa.String(255), nullable=False),
        sa.Column('nodename', sa.String(255), nullable=False),
        _counter('reported_memory_mb'),
        _counter('reported_vcpus'),
        _counter('reported_disk_gb'),
        _counter('reported_instances'),
        sa.Column('reported_at', _DATETIME),
        _counter('claimed_memory_mb'),
        _counter('claimed_vcpus'),
        _counter('claimed_disk_gb'),
        _counter('claimed_instances'),
        sa.Column('generation', sa.BigInteger, nullable=False,
                  server_default='0'),
        sa.Column('seq', sa.BigInteger, nullable=False, server_default='0'),
        sa.UniqueConstraint('host', 'nodename',
                            name='uniq_node_usage0host0nodename'),
        **_TABLE_ARGS)
    op.create_index('node_usage_seq_idx', 'node_usage', ['seq'])
    if bind.dialect.supports_sequences:
        op.execute(sa.schema.CreateSequence(sa.Sequence('usage_seq',
                                                        start=1)))
    op.create_table(
        'usage_counter',
        sa.Column('id', sa.Integer, primary_key=True, autoincrement=False),
        sa.Column('value', sa.BigInteger, nullable=False,
                  server_default='0'),
        **_TABLE_ARGS)
    op.execute("INSERT INTO usage_counter (id, value) VALUES (1, 0)")
    with op.batch_alter_table('instances') as batch:
        batch.add_column(sa.Column('pending', sa.Boolean, nullable=False,
                                   server_default=sa.false()))
        batch.add_column(sa.Column('numa', sa.Text))
        batch.add_column(sa.Column('pci', sa.Text))
        batch.create_index('instances_node_pending_idx',
                           ['host', 'nodename', 'pending'])
    op.execute("UPDATE instances SET pending = %s WHERE status = 'claimed'"
               % ('TRUE' if bind.dialect.name != 'sqlite' else '1'))
    op.execute(
        "INSERT INTO node_usage (host, nodename, claimed_memory_mb, "
        "claimed_vcpus, claimed_disk_gb, claimed_instances, generation, "
        "seq) SELECT host, nodename, SUM(memory_mb), SUM(vcpus), "
        "SUM(disk_gb), COUNT(*), 1, 0 FROM instances WHERE status = "
        "'claimed' GROUP BY host, nodename")
