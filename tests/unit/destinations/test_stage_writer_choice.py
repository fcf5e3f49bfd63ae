"""`[pipeline.load] writer` picks how a PostgreSQL destination stages rows: COPY unless told jdbc."""

from __future__ import annotations

from pathlib import Path

import pytest

from hakiri.destinations.postgres.copy_writer import CopyStageWriter
from hakiri.destinations.postgres.staging import JdbcStageWriter
from hakiri.services.apply import destination_for
from hakiri.spec.connections import target_of
from hakiri.spec.loader import load_project


@pytest.mark.parametrize(("writer", "expected"), [("", CopyStageWriter), ("jdbc", JdbcStageWriter)])
def test_the_load_writer_key_picks_the_stage_writer(
    tmp_path: Path, writer: str, expected: type
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
    destination = destination_for(project, spec, target, {}, lambda: None)
    assert type(destination.stage_writer) is expected  # type: ignore[attr-defined]
    if expected is JdbcStageWriter:
        assert destination.stage_writer.batch_size == 500  # type: ignore[attr-defined]
