"""Schema evolution of context tables (issue 8): `target_columns`, `evolve`, and batches that no
longer send a column."""

from __future__ import annotations

from datetime import date, datetime
from pathlib import Path

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from hakiri.destinations.base import ColumnRetype, SchemaChange, TargetColumn
from hakiri.destinations.context.client import ContextDestination
from hakiri.destinations.context.evolve import _check_conversions as check_conversions
from hakiri.destinations.context.inspect import inspect_context_target
from hakiri.destinations.context.tables import table_frame
from hakiri.errors import LoadError
from hakiri.spec.load import LoadMode
from tests.integration.destinations.context.support import (
    PIPELINE,
    PROJECT,
    files_in,
    frame,
    history_of,
    load,
    request,
    staging_dirs,
    table_rows,
    version_of,
)

ORDERS = "id bigint, name string"


def _columns(dest: ContextDestination, table: str = "orders") -> list[tuple[str, str]]:
    found = dest.target_columns(request(table))
    assert found is not None
    return [(c.name, c.type) for c in found]


# ---------------------------------------------------------------- target_columns


def test_target_columns_is_none_without_a_table(dest: ContextDestination, store: Path) -> None:
    assert dest.target_columns(request("orders")) is None
    (store / "orders" / "_delta_log").mkdir(parents=True)  # a log with no commit is no table
    assert dest.target_columns(request("orders")) is None


def test_target_columns_names_types_as_inspection_does(
    dest: ContextDestination, store: Path, spark: SparkSession
) -> None:
    rows = frame(
        spark,
        "id bigint, qty int, price decimal(12,2), at timestamp, day date, ratio float, tags array<string>",
        [(1, 2, None, None, None, None, None)],
    )
    load(dest, rows, request("orders"))

    columns = dest.target_columns(request("orders"))

    assert columns == inspect_context_target(store, "orders").columns
    assert columns is not None
    assert [(c.name, c.type) for c in columns] == [
        ("id", "long"),
        ("qty", "integer"),
        ("price", "decimal(12,2)"),
        ("at", "timestamp"),
        ("day", "date"),
        ("ratio", "float"),
        ("tags", "array<string>"),
    ]


# ---------------------------------------------------------------- evolve


def test_adding_columns_is_one_metadata_only_version(
    dest: ContextDestination, store: Path, spark: SparkSession
) -> None:
    load(dest, frame(spark, ORDERS, [(1, "a"), (2, "b")]), request("orders"))
    files = files_in(store / "orders")

    dest.evolve(
        request("orders", run="run-2"),
        SchemaChange(
            add=(TargetColumn("qty", "bigint"), TargetColumn("tags", "array<string>", False))
        ),
    )

    assert version_of(store / "orders") == 1
    assert _columns(dest) == [
        ("id", "long"),
        ("name", "string"),
        ("qty", "long"),
        ("tags", "array<string>"),
    ]
    assert table_rows(store / "orders") == [
        {"id": 1, "name": "a", "qty": None, "tags": None},
        {"id": 2, "name": "b", "qty": None, "tags": None},
    ]
    assert files_in(store / "orders") == files  # no data file was written
    newest = history_of(store / "orders")[-1]
    # delta-spark's ALTER TABLE, or delta-rs's on an engine without it (Sail): one metadata-only version.
    assert newest["operation"] in ("ADD COLUMNS", "ADD COLUMN")
    assert newest["hakiri.schema_change"] == "add qty long; add tags array<string>"
    assert newest["hakiri.run_id"] == "run-2"
    assert newest["hakiri.pipeline_id"] == PIPELINE and newest["hakiri.project"] == PROJECT
    assert "hakiri.batch_id" not in newest
    assert table_rows(store / "orders", version=0) == [
        {"id": 1, "name": "a"},
        {"id": 2, "name": "b"},
    ]
    # Evolution is no batch: the batch's ledger entry is unaffected.
    assert dest.is_committed(request("orders"))
    assert not dest.is_committed(request("orders", batch="batch-2", run="run-2"))


