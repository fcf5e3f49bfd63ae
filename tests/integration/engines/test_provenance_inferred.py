"""`provenance = true` over a snapshot of several Parquet or undeclared JSON Lines files gives
each row its own file's hash on every engine. Sail has no input_file_name(): there hakiri finds
the batch's one schema first (the Parquet footers merged; JSON Lines inferred from all the
files) and reads each file on its own with it. Run on both engines (HAKIRI_TEST_ENGINE=sail):
the same rows, columns and types on each is the comparison."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from tests.support.project import Project


def _project(root: Path, config: str) -> Project:
    project = Project(root, "", "")
    project.write(
        "hakiri.toml",
        f"""
        [project]
        name = "provenance"

        [[pipeline]]
        id = "p"
        source = {{ connector = "files", config = {{ {config}, provenance = true }} }}
        tables = ["t"]
        load = {{ mode = "truncate" }}
        """,
    )
    return project


def _digest(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def _loaded(project: Project) -> tuple[list[tuple[str, str]], list[tuple[Any, ...]]]:
    """The context table's (column, Arrow type) and its rows without the batch id, sorted."""
    table = DeltaTable(str(project.root / ".hakiri" / "context" / "t")).to_pyarrow_table()
    columns = [(f.name, str(f.type)) for f in table.schema]
    batches = set(table["_hakiri_batch_id"].to_pylist())
    assert len(batches) == 1 and next(iter(batches)).startswith("snapshot:t:")
    rows = sorted(
        tuple(v for k, v in row.items() if k != "_hakiri_batch_id") for row in table.to_pylist()
    )
    return columns, rows


@pytest.mark.parametrize("reload", [False, True])
def test_parquet_files_of_one_snapshot_each_name_their_rows_file(
    tmp_path: Path, spark, reload: bool
) -> None:
    project = _project(tmp_path, 'path = "data/*.parquet", format = "parquet"')
    (tmp_path / "data").mkdir()
    tables = {
        "a.parquet": pa.table({"id": [1, 2], "name": ["ada", "bob"]}),
        "b.parquet": pa.table({"id": [3], "name": ["cy"]}),
        # A column the others lack: the batch has it (Spark's mergeSchema), NULL elsewhere.
        "c.parquet": pa.table({"id": [4, 5], "name": ["di", None], "score": [1.5, 2.5]}),
    }
    for name, table in tables.items():
        pq.write_table(table, tmp_path / "data" / name)
    if reload:  # a second snapshot after a file changed: every row names its file again
        assert project.cli("apply").exit_code == 0
        pq.write_table(pa.table({"id": [3, 6], "name": ["cy", "ed"]}), tmp_path / "data/b.parquet")

    result = project.cli("apply")

    assert result.exit_code == 0, result.output
    digest = {name: _digest(tmp_path / "data" / name) for name in tables}
    columns, rows = _loaded(project)
    assert columns == [
        ("id", "int64"),
        ("name", "string"),
        ("score", "double"),
        ("_source_file_hash", "string"),
        ("_hakiri_batch_id", "string"),
    ]
    expected = [
        (1, "ada", None, digest["a.parquet"]),
        (2, "bob", None, digest["a.parquet"]),
        (3, "cy", None, digest["b.parquet"]),
        (4, "di", 1.5, digest["c.parquet"]),
        (5, None, 2.5, digest["c.parquet"]),
    ]
    if reload:
        expected.append((6, "ed", None, digest["b.parquet"]))
    assert rows == expected


def test_undeclared_json_lines_of_one_snapshot_each_name_their_rows_file(
    tmp_path: Path, spark
) -> None:
    project = _project(tmp_path, 'path = "data/*.jsonl", format = "jsonl"')
    files = {
        "a.jsonl": '{"id": 1, "name": "ada"}\n{"id": 2, "name": "bob"}\n',
        "b.jsonl": '{"id": 3, "name": "cy"}\n',
        # A key the others lack, and a wider number: one schema inferred from all three.
        "c.jsonl": '{"id": 4, "name": "di", "score": 1.5}\n{"id": 5, "score": 2}\n',
    }
    for name, text in files.items():
        project.write(f"data/{name}", text)

    result = project.cli("apply")

    assert result.exit_code == 0, result.output
    digest = {name: _digest(tmp_path / "data" / name) for name in files}
    columns, rows = _loaded(project)
    assert columns == [
        ("id", "int64"),
        ("name", "string"),
        ("score", "double"),
        ("_source_file_hash", "string"),
        ("_hakiri_batch_id", "string"),
    ]
    assert rows == [
        (1, "ada", None, digest["a.jsonl"]),
        (2, "bob", None, digest["a.jsonl"]),
        (3, "cy", None, digest["b.jsonl"]),
        (4, "di", 1.5, digest["c.jsonl"]),
        (5, None, 2.0, digest["c.jsonl"]),
    ]
