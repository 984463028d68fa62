"""inventory_endpoints.scheme: explicit, never null (https by default)

Rows stored before this revision had no scheme and were dialled over https only on ports 443 and 8443,
plain http otherwise; they keep exactly that (written out), so nothing changes for them until the
plugin pushes its own scheme. New rows default to https.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "UPDATE inventory_endpoints SET scheme = CASE WHEN port IN (443, 8443) THEN 'https' ELSE 'http' END "
        "WHERE scheme IS NULL"
    )
    with op.batch_alter_table("inventory_endpoints") as batch:
        batch.alter_column(
            "scheme", existing_type=sa.String(length=5), nullable=False, server_default="https"
        )


def downgrade() -> None:
    with op.batch_alter_table("inventory_endpoints") as batch:
        batch.alter_column("scheme", existing_type=sa.String(length=5), nullable=True, server_default=None)