def test_widening_rewrites_the_table_in_one_version(
    dest: ContextDestination, store: Path, spark: SparkSession
) -> None:
    rows = frame(
        spark,
        "id int, ratio float, day date, name string",
        [(1, 0.5, date(2024, 1, 2), "a"), (2, None, None, "b")],
    )
    load(dest, rows, request("orders"))
    old_files = files_in(store / "orders")

    dest.evolve(
        request("orders"),
        SchemaChange(
            widen=(
                ColumnRetype("id", "integer", "bigint"),
                ColumnRetype("ratio", "float", "double"),
                ColumnRetype("day", "date", "timestamp"),
            )
        ),
    )

    assert version_of(store / "orders") == 1
    assert _columns(dest) == [
        ("id", "long"),
        ("ratio", "double"),
        ("day", "timestamp"),
        ("name", "string"),
    ]
    found = table_rows(store / "orders")
    assert [(r["id"], r["ratio"], r["name"]) for r in found] == [(1, 0.5, "a"), (2, None, "b")]
    assert found[0]["day"].replace(tzinfo=None) == datetime(2024, 1, 2)  # the session is in UTC
    assert found[1]["day"] is None
    newest = history_of(store / "orders")[-1]
    assert newest["hakiri.schema_change"] == (
        "widen id integer -> long; widen ratio float -> double; widen day date -> timestamp"
    )
    # Time travel keeps the old version, its files and types.
    assert DeltaTable(str(store / "orders"), version=0).schema().fields[0].type.type == "integer"
    assert set(old_files) <= set(files_in(store / "orders"))
    assert staging_dirs(store) == []
    # Spark reads the rewritten table with its new types.
    assert table_frame(spark, store, "orders").where("id = 1").count() == 1


def test_widening_to_timestamp_ntz_upgrades_the_protocol_first(
    dest: ContextDestination, store: Path, spark: SparkSession
) -> None:
    load(dest, frame(spark, "id bigint, day date", [(1, date(2024, 3, 4))]), request("orders"))

    dest.evolve(
        request("orders"), SchemaChange(widen=(ColumnRetype("day", "date", "timestamp_ntz"),))
    )

    # Delta turns the feature on by hand only: one version for it, one for the rewrite.
    assert version_of(store / "orders") == 2
    assert history_of(store / "orders")[1]["operation"] in ("SET TBLPROPERTIES", "ADD FEATURE")
    assert _columns(dest) == [("id", "long"), ("day", "timestamp_ntz")]
    assert table_rows(store / "orders") == [{"id": 1, "day": datetime(2024, 3, 4)}]
    assert "timestampNtz" in (DeltaTable(str(store / "orders")).protocol().reader_features or [])
    assert history_of(store / "orders")[-1]["hakiri.schema_change"] == (
        "widen day date -> timestamp_ntz"
    )


def test_renaming_keeps_the_values(
    dest: ContextDestination, store: Path, spark: SparkSession
) -> None:
    load(dest, frame(spark, ORDERS, [(1, "a"), (2, None)]), request("orders"))

    dest.evolve(request("orders"), SchemaChange(rename=(("name", "label"),)))

    assert version_of(store / "orders") == 1
    assert _columns(dest) == [("id", "long"), ("label", "string")]
    assert table_rows(store / "orders") == [
        {"id": 1, "label": "a"},
        {"id": 2, "label": None},
    ]
    assert table_rows(store / "orders", version=0) == [
        {"id": 1, "name": "a"},
        {"id": 2, "name": None},
    ]


def test_a_retype_converts_every_value(
    dest: ContextDestination, store: Path, spark: SparkSession
) -> None:
    load(
        dest,
        frame(spark, "id bigint, qty string", [(1, "10"), (2, None), (3, "-3")]),
        request("orders"),
    )

    dest.evolve(request("orders"), SchemaChange(retype=(ColumnRetype("qty", "string", "int"),)))

    assert _columns(dest) == [("id", "long"), ("qty", "integer")]
    assert table_rows(store / "orders") == [
        {"id": 1, "qty": 10},
        {"id": 2, "qty": None},
        {"id": 3, "qty": -3},
    ]
    assert history_of(store / "orders")[-1]["hakiri.schema_change"] == (
        "retype qty string -> integer"
    )


