"""Field-level diff of two normalized pipeline specs."""

from __future__ import annotations

from typing import Any

from hakiri.planner.model import FieldChange


def _join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def spec_diff(before: Any, after: Any, path: str = "") -> list[FieldChange]:
    """Changes from `before` to `after`, descending into tables and lists of equal shape.

    Keys are visited in `after`'s order (the current manifest's), then keys only
    `before` has, so the diff reads like the spec whatever order storage kept.
    """
    if before == after:
        return []
    if isinstance(before, dict) and isinstance(after, dict):
        changes: list[FieldChange] = []
        for key in [*after, *(k for k in before if k not in after)]:
            sub = _join(path, key)
            if key not in after:
                changes.append(FieldChange(path=sub, kind="removed", before=before[key]))
            elif key not in before:
                changes.append(FieldChange(path=sub, kind="added", after=after[key]))
            else:
                changes.extend(spec_diff(before[key], after[key], sub))
        return changes
    if (
        isinstance(before, list)
        and isinstance(after, list)
        and all(isinstance(v, dict) for v in [*before, *after])
    ):
        changes = []
        for i in range(max(len(before), len(after))):
            sub = _join(path, i)
            if i >= len(after):
                changes.append(FieldChange(path=sub, kind="removed", before=before[i]))
            elif i >= len(before):
                changes.append(FieldChange(path=sub, kind="added", after=after[i]))
            else:
                changes.extend(spec_diff(before[i], after[i], sub))
        return changes
    return [FieldChange(path=path, kind="changed", before=before, after=after)]
