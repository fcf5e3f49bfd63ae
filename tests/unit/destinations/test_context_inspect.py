"""A context-store target seen by `plan`: a Delta table's columns and row count, read from its log."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest

from hakiri.destinations.base import TargetColumn
from hakiri.destinations.context import inspect_context_target
from hakiri.errors import DestinationUnreachable


def _write_orders(location: Path, ids: list[int], mode: str = "append") -> None:
    import pyarrow as pa
    from deltalake import write_deltalake

    schema = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("name", pa.string()),
            pa.field("amount", pa.decimal128(12, 2)),
            pa.field("at", pa.timestamp("us", tz="UTC")),
        ]
    )
    rows = pa.table(
        {
            "id": ids,
            "name": [f"n{i}" for i in ids],
            "amount": [Decimal("1.50")] * len(ids),
            "at": [dt.datetime(2026, 1, 1, tzinfo=dt.UTC)] * len(ids),
        },
        schema=schema,
    )
    write_deltalake(location, rows, mode=mode)


def test_a_missing_table_does_not_exist(tmp_path: Path) -> None:
    seen = inspect_context_target(tmp_path / "store", "orders")

    assert seen.exists is False and seen.schema is None and seen.table == "orders"
    assert seen.columns == () and seen.row_estimate is None


def test_a_directory_without_a_transaction_log_does_not_exist(tmp_path: Path) -> None:
    (tmp_path / "orders").mkdir()
    (tmp_path / "orders" / "part-0.parquet").write_bytes(b"PAR1")

    assert inspect_context_target(tmp_path, "orders").exists is False


def test_a_log_with_no_commit_yet_does_not_exist(tmp_path: Path) -> None:
    (tmp_path / "orders" / "_delta_log").mkdir(parents=True)

    assert inspect_context_target(tmp_path, "orders").exists is False


def test_an_existing_table_reports_delta_types_and_the_row_count(tmp_path: Path) -> None:
    _write_orders(tmp_path / "orders", [1, 2, 3])
    _write_orders(tmp_path / "orders", [4, 5])

    seen = inspect_context_target(tmp_path, "orders")

    assert seen.exists is True and seen.schema is None
    assert seen.columns == (
        TargetColumn("id", "long", nullable=False),
        TargetColumn("name", "string", nullable=True),
        TargetColumn("amount", "decimal(12,2)", nullable=True),
        TargetColumn("at", "timestamp", nullable=True),
    )
    assert seen.row_estimate == 5
    assert seen.primary_key == () and seen.dependent_views == ()


def test_an_overwrite_counts_only_the_live_files(tmp_path: Path) -> None:
    _write_orders(tmp_path / "orders", [1, 2, 3])
    _write_orders(tmp_path / "orders", [9], mode="overwrite")

    assert inspect_context_target(tmp_path, "orders").row_estimate == 1


def test_nested_types_are_written_like_spark(tmp_path: Path) -> None:
    import pyarrow as pa
    from deltalake import write_deltalake

    schema = pa.schema(
        [
            pa.field("tags", pa.list_(pa.int32())),
            pa.field("attrs", pa.map_(pa.string(), pa.float64())),
            pa.field("who", pa.struct([("id", pa.int64()), ("name", pa.string())])),
        ]
    )
    rows = pa.table(
        {"tags": [[1]], "attrs": [[("k", 1.0)]], "who": [{"id": 1, "name": "a"}]}, schema=schema
    )
    write_deltalake(tmp_path / "t", rows)

    seen = inspect_context_target(tmp_path, "t")

    assert [c.type for c in seen.columns] == [
        "array<integer>",
        "map<string,double>",
        "struct<id:long,name:string>",
    ]


def test_a_damaged_log_is_a_one_line_error(tmp_path: Path) -> None:
    log = tmp_path / "orders" / "_delta_log"
    log.mkdir(parents=True)
    (log / "00000000000000000000.json").write_text("garbage{\n")

    with pytest.raises(DestinationUnreachable) as caught:
        inspect_context_target(tmp_path, "orders")

    assert caught.value.reason.startswith(f"cannot read the Delta table at {tmp_path / 'orders'}: ")
    assert "\n" not in caught.value.reason
    assert caught.value.hint


def test_destination_inspectors_import_no_heavy_module() -> None:
    heavy = ("pyspark", "pyarrow", "deltalake", "psycopg")
    code = (
        "import sys\n"
        "import hakiri.destinations.context, hakiri.destinations.postgres\n"
        f"print(sorted(m for m in {heavy!r} if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    assert done.stdout.strip() == "[]"