def test_a_value_that_cannot_convert_fails_the_whole_change(
    dest: ContextDestination, store: Path, spark: SparkSession
) -> None:
    load(
        dest,
        frame(spark, "id bigint, qty string", [(1, "10"), (2, "ten"), (3, None)]),
        request("orders"),
    )
    before = table_rows(store / "orders")
    files = files_in(store / "orders")

    with pytest.raises(LoadError) as caught:
        dest.evolve(
            request("orders"),
            SchemaChange(
                rename=(("id", "order_id"),),
                add=(TargetColumn("note", "string"),),
                retype=(ColumnRetype("qty", "string", "integer"),),
            ),
        )

    assert caught.value.reason == (
        f"cannot convert column 'qty' of the Delta table at {store / 'orders'} from string to "
        "integer: 1 value does not fit, e.g. 'ten'"
    )
    assert "\n" not in caught.value.reason
    assert "the table was not changed" in (caught.value.hint or "")
    assert version_of(store / "orders") == 0
    assert table_rows(store / "orders") == before
    assert files_in(store / "orders") == files
    assert staging_dirs(store) == []


def test_a_conversion_spark_cannot_do_is_refused(
    dest: ContextDestination, store: Path, spark: SparkSession
) -> None:
    load(dest, frame(spark, "id bigint, day date", [(1, date(2024, 1, 1))]), request("orders"))

    # Apache Spark refuses the cast itself; Sail casts every date to NULL, which hakiri's check
    # of the converted values refuses. Either way: the column, both types, and no change.
    with pytest.raises(
        LoadError,
        match=r"column 'day' .* cannot be converted from date to boolean|"
        r"cannot convert column 'day' .* from date to boolean: 1 value does not fit",
    ):
        dest.evolve(
            request("orders"), SchemaChange(retype=(ColumnRetype("day", "date", "boolean"),))
        )

    assert version_of(store / "orders") == 0


def test_several_parts_are_one_version(
    dest: ContextDestination, store: Path, spark: SparkSession
) -> None:
    load(
        dest,
        frame(spark, "id int, name string, qty string", [(1, "a", "5"), (2, "b", None)]),
        request("orders"),
    )

    dest.evolve(
        request("orders"),
        SchemaChange(
            rename=(("name", "label"),),
            add=(TargetColumn("note", "string"),),
            widen=(ColumnRetype("id", "int", "bigint"),),
            retype=(ColumnRetype("qty", "string", "bigint"),),
        ),
    )

    assert version_of(store / "orders") == 1
    assert _columns(dest) == [
        ("id", "long"),
        ("label", "string"),
        ("qty", "long"),
        ("note", "string"),
    ]
    assert table_rows(store / "orders") == [
        {"id": 1, "label": "a", "qty": 5, "note": None},
        {"id": 2, "label": "b", "qty": None, "note": None},
    ]
    assert history_of(store / "orders")[-1]["hakiri.schema_change"] == (
        "rename name -> label; add note string; widen id integer -> long; retype qty string -> long"
    )
    # The next batch loads in the evolved columns.
    load(
        dest,
        frame(spark, "id bigint, label string, qty bigint, note string", [(3, "c", 1, "n")]),
        request("orders", batch="batch-2"),
    )
    assert [r["id"] for r in table_rows(store / "orders")] == [1, 2, 3]


def test_widening_a_renamed_column_by_its_new_or_old_name(
    dest: ContextDestination, store: Path, spark: SparkSession
) -> None:
    load(dest, frame(spark, "id int, n int", [(1, 2)]), request("orders"))

    dest.evolve(
        request("orders"),
        SchemaChange(
            rename=(("id", "key"), ("n", "count")),
            widen=(ColumnRetype("key", "integer", "long"), ColumnRetype("n", "integer", "long")),
        ),
    )

    assert _columns(dest) == [("key", "long"), ("count", "long")]
    assert table_rows(store / "orders") == [{"key": 1, "count": 2}]


def test_an_empty_change_writes_nothing(
    dest: ContextDestination, store: Path, spark: SparkSession
) -> None:
    load(dest, frame(spark, ORDERS, [(1, "a")]), request("orders"))

    dest.evolve(request("orders"), SchemaChange())
    dest.evolve(  # a rename to itself, a type spelled the planner's way: nothing to do
        request("orders"),
        SchemaChange(rename=(("name", "name"),), widen=(ColumnRetype("id", "bigint", "bigint"),)),
    )

    assert version_of(store / "orders") == 0


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            SchemaChange(rename=(("gone", "x"),)),
            "cannot rename column 'gone' .*: the table has no such column",
        ),
        (
            SchemaChange(add=(TargetColumn("NAME", "string"),)),
            "two columns named 'NAME' \\(ignoring case\\)",
        ),
        (
            SchemaChange(rename=(("id", "name"),)),
            "two columns named 'name' \\(ignoring case\\)",
        ),
        (
            SchemaChange(widen=(ColumnRetype("id", "integer", "long"),)),
            "column 'id' of the Delta table at .* is long, not integer as planned",
        ),
        (
            SchemaChange(widen=(ColumnRetype("qty", "integer", "long"),)),
            "cannot change the type of column 'qty' .*: the table has no such column",
        ),
        (
            SchemaChange(add=(TargetColumn("x", "interval"),)),
            "column 'x' cannot have type 'interval'",
        ),
    ],
)
def test_a_change_that_does_not_fit_the_table_is_refused(
    dest: ContextDestination, store: Path, spark: SparkSession, change: SchemaChange, message: str
) -> None:
    load(dest, frame(spark, ORDERS, [(1, "a")]), request("orders"))

    with pytest.raises(LoadError, match=message):
        dest.evolve(request("orders"), change)

    assert version_of(store / "orders") == 0


