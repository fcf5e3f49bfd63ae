"""The checks of the commit protocol both destinations make, in one place.

Each runs inside a destination's commit, before the load mode writes anything: the
upsert key against the staged and target columns, the dataset validators' `abort`,
a load mode no destination knows, and whether staged rule violations are committed
to a quarantine table with the rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from hakiri.destinations.base import LoadRequest, QuarantineTable, StagedBatch
from hakiri.errors import LoadError, ValidationFailed
from hakiri.spec.load import LoadSpec

if TYPE_CHECKING:
    from hakiri.quality.verdicts import ProbeResult

__all__ = [
    "DUPLICATE_EXAMPLES",
    "check_upsert_key",
    "check_validators",
    "duplicate_keys_error",
    "quarantine_of",
]

DUPLICATE_EXAMPLES = 3  # repeated key values quoted in the refusal


def check_upsert_key(
    load: LoadSpec,
    staged: Sequence[str],
    target: Sequence[str] | None,
    where: str,
    *,
    key_only: bool = False,
) -> tuple[str, ...]:
    """The upsert key, when it is set, in the target (if there is one) and among the staged
    columns, and not every column of the table (there would be nothing to update), unless
    `key_only`: a write that also deletes by key (cdc_mirror) mirrors a table of key columns
    only, as PostgreSQL's does.

    A batch of key columns only is fine when the target has more columns (the source
    stopped sending them): new keys are inserted with NULL there, matched rows stay."""
    key = tuple(load.strategy.merge_key(load) or ())
    if not key:
        raise LoadError(
            f"load mode upsert into {where} needs `upsert_key`",
            'set `upsert_key = ["id"]` (the columns that identify a row) in [pipeline.load]',
        )
    for column in key:
        if target is not None and column not in target:
            raise LoadError(
                f"upsert_key column {column!r} does not exist in the target {where}",
                f"fix `upsert_key` (the target has: {', '.join(target)}), or add the column",
            )
        if column not in staged:
            raise LoadError(
                f"upsert_key column {column!r} is not among the staged columns for {where}",
                f"fix `upsert_key` (the rows have: {', '.join(staged)}), or select that "
                "column in the pipeline's transforms",
            )
    columns = staged if target is None else target
    if not key_only and all(name in key for name in columns):
        raise LoadError(
            f"upsert_key {list(key)} covers every loaded column of {where}: nothing to update",
            "use load mode 'append', or load more columns",
        )
    return key


def duplicate_keys_error(
    key: Sequence[str],
    examples: Sequence[tuple[Sequence[object], int]],
    repeated: int,
    source: str,
) -> LoadError:
    """The refusal of a batch whose upsert key repeats: `upsert_key (id) = 4 appears 2 times
    in data/b.csv`. `examples` are (key values, rows) of the first repeated keys in key
    order, `repeated` how many key values repeat. Two rows of one key in one batch have no
    order to say which one wins, so neither destination loads the batch."""

    def shown(values: Sequence[object]) -> str:
        texts = ["NULL" if v is None else str(v) for v in values]
        return texts[0] if len(texts) == 1 else f"({', '.join(texts)})"

    parts = [f"= {shown(values)} appears {rows:,} times" for values, rows in examples]
    more = repeated - len(examples)
    tail = f" (and {more:,} more repeated key value{'s' if more > 1 else ''})" if more > 0 else ""
    return LoadError(
        f"upsert_key ({', '.join(key)}) {', '.join(parts)} in {source}{tail}; nothing was loaded",
        "make the key unique in the source, or keep one row per key with a `dedupe` transform",
    )


def check_validators(results: Sequence[ProbeResult], where: str) -> list[ProbeResult]:
    """The validators' results, unless one with on_fail = "abort" failed: then the load stops
    before anything is committed."""
    failed = [r for r in results if not r.ok and r.on_fail == "abort"]
    if failed:
        more = f" (and {len(failed) - 1} more failing validators)" if len(failed) > 1 else ""
        raise ValidationFailed(
            f"validator {failed[0].message}{more}; nothing was loaded into {where}",
            'fix the source data, or set on_fail = "warn" on that validator to load anyway',
        )
    return list(results)


def quarantine_of(staged: StagedBatch, request: LoadRequest) -> QuarantineTable | None:
    """Where the staged rule violations are committed, with the rows; None when there are none
    to commit (no quarantine asked for, or nothing broke a warn/skip rule)."""
    if request.quarantine is None or staged.quarantine_table is None or not staged.quarantined:
        return None
    return request.quarantine
