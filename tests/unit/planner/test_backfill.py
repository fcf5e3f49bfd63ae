"""Backfill facts for plan and status: live batches, progress, and parallelism warnings."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from hakiri.catalog.records import Batch, BatchStatus, Phase, PipelineState
from hakiri.planner.backfill import (
    backfill_progress,
    current_plan,
    live_batches,
    parallelism_warnings,
)
from hakiri.planner.builder import plan_pipeline
from hakiri.planner.model import Action
from hakiri.planner.observations import PipelineObservation, TableObservation
from hakiri.sources.base import SourceColumn, SourceObservation
from hakiri.spec.connections import Target
from hakiri.spec.fingerprint import normalized_spec, spec_hash
from hakiri.spec.pipeline import CursorKind, PipelineSpec

T0 = datetime(2026, 1, 1, tzinfo=UTC)
POSTGRES = {"connector": "postgres", "config": {"connection": "wh", "schema": "public"}}


def _spec(mode: str = "upsert", parallelism: int | None = 4, **overrides: Any) -> PipelineSpec:
    load: dict[str, Any] = {"mode": mode}
    if mode == "upsert":
        load["upsert_key"] = ["id"]
    if mode == "incremental_watermark":
        load["watermark_column"] = "updated_at"
    document: dict[str, Any] = {
        "id": "p",
        "source": POSTGRES,
        "tables": [{"name": "src", "incremental": "updated_at"}],
        "destination": {"connector": "postgres", "config": {"connection": "wh"}},
        "load": load,
    }
    if parallelism is not None:
        document["backfill"] = {"parallelism": parallelism, "window": "1d"}
    document.update(overrides)
    return PipelineSpec.model_validate(document)


def _warnings(spec: PipelineSpec, kind: CursorKind | None) -> list[str]:
    return parallelism_warnings(
        spec, spec.table_specs()[0], kind, spec.source.connector == "postgres"
    )


def _chunk(
    n: int,
    status: BatchStatus,
    *,
    generation: int = 0,
    created: datetime = T0,
    table: str = "src",
    predicate: str | None = None,
) -> Batch:
    return Batch(
        batch_id=f"chunk:{table}:g{generation}:{n}",
        pipeline_id="p",
        table_name=table,
        kind="chunk",
        status=status,
        attempt=0,
        seq=n,
        predicate=predicate or f'{{"lo": {n * 10}, "hi": {n * 10 + 10}}}',
        generation=generation,
        created_at=created,
    )


DONE, PENDING = BatchStatus.COMMITTED, BatchStatus.PENDING


# -- parallelism warnings ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "kind"),
    [
        (_spec("upsert"), CursorKind.TIMESTAMP),
        (_spec("upsert"), CursorKind.NUMERIC),
        (_spec("append"), CursorKind.NUMERIC),
        (_spec("append", parallelism=1), CursorKind.TIMESTAMP),
        (_spec("append", parallelism=None), CursorKind.TIMESTAMP),
        (_spec("truncate", parallelism=1), None),
        (_spec("append"), None),  # the cursor's kind could not be told: no guess
    ],
)
def test_no_warning_when_parallel_chunks_are_safe_or_not_asked_for(
    spec: PipelineSpec, kind: CursorKind | None
) -> None:
    assert _warnings(spec, kind) == []


def test_a_timestamp_cursor_with_append_loads_updated_rows_twice() -> None:
    [warning] = _warnings(_spec("append"), CursorKind.TIMESTAMP)
    assert "backfill.parallelism = 4" in warning
    assert "updated during the backfill moves to a later chunk and is loaded twice" in warning
    assert "use mode = 'upsert'" in warning


def test_incremental_watermark_runs_one_chunk_at_a_time() -> None:
    [warning] = _warnings(_spec("incremental_watermark"), CursorKind.TIMESTAMP)
    assert "is ignored with mode 'incremental_watermark'" in warning
    assert "watermark past rows not loaded yet" in warning and "one chunk at a time" in warning


@pytest.mark.parametrize("mode", ["truncate", "blue_green"])
def test_full_refresh_modes_have_one_batch(mode: str) -> None:
    [warning] = _warnings(_spec(mode), CursorKind.NUMERIC)
    assert f"has no effect with mode '{mode}'" in warning and "one batch" in warning


def test_a_table_without_a_cursor_has_nothing_to_split() -> None:
    spec = _spec("upsert", tables=["src"])
    [warning] = _warnings(spec, None)
    assert "has no effect on src: without an incremental cursor" in warning


def test_a_files_source_has_nothing_to_split() -> None:
    spec = _spec(
        "append", source={"connector": "files", "config": {"path": "d/*.csv"}}, tables=["t"]
    )
    [warning] = _warnings(spec, None)
    assert "has no effect on a files source" in warning


# -- live batches and progress -----------------------------------------------------------


def test_a_rewound_chunk_supersedes_its_older_generation() -> None:
    old = [_chunk(n, DONE) for n in range(3)]
    rewound = _chunk(1, PENDING, generation=1, created=T0 + timedelta(hours=1))
    live = live_batches([*old, rewound])
    assert [(b.seq, b.generation) for b in live] == [(0, 0), (2, 0), (1, 1)]
    # the same predicate in another table is another chunk
    other = _chunk(1, DONE, table="other")
    assert other in live_batches([*old, rewound, other])


def test_progress_counts_the_plan_being_worked_on() -> None:
    first = [_chunk(n, DONE if n < 3 else PENDING) for n in range(10)]
    progress = backfill_progress("src", first)
    assert progress is not None
    assert (progress.done, progress.left, progress.total, progress.started_at) == (3, 7, 10, T0)
    assert progress.describe().startswith("backfilling src: 7 of 10 chunk(s) left")
    assert backfill_progress("other", first) is None


def test_progress_of_a_rewind_counts_only_the_rewound_chunks() -> None:
    later = T0 + timedelta(days=3)
    done = [_chunk(n, DONE) for n in range(10)]
    rewound = [_chunk(n, PENDING, generation=1, created=later) for n in (4, 5)]
    progress = backfill_progress("src", [*done, *rewound])
    assert progress is not None
    assert (progress.left, progress.total, progress.started_at) == (2, 2, later)
    assert current_plan(done) == done  # all committed: the last plan
    assert backfill_progress("src", done) is None


# -- the plan of a table source --------------------------------------------------------


def _table_obs(spec: PipelineSpec, batches: tuple[Batch, ...]) -> PipelineObservation:
    state = PipelineState(spec.id, spec_hash(spec), normalized_spec(spec), Phase.BACKFILLING, T0)
    source = SourceObservation(
        "src",
        (SourceColumn("id", "bigint"), SourceColumn("updated_at", "timestamp with time zone")),
        estimated_rows=0,
    )
    table = TableObservation(
        spec.table_specs()[0], Target("postgres", "src", "public", "wh"), source, batches=batches
    )
    return PipelineObservation(spec.id, spec, state, (table,), has_cursors=True)


def test_a_backfill_in_progress_is_a_change_until_every_chunk_is_committed() -> None:
    spec = _spec("append")
    chunks = tuple(_chunk(n, DONE if n < 1 else PENDING) for n in range(3))
    plan = plan_pipeline(_table_obs(spec, chunks))
    assert plan.action is Action.CHANGE and not plan.diff
    assert any(w.startswith("backfilling src: 2 of 3 chunk(s) left") for w in plan.warnings)
    # the cursor kind comes from the observed column type: timestamp with append
    assert any("loaded twice" in w for w in plan.warnings)

    finished = tuple(_chunk(n, DONE) for n in range(3))
    plan = plan_pipeline(_table_obs(spec, finished))
    assert plan.action is Action.NO_OP
    assert not any(w.startswith("backfilling") for w in plan.warnings)
