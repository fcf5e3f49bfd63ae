"""Views: every definition apply recorded, versioned per name, so any reader can resolve them.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "views",
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("sql", sa.Text(), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("sql_hash", sa.String(), nullable=False),
        sa.Column("reads", sa.Text(), nullable=False),
        sa.Column("applied_at", sa.DateTime(), nullable=False),
        sa.Column("dropped_at", sa.DateTime(), nullable=True),
        sa.PrimaryKeyConstraint("name", "version", name=op.f("pk_views")),
    )


def downgrade() -> None:
    op.drop_table("views")