def test_evolving_a_missing_table_is_refused(dest: ContextDestination) -> None:
    with pytest.raises(LoadError, match="there is no such table"):
        dest.evolve(request("orders"), SchemaChange(add=(TargetColumn("x", "long"),)))


# ---------------------------------------------------------------- batches without a column


WIDE = "id bigint, name string, extra string"


def test_append_of_a_batch_without_a_column_leaves_it_null(
    dest: ContextDestination, store: Path, spark: SparkSession
) -> None:
    load(dest, frame(spark, WIDE, [(1, "a", "x")]), request("orders"))

    result = load(
        dest, frame(spark, ORDERS, [(2, "b")]), request("orders", batch="batch-2", run="run-2")
    )

    assert result.rows_loaded == 1
    assert _columns(dest) == [("id", "long"), ("name", "string"), ("extra", "string")]
    assert table_rows(store / "orders") == [
        {"id": 1, "name": "a", "extra": "x"},
        {"id": 2, "name": "b", "extra": None},
    ]
    assert table_frame(spark, store, "orders").where("extra IS NULL").count() == 1


def test_upsert_of_a_batch_without_a_column_keeps_it_in_updated_rows(
    dest: ContextDestination, store: Path, spark: SparkSession
) -> None:
    upsert = {"mode": LoadMode.UPSERT, "upsert_key": ["id"]}
    load(dest, frame(spark, WIDE, [(1, "a", "x"), (2, "b", "y")]), request("orders", **upsert))

    result = load(
        dest,
        frame(spark, ORDERS, [(2, "B"), (3, "C")]),
        request("orders", batch="batch-2", **upsert),
    )

    assert result.rows_loaded == 2
    assert _columns(dest) == [("id", "long"), ("name", "string"), ("extra", "string")]
    assert table_rows(store / "orders") == [
        {"id": 1, "name": "a", "extra": "x"},
        {"id": 2, "name": "B", "extra": "y"},  # updated: the column it did not send is kept
        {"id": 3, "name": "C", "extra": None},  # inserted: NULL
    ]


def test_upsert_of_the_key_alone_inserts_new_keys_and_leaves_matched_rows(
    dest: ContextDestination, store: Path, spark: SparkSession
) -> None:
    upsert = {"mode": LoadMode.UPSERT, "upsert_key": ["id"]}
    load(dest, frame(spark, ORDERS, [(1, "a"), (2, "b")]), request("orders", **upsert))

    result = load(
        dest, frame(spark, "id bigint", [(2,), (3,)]), request("orders", batch="batch-2", **upsert)
    )

    assert result.rows_loaded == 1
    assert table_rows(store / "orders") == [
        {"id": 1, "name": "a"},
        {"id": 2, "name": "b"},
        {"id": 3, "name": None},
    ]
    # A key that is every column of the table still has nothing to update.
    with pytest.raises(LoadError, match="covers every loaded column"):
        load(dest, frame(spark, "id bigint", [(1,)]), request("keys", **upsert))


@pytest.mark.parametrize("mode", [LoadMode.TRUNCATE, LoadMode.BLUE_GREEN])
def test_overwrite_with_a_batch_without_a_column_keeps_the_full_schema(
    dest: ContextDestination, store: Path, spark: SparkSession, mode: LoadMode
) -> None:
    load(dest, frame(spark, WIDE, [(1, "a", "x")]), request("orders", mode))

    load(dest, frame(spark, ORDERS, [(2, "b")]), request("orders", mode, batch="batch-2"))

    assert _columns(dest) == [("id", "long"), ("name", "string"), ("extra", "string")]
    assert table_rows(store / "orders") == [{"id": 2, "name": "b", "extra": None}]
    assert table_rows(store / "orders", version=0) == [{"id": 1, "name": "a", "extra": "x"}]


