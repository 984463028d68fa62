"""initial schema: api keys, inventory and hv endpoints

Revision ID: 0001
Revises: 
Create Date: 2026-11-22
"""

from alembic import op
import sqlalchemy as sa


revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('api_keys',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('label', sa.String(length=200), nullable=False),
    sa.Column('key_hash', sa.LargeBinary(length=80), nullable=False),
    sa.Column('is_active', sa.Boolean(), nullable=False),
    sa.Column('created_at', sa.Float(), nullable=False),
    sa.Column('bootstrap_slot', sa.Integer(), nullable=True),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('bootstrap_slot'),
    sqlite_autoincrement=True,
    )
    op.create_table('hv_endpoints',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('name', sa.String(length=255), nullable=False),
    sa.Column('ip_address', sa.String(length=64), nullable=False),
    sa.Column('domain', sa.String(length=255), nullable=False),
    sa.Column('port', sa.Integer(), nullable=False),
    sa.Column('scheme', sa.String(length=5), nullable=False),
    sa.Column('username', sa.String(length=255), nullable=False),
    sa.Column('token_name', sa.String(length=255), nullable=False),
    sa.Column('access_methods', sa.JSON(), nullable=False),
    sa.Column('verify_ssl', sa.Boolean(), nullable=False),
    sa.Column('enabled', sa.Boolean(), nullable=False),
    sa.Column('allow_template_builds', sa.Boolean(), nullable=False),
    sa.Column('timeout', sa.Integer(), nullable=False),
    sa.Column('max_retries', sa.Integer(), nullable=False),
    sa.Column('retry_backoff', sa.Float(), nullable=False),
    sa.Column('site_slug', sa.String(length=100), nullable=False),
    sa.Column('tenant_slug', sa.String(length=100), nullable=False),
    sa.Column('password_enc', sa.Text(), nullable=True),
    sa.Column('token_value_enc', sa.Text(), nullable=True),
    sa.Column('updated_at', sa.Float(), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_table('inventory_endpoints',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('singleton', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=255), nullable=False),
    sa.Column('ip_address', sa.String(length=64), nullable=False),
    sa.Column('domain', sa.String(length=255), nullable=False),
    sa.Column('port', sa.Integer(), nullable=False),
    sa.Column('scheme', sa.String(length=5), nullable=True),
    sa.Column('token_version', sa.Integer(), nullable=False),
    sa.Column('verify_ssl', sa.Boolean(), nullable=False),
    sa.Column('enabled', sa.Boolean(), nullable=False),
    sa.Column('token_enc', sa.Text(), nullable=True),
    sa.Column('token_key_enc', sa.Text(), nullable=True),
    sa.Column('updated_at', sa.Float(), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('singleton', name='uq_inventory_endpoints_singleton')
    )


def downgrade() -> None:
    op.drop_table('inventory_endpoints')
    op.drop_table('hv_endpoints')
    op.drop_table('api_keys')
