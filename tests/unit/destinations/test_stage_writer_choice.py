"""How a PostgreSQL destination stages rows: `[pipeline.load] writer`, and what `auto` picks."""

from __future__ import annotations

from pathlib import Path

import pytest

from hakiri.destinations.base import LoadRequest
from hakiri.destinations.postgres.copy_writer import CopyStageWriter
from hakiri.destinations.postgres.staging import JdbcStageWriter
from hakiri.engine.run_context import RunContext
from hakiri.spec.connections import target_of
from hakiri.spec.loader import load_project


@pytest.mark.parametrize(
    ("writer", "run_bytes", "expected"),
    [
        ("", 10, JdbcStageWriter),  # auto: a small run starts no Python workers
        ("", 64 * 1024 * 1024, CopyStageWriter),
        ("", None, CopyStageWriter),  # a table source: size unknown
        ("copy", 10, CopyStageWriter),
        ("jdbc", 10**12, JdbcStageWriter),
    ],
)
def test_the_load_writer_key_picks_the_stage_writer(
    tmp_path: Path, writer: str, run_bytes: int | None, expected: type
) -> None:
    line = f', writer = "{writer}"' if writer else ""
    (tmp_path / "hakiri.toml").write_text(
        f"""
[project]
name = "w"

[[pipeline]]
id = "p"
source = {{ connector = "files", config = {{ path = "data/*.csv" }} }}
tables = ["t"]
destination = {{ connector = "postgres", config = {{ url = "postgresql://u:pw@db.example/x", batch_size = 500 }} }}
load = {{ mode = "append"{line} }}
"""
    )
    project = load_project(tmp_path, {})
    spec = project.pipelines["p"]
    target = target_of(project.settings, spec, spec.table_specs()[0])
    destination = RunContext.of(project, {}).destination_for(spec)(target)
    request = LoadRequest("w", "p", "run", "batch", "public", "t", spec.load, run_bytes=run_bytes)
    chosen = destination.writer_for(request)  # type: ignore[attr-defined]
    assert type(chosen) is expected
    if expected is JdbcStageWriter:
        assert chosen.batch_size == 500


def test_the_copy_threshold_is_tunable_and_checked(tmp_path: Path) -> None:
    from hakiri.destinations.postgres.client import copy_min_run_bytes
    from hakiri.errors import HakiriError

    assert copy_min_run_bytes({"HAKIRI_COPY_MIN_RUN_BYTES": "0"}) == 0
    assert copy_min_run_bytes({}) == 64 * 1024 * 1024
    with pytest.raises(HakiriError) as caught:
        copy_min_run_bytes({"HAKIRI_COPY_MIN_RUN_BYTES": "lots"})
    assert caught.value.reason == "HAKIRI_COPY_MIN_RUN_BYTES='lots' is not a number of bytes"
