"""upsert: rows replace the target's rows of the same key, new keys are inserted; with
`deletes`, the target rows whose key a full snapshot lacks are deleted or marked deleted."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from hakiri.spec.modes.base import LoadStrategy, ModeFinding, Written, register_mode

if TYPE_CHECKING:
    from hakiri.spec.modes.base import LoadSpec, ModeWriter

# The options of a mode that finds deleted keys in a full snapshot (upsert, scd2).
DELETE_OPTIONS = ("deletes", "delete_scope", "max_delete_fraction")


class Upsert(LoadStrategy):
    name = "upsert"
    summary = "rows replace the target's rows of the same key; new keys are inserted"
    needs = ("merge",)
    required = ("upsert_key", "upsert needs the key columns to match rows on")
    options = ("upsert_key", *DELETE_OPTIONS, "deleted_at_column")
    deletes_choices = ("hard", "soft")
    rewindable = True
    destructive = True

    def merge_key(self, load: LoadSpec) -> list[str] | None:
        return list(load.upsert_key) if load.upsert_key else None

    def detects_deletes(self, load: LoadSpec) -> bool:
        return load.deletes is not None

    def changes_key(self, load: LoadSpec) -> list[str] | None:
        return self.merge_key(load)

    def delete_verb(self, load: LoadSpec) -> str:
        return "delete" if load.deletes == "hard" else "mark deleted"

    def added_columns(self, load: LoadSpec) -> list[tuple[str, str]]:
        # deleted_at is staged NULL, so a key that returns is undeleted by the upsert itself.
        if load.deletes == "soft":
            return [(load.deleted_at_column, "timestamp")]
        return []

    def column_findings(self, load: LoadSpec, columns: Sequence[str]) -> list[ModeFinding]:
        if not load.upsert_key:
            return []
        present = set(columns)
        missing = [k for k in load.upsert_key if k not in present]
        if missing:
            return [
                ModeFinding(
                    ("load", "upsert_key"),
                    f"upsert key column(s) {', '.join(missing)} not in the target",
                    f"target columns: {', '.join(columns)}",
                )
            ]
        if present and present <= set(load.upsert_key):
            return [
                ModeFinding(
                    ("load", "upsert_key"),
                    "upsert key covers every target column, so there is nothing to update",
                    "use append (or add non-key columns)",
                )
            ]
        return []

    def write(self, load: LoadSpec, writer: ModeWriter) -> Written:
        return writer.merge(self.merge_key(load) or [], update=True)


register_mode(Upsert())
