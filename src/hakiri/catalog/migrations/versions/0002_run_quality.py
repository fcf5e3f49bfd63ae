"""Runs carry their data-quality summary: rule counts, rows quarantined, validator results.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-26
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("pipeline_run") as batch:
        batch.add_column(sa.Column("quality", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("pipeline_run") as batch:
        batch.drop_column("quality")
