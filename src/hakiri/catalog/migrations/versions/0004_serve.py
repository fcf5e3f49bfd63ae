"""`hakiri serve`: the last schedule slot fired per pipeline, and what triggered each run.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-26
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "schedule_fires",
        sa.Column("pipeline_id", sa.String(), nullable=False),
        sa.Column("slot", sa.DateTime(), nullable=False),
        sa.Column("fired_at", sa.DateTime(), nullable=False),
        sa.Column("holder", sa.String(), nullable=False),
        sa.PrimaryKeyConstraint("pipeline_id", name=op.f("pk_schedule_fires")),
    )
    with op.batch_alter_table("pipeline_run") as batch:
        batch.add_column(sa.Column("trigger", sa.String(), nullable=True))
        batch.add_column(sa.Column("trigger_reason", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("pipeline_run") as batch:
        batch.drop_column("trigger_reason")
        batch.drop_column("trigger")
    op.drop_table("schedule_fires")
