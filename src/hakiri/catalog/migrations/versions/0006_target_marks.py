"""Drift: what each managed target looked like when hakiri last loaded it.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-28
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "target_marks",
        sa.Column("pipeline_id", sa.String(), nullable=False),
        sa.Column("table_name", sa.String(), nullable=False),
        sa.Column("target", sa.Text(), nullable=False),
        sa.Column("columns", sa.Text(), nullable=False),
        sa.Column("primary_key", sa.Text(), nullable=False),
        sa.Column("row_count", sa.BigInteger(), nullable=True),
        sa.Column("run_id", sa.String(), nullable=True),
        sa.Column("marked_at", sa.DateTime(), nullable=False),
        sa.Column("alerted", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("pipeline_id", "table_name", name=op.f("pk_target_marks")),
    )


def downgrade() -> None:
    op.drop_table("target_marks")
