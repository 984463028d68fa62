"""api_keys.id_in_key: generated keys carry their id, so only that row is checked for them

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A plain ADD COLUMN (no table rebuild), which keeps SQLite's AUTOINCREMENT on the table.
    op.add_column("api_keys", sa.Column("id_in_key", sa.Boolean(), nullable=False, server_default=sa.false()))


def downgrade() -> None:
    with op.batch_alter_table("api_keys", table_kwargs={"sqlite_autoincrement": True}) as batch:
        batch.drop_column("id_in_key")