def test_a_rewrite_after_a_batch_without_a_column_keeps_its_nulls(
    dest: ContextDestination, store: Path, spark: SparkSession
) -> None:
    load(dest, frame(spark, "id int, name string, extra string", [(1, "a", "x")]), request("t"))
    load(dest, frame(spark, "id int, name string", [(2, "b")]), request("t", batch="batch-2"))

    dest.evolve(request("t"), SchemaChange(widen=(ColumnRetype("id", "integer", "long"),)))

    assert table_rows(store / "t") == [
        {"id": 1, "name": "a", "extra": "x"},
        {"id": 2, "name": "b", "extra": None},
    ]


@pytest.mark.parametrize(
    ("ddl", "row", "difference"),
    [
        ("id bigint, name string, qty int", (2, "b", 1), "new columns qty"),
        ("id bigint, name int", (2, 1), "changed types name string -> integer"),
        ("id bigint, qty int", (2, 1), "new columns qty; missing columns name"),
    ],
)
def test_a_batch_with_a_new_or_retyped_column_is_still_refused(
    dest: ContextDestination,
    store: Path,
    spark: SparkSession,
    ddl: str,
    row: tuple[object, ...],
    difference: str,
) -> None:
    load(dest, frame(spark, ORDERS, [(1, "a")]), request("orders"))

    with pytest.raises(LoadError) as caught:
        load(dest, frame(spark, ddl, [row]), request("orders", batch="batch-2"))

    assert caught.value.reason == (
        f"the staged rows do not match the columns of the Delta table at {store / 'orders'}: "
        + difference
    )
    assert version_of(store / "orders") == 0
    assert staging_dirs(store) == []


@pytest.mark.parametrize("new_type", ["long", "timestamp_ntz"])
def test_a_table_without_rows_is_rewritten_too(
    dest: ContextDestination, store: Path, spark: SparkSession, new_type: str
) -> None:
    load(dest, frame(spark, "id int, day date", []), request("orders"))
    assert table_rows(store / "orders") == []

    old = "integer" if new_type == "long" else "date"
    column = "id" if new_type == "long" else "day"
    dest.evolve(
        request("orders"),
        SchemaChange(rename=(("id", "key"),), widen=(ColumnRetype(column, old, new_type),)),
    )

    # timestamp_ntz: one version turns the table feature on, one rewrites
    assert version_of(store / "orders") == (1 if new_type == "long" else 2)
    assert dict(_columns(dest))[("key" if column == "id" else column)] == new_type
    assert table_rows(store / "orders") == []


@pytest.mark.parametrize(("column", "new_type"), [("id", "long"), ("day", "timestamp_ntz")])
def test_a_rewrite_that_loses_a_race_with_another_commit_changes_nothing(
    dest: ContextDestination,
    store: Path,
    spark: SparkSession,
    monkeypatch: pytest.MonkeyPatch,
    column: str,
    new_type: str,
) -> None:
    ddl = "id int, day date"
    load(dest, frame(spark, ddl, [(1, date(2024, 1, 1))]), request("orders"))
    rows = frame(spark, ddl, [(2, date(2024, 1, 2))])

    def check_then_race(*args: object) -> None:
        check_conversions(*args)
        load(dest, rows, request("orders", batch="batch-2"))  # another writer commits meanwhile

    monkeypatch.setattr("hakiri.destinations.context.evolve._check_conversions", check_then_race)
    old = "integer" if column == "id" else "date"

    with pytest.raises(LoadError, match="cannot commit the new columns of") as caught:
        dest.evolve(
            request("orders"),
            SchemaChange(rename=(("id", "key"),), widen=(ColumnRetype(column, old, new_type),)),
        )

    assert "another writer committed to the table at the same time" in (caught.value.hint or "")

    # the other writer's commit (and for timestamp_ntz the feature's), nothing else
    assert version_of(store / "orders") == (1 if new_type == "long" else 2)
    assert _columns(dest) == [("id", "integer"), ("day", "date")]
    assert [r["id"] for r in table_rows(store / "orders")] == [1, 2]
    assert staging_dirs(store) == []
