"""run_leases: at most one writing sync run per (Proxmox endpoint, stage), across backend processes

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-25
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "run_leases",
        sa.Column("endpoint_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("stage", sa.String(length=64), nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=False),
        sa.Column("job", sa.String(length=64), nullable=False),
        sa.Column("cancel_requested", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("endpoint_id", "stage"),
    )


def downgrade() -> None:
    op.drop_table("run_leases")
