"""`hakiri context repair`: a table whose log records its text columns as `string collate
UTF8_BINARY` (what hakiri wrote into the context store on Apache Spark over Spark Connect
before the store cast its text columns) is refused by delta-rs; `hakiri context show` says
so and names the repair; the repair keeps every row and every version, for delta-rs and
Spark alike."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from deltalake import DeltaTable
from typer.testing import CliRunner

from hakiri.cli.main import app
from tests.support.context_store import as_a_source_reads

pytestmark = pytest.mark.spark_only(
    "the collated type is what Apache Spark 4 writes over Spark Connect; Sail never wrote it"
)

DDL = "id bigint, name string, tags array<string>, owner struct<login:string,site_admin:boolean>"


def _cli(root: Path, *args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, [*args, "--project", str(root)])


def _collated_table(spark, path: Path) -> list[int]:  # type: ignore[no-untyped-def]
    """Three commits (and a checkpoint) written as before the fix: the rows' own types, strings
    collated, straight into Delta. The row count of each version."""
    counts: list[int] = []
    setting = "spark.databricks.delta.properties.defaults.checkpointInterval"
    spark.conf.set(setting, "2")  # a checkpoint at version 2
    try:
        for ids in ([1, 2, 3], [4, 5], [6]):
            rows = [(i, f"n{i}", [f"t{i}"], (f"u{i}", i % 2 == 0)) for i in ids]
            frame = as_a_source_reads(spark.createDataFrame(rows, DDL))
            frame.write.format("delta").mode("append").save(f"file://{path}")
            counts.append(sum(counts[-1:]) + len(ids))
    finally:
        spark.conf.unset(setting)
    return counts


def test_a_table_with_collated_strings_is_repaired_keeping_every_row_and_version(
    tmp_path: Path, spark
) -> None:
    (tmp_path / "hakiri.toml").write_text('[project]\nname = "r"\n')
    table = tmp_path / ".hakiri" / "context" / "issues"
    counts = _collated_table(spark, table)
    log = table / "_delta_log"
    assert "string collate UTF8_BINARY" in (log / "00000000000000000000.json").read_text()
    assert list(log.glob("*.checkpoint.parquet")), "the test wants a checkpoint to repair too"

    refused = _cli(tmp_path, "context", "show", "issues")
    assert refused.exit_code == 1
    assert "`string collate UTF8_BINARY`" in refused.output
    assert "hakiri context repair issues" in refused.output
    assert "damaged" not in refused.output

    dry = _cli(tmp_path, "context", "repair", "--dry-run", "--json")
    assert dry.exit_code == 0, dry.output
    [planned] = json.loads(dry.stdout)
    assert planned["columns"] == ["name", "owner.login", "tags[]"]
    assert "string collate" in (log / "00000000000000000000.json").read_text()  # untouched

    repaired = _cli(tmp_path, "context", "repair", "issues")
    assert repaired.exit_code == 0, repaired.output
    assert "issues: repaired" in repaired.stdout

    delta = DeltaTable(str(table))
    assert delta.version() == len(counts) - 1
    assert len(delta.history()) == len(counts)
    for version, count in enumerate(counts):
        assert DeltaTable(str(table), version=version).to_pyarrow_table().num_rows == count
        assert (
            spark.read.format("delta")
            .option("versionAsOf", version)
            .load(f"file://{table}")
            .count()
            == count
        )
    rows = sorted(delta.to_pyarrow_table().to_pylist(), key=lambda r: r["id"])
    assert rows[0] == {
        "id": 1,
        "name": "n1",
        "tags": ["t1"],
        "owner": {"login": "u1", "site_admin": False},
    }
    assert [field.type.type for field in delta.schema().fields[1:2]] == ["string"]
    assert _cli(tmp_path, "context", "show", "issues").exit_code == 0
    assert "issues: nothing to repair" in _cli(tmp_path, "context", "repair").stdout
