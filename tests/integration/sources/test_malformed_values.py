"""A value that does not fit its declared type, in each file format, through `hakiri apply` into
each destination: refused under `on_malformed = "fail"` with the file, line, column and value
named, and left out (and counted) under "drop", the rest of the batch loading."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from tests.support.project import Project

pytestmark = pytest.mark.integration

COLUMNS = '{ id = "bigint", amount = "decimal(10,2)" }'
# Each format's batch: two good rows and one whose amount is not a decimal.
FILES = {
    "csv": ("data/a.csv", "id,amount\n1,1.50\n2,x4.50\n3,3\n"),
    "jsonl": (
        "data/a.jsonl",
        '{"id": 1, "amount": 1.5}\n{"id": 2, "amount": "x4.50"}\n{"id": 3, "amount": 3}\n',
    ),
    "json": (
        "data/a.json",
        '[{"id": 1, "amount": 1.5},\n {"id": 2, "amount": "x4.50"},\n {"id": 3, "amount": 3}]',
    ),
    "parquet": ("data/a.parquet", None),
}
REASONS = {
    "csv": "data/a.csv:3: malformed csv record: amount: 'x4.50' is not decimal(10,2)",
    "jsonl": 'data/a.jsonl:2: malformed jsonl record: amount: "x4.50" is not decimal(10,2)',
    "json": 'data/a.json:2: malformed json record: element 2 of the array: amount: "x4.50" is not decimal(10,2)',
    "parquet": "data/a.parquet: malformed parquet record: amount: 'x4.50' is not decimal(10,2)",
}


def _project(
    root: Path, pg_url: str, schema: str, destination: str, fmt: str, policy: str
) -> Project:
    project = Project(root, pg_url, schema)
    name, text = FILES[fmt]
    if text is None:
        (root / "data").mkdir(parents=True, exist_ok=True)
        table = pa.table({"id": [1, 2, 3], "amount": ["1.50", "x4.50", "3"]})
        pq.write_table(table, root / name)
    else:
        project.write(name, text)
    target = (
        f'destination = {{ connector = "postgres", config = {{ connection = "wh", schema = "{schema}" }} }}'
        if destination == "postgres"
        else ""
    )
    project.write(
        "hakiri.toml",
        f"""
        [project]
        name = "malformed"

        [connections.wh]
        type = "postgres"
        url = "{pg_url}"

        [[pipeline]]
        id = "p"
        source = {{ connector = "files", config = {{ path = "{name}", format = "{fmt}", columns = {COLUMNS}, on_malformed = "{policy}" }} }}
        tables = ["t"]
        load = {{ mode = "append" }}
        {target}
        """,
    )
    return project


def _loaded(project: Project, destination: str) -> list[tuple[int, Decimal]]:
    if destination == "postgres":
        return [tuple(r) for r in project.rows("t")]  # type: ignore[misc]
    table = DeltaTable(str(project.root / ".hakiri" / "context" / "t")).to_pyarrow_table()
    return sorted(
        zip(table.column("id").to_pylist(), table.column("amount").to_pylist(), strict=True)
    )


@pytest.mark.parametrize("destination", ["postgres", "context"])
@pytest.mark.parametrize("fmt", FILES)
def test_a_mistyped_value_is_named_and_follows_on_malformed(
    spark: SparkSession, tmp_path: Path, pg_url: str, pg_schema: str, destination: str, fmt: str
) -> None:
    refused = _project(tmp_path / "fail", pg_url, pg_schema, destination, fmt, "fail")
    result = refused.cli("apply")
    assert result.exit_code == 1, result.output
    assert f"{REASONS[fmt]} (1 malformed record in this batch)" in " ".join(result.output.split())

    dropped = _project(tmp_path / "drop", pg_url, pg_schema, destination, fmt, "drop")
    result = dropped.cli("apply")
    assert result.exit_code == 0, result.output
    assert _loaded(dropped, destination) == [(1, Decimal("1.50")), (3, Decimal("3.00"))]
