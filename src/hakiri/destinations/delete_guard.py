"""The delete guard: a snapshot may delete (or close) only so much of its target.

Shared by both destinations. A full snapshot that lost most of its rows (a partial
extract, a failed query that returned early) looks exactly like a mass delete; the
guard tells them apart by size only, before anything is written: a load whose deletes
exceed `max_delete_fraction` of the target rows in scope is refused whole.
"""

from __future__ import annotations

from hakiri.errors import DeletesRefused
from hakiri.spec.load import LoadSpec

__all__ = ["check_deletes"]


def check_deletes(
    load: LoadSpec, *, staged: int, doomed: int, scoped: int, qualified: str, verb: str
) -> None:
    """Refuse (nothing written) an empty snapshot, or one that would `verb` (delete, close,
    mark deleted) more than `max_delete_fraction` of the `scoped` live target rows."""
    scope = f" where {load.delete_scope}" if load.delete_scope else ""
    if staged == 0 and scoped and load.fail_on_empty_source:
        raise DeletesRefused(
            f"the snapshot has 0 rows; refusing to {verb} the {scoped:,} rows of "
            f"{qualified}{scope} (load mode {load.mode.value})",
            "if the source really is empty now, set `fail_on_empty_source = false` and "
            "`max_delete_fraction = 1.0` in [pipeline.load] for this load",
        )
    limit = load.max_delete_fraction
    if scoped and doomed > limit * scoped:
        raise DeletesRefused(
            f"the snapshot would {verb} {doomed:,} of the {scoped:,} rows of {qualified}{scope} "
            f"({doomed / scoped:.0%}), over max_delete_fraction = {limit:g}; nothing was "
            "written",
            "check that the extract is complete; if those rows really are gone, raise "
            "`max_delete_fraction` in [pipeline.load] (1.0 turns the guard off) and apply again",
        )
