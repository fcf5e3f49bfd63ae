"""A schedule slot's run start: a slot whose replica died before starting it is taken over.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-26
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("schedule_fires") as batch:
        batch.add_column(sa.Column("started_at", sa.DateTime(), nullable=True))
    # Slots fired before this version ran (nothing then recorded that they did not).
    op.execute("UPDATE schedule_fires SET started_at = fired_at")


def downgrade() -> None:
    with op.batch_alter_table("schedule_fires") as batch:
        batch.drop_column("started_at")
