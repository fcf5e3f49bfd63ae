"""`hakiri backfill rewind` records why a window was loaded again.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-26
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "backfill_rewinds",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("pipeline_id", sa.String(), nullable=False),
        sa.Column("table_name", sa.String(), nullable=False),
        sa.Column("range_from", sa.Text(), nullable=False),
        sa.Column("range_to", sa.Text(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("chunks", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_backfill_rewinds")),
    )
    op.create_index(
        op.f("ix_backfill_rewinds_pipeline_id"), "backfill_rewinds", ["pipeline_id"], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_backfill_rewinds_pipeline_id"), table_name="backfill_rewinds")
    op.drop_table("backfill_rewinds")
