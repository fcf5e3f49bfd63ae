"""The load modes' write primitives (`spec.modes.ModeWriter`) in PostgreSQL: SQL from the
staging table into the target, inside the batch's one transaction (`client.py` holds it)."""

from __future__ import annotations

from collections.abc import Sequence

from hakiri.destinations.postgres.history import detect_deletes, load_replace_window, load_scd2
from hakiri.destinations.postgres.load_modes import (
    LoadContext,
    insert_from_staging,
    load_incremental_watermark,
    load_truncate,
    load_upsert,
    refuse_repeated_keys,
)
from hakiri.destinations.postgres.mirror import load_mirror
from hakiri.destinations.postgres.replace import load_replace
from hakiri.destinations.postgres.swap import load_blue_green
from hakiri.spec.modes import Written

__all__ = ["PostgresWriter"]


class PostgresWriter:
    def __init__(
        self,
        ctx: LoadContext,
        *,
        created: bool,
        lock_timeout: str,
        staged_like_target: int | None,
    ) -> None:
        self.ctx = ctx
        self.created = created  # the target was created in this transaction
        self.lock_timeout = lock_timeout
        self.staged_like_target = staged_like_target  # rows of a staging table made like the target

    def insert(self) -> Written:
        return Written(insert_from_staging(self.ctx))

    def replace(self) -> Written:
        # In the commit transaction: a failed insert rolls the TRUNCATE (or the swap) back.
        if self.created:
            return Written(load_truncate(self.ctx))
        return Written(load_replace(self.ctx, self.staged_like_target))

    def swap(self) -> Written:
        request = self.ctx.request
        if self.created:  # nothing to swap with: load the new table directly
            rows = insert_from_staging(self.ctx)
            if request.post_hook is not None:
                request.post_hook(self.ctx.conn)
            return Written(rows)
        return Written(
            load_blue_green(
                self.ctx,
                request.post_hook,
                self.lock_timeout,
                staged_like_target=self.staged_like_target,
            )
        )

    def merge(self, key: Sequence[str], *, update: bool) -> Written:
        deleted = 0
        checked = self.ctx.request.load.deletes is not None
        if checked:  # the repeated keys are refused before the delete guard judges
            refuse_repeated_keys(self.ctx)
            deleted = detect_deletes(self.ctx)
        return Written(load_upsert(self.ctx, keys_checked=checked, update=update), deleted)

    def history(self) -> Written:
        rows, closed = load_scd2(self.ctx)
        return Written(rows, closed)

    def replace_window(self) -> Written:
        rows, deleted = load_replace_window(self.ctx)
        return Written(rows, deleted)

    def insert_past_watermark(self) -> Written:
        rows, mark = load_incremental_watermark(self.ctx)
        return Written(rows, watermark=mark)

    def mirror(self, key: Sequence[str]) -> Written:
        rows, deleted = load_mirror(self.ctx, key)
        return Written(rows, deleted)
