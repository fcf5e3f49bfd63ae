"""A record's key must be among the staged columns (and the target's), and never NULL: the
checks scd2 and upsert's delete detection make before anything is written."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from sqlglot import exp

from hakiri.destinations.history.render import column, count_rows
from hakiri.errors import LoadError

__all__ = ["check_key_columns", "check_null_keys", "null_keys"]


def check_key_columns(
    key: Sequence[str],
    staged: Collection[str],
    target_columns: Collection[str] | None,
    target: str,
    what: str,
) -> None:
    """Every key column is staged and (when the target exists) in the target. `what` names
    the setting (key, upsert_key); `target` the target in messages."""
    for name in key:
        where = None
        if name not in staged:
            where = "staged rows"
        elif target_columns is not None and name not in target_columns:
            where = "target"
        if where is not None:
            raise LoadError(
                f"{what} column {name!r} is not in the {where} of {target}",
                "fix the key in [pipeline.load], or select that column in the transforms",
            )


def null_keys(key: Sequence[str], staged: exp.Table) -> exp.Select:
    """How many staged rows have a NULL in a key column."""
    return count_rows(staged, exp.or_(*(column(k, "t").is_(exp.null()) for k in key)))


def check_null_keys(key: Sequence[str], nulls: int, target: str, what: str) -> None:
    if nulls:
        raise LoadError(
            f"{what} {list(key)} is NULL in {nulls:,} staged rows for {target}",
            "filter those rows out or fill the key in a transform: a NULL key is no record",
        )
