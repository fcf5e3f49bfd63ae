"""Targets have an identity: the table a mark (and the batches loaded before it) belongs to.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-28
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("target_marks") as batch:
        batch.add_column(sa.Column("identity", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("target_marks") as batch:
        batch.drop_column("identity")
