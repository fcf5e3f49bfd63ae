"""The load modes into Delta tables: rows, versions and time travel after each commit."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from hakiri.destinations.context.client import ContextDestination
from hakiri.destinations.context.inspect import inspect_context_target
from hakiri.errors import EmptySource, LoadError
from hakiri.quality.rules import RuleCheck
from hakiri.spec.load import LoadMode
from tests.integration.destinations.context.support import (
    PIPELINE,
    PROJECT,
    frame,
    history_of,
    load,
    request,
    staging_dirs,
    table_rows,
    version_of,
)

ORDERS = "id bigint, name string"


# ---------------------------------------------------------------- append


def test_append_creates_the_table_then_adds_one_version_per_batch(
    dest: ContextDestination, store: Path, spark: SparkSession
) -> None:
    first = load(dest, frame(spark, ORDERS, [(1, "a"), (2, "b")]), request("orders"))

    assert first.rows_loaded == 2 and first.created_target and not first.already_committed
    assert table_rows(store / "orders") == [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}]
    assert version_of(store / "orders") == 0

    second = load(
        dest, frame(spark, ORDERS, [(3, "c")]), request("orders", batch="batch-2", run="run-2")
    )

    assert second.rows_loaded == 1 and not second.created_target
    assert [r["id"] for r in table_rows(store / "orders")] == [1, 2, 3]
    assert version_of(store / "orders") == 1
    newest = history_of(store / "orders")[-1]
    assert newest["operation"] == "WRITE"
    assert newest["hakiri.batch_id"] == "batch-2"
    assert newest["hakiri.pipeline_id"] == PIPELINE
    assert newest["hakiri.run_id"] == "run-2"
    assert newest["hakiri.project"] == PROJECT
    assert staging_dirs(store) == []  # every staging area is gone after its commit


def test_staging_reports_rows_from_the_footers_and_delta_types(
    dest: ContextDestination, store: Path, spark: SparkSession
) -> None:
    rows = frame(
        spark,
        "id bigint, small smallint, amount decimal(12,2), at timestamp, day date, ok boolean, tags array<string>, nothing void",
        [
            (
                1,
                1,
                Decimal("1.50"),
                datetime(2024, 1, 1, tzinfo=UTC),
                date(2024, 1, 1),
                True,
                ["x"],
                None,
            )
        ],
    ).repartition(3)  # some part files hold no row

    staged = dest.stage(RuleCheck.unchecked(rows), request("typed"))

    assert staged.rows == 1 and staged.staging_schema is None and staged.quarantine_table is None
    assert [(c.name, c.type) for c in staged.columns] == [
        ("id", "long"),
        ("small", "short"),
        ("amount", "decimal(12,2)"),
        ("at", "timestamp"),
        ("day", "date"),
        ("ok", "boolean"),
        ("tags", "array<string>"),
        ("nothing", "string"),  # Delta has no void type
    ]
    assert staging_dirs(store) == [staged.staging_table]
    dest.commit(staged, request("typed"), lambda _: None)
    seen = inspect_context_target(store, "typed")
    assert [(c.name, c.type) for c in seen.columns] == [(c.name, c.type) for c in staged.columns]
    assert seen.row_estimate == 1
    assert (
        len(list((store / "typed").glob("*.parquet"))) == 1
    )  # the empty part files were not added


def test_timestamps_and_decimals_round_trip(
    dest: ContextDestination, store: Path, spark: SparkSession
) -> None:
    at = datetime(2024, 5, 1, 12, 30, 15, 123456, tzinfo=UTC)
    local = datetime(2024, 5, 1, 9, 0, 0, 5)
    rows = frame(
        spark,
        "id bigint, at timestamp, local timestamp_ntz, amount decimal(38,10), price decimal(12,2), "
        "day date, ratio double",
        [
            (1, at, local, Decimal("12345678901234567890.0123456789"), Decimal("-0.05"),
             date(1999, 12, 31), 0.1),
            (2, None, None, None, None, None, None),
        ],
    )  # fmt: skip

    load(dest, rows, request("typed"))

    assert table_rows(store / "typed") == [
        {
            "id": 1,
            "at": at,
            "local": local,
            "amount": Decimal("12345678901234567890.0123456789"),
            "price": Decimal("-0.05"),
            "day": date(1999, 12, 31),
            "ratio": 0.1,
        },
        {
            "id": 2,
            "at": None,
            "local": None,
            "amount": None,
            "price": None,
            "day": None,
            "ratio": None,
        },
    ]
    # Spark reads them back the same (as ref tables and watermarks do).
    from hakiri.destinations.context.tables import table_frame

    back = table_frame(spark, store, "typed").where("id = 1").first()
    assert back is not None
    assert back["at"].replace(tzinfo=UTC) == at  # Spark returns naive UTC (session time zone)
    assert back["local"] == local
    assert back["amount"] == Decimal("12345678901234567890.0123456789")


def test_a_column_name_with_upper_case_dots_and_unicode_loads(
    dest: ContextDestination, store: Path, spark: SparkSession
) -> None:
    load(dest, frame(spark, "`Order.Id` bigint, `Näme` string", [(1, "x")]), request("odd"))

    assert table_rows(store / "odd") == [{"Order.Id": 1, "Näme": "x"}]


@pytest.mark.parametrize("schema", ["`Order Id` bigint", "o struct<`a=b`: bigint>"])
def test_a_column_name_delta_cannot_write_is_refused_before_staging(
    dest: ContextDestination, store: Path, spark: SparkSession, schema: str
) -> None:
    with pytest.raises(LoadError, match="has a character Delta Lake does not allow") as caught:
        dest.stage(RuleCheck.unchecked(frame(spark, schema, [])), request("odd"))

    assert "rename the column in a transform" in (caught.value.hint or "")
    assert staging_dirs(store) == [] and not (store / "odd").exists()


# ---------------------------------------------------------------- truncate and blue_green


@pytest.mark.parametrize("mode", [LoadMode.TRUNCATE, LoadMode.BLUE_GREEN])
def test_replacing_modes_write_one_new_version_and_keep_the_old_one_for_time_travel(
    dest: ContextDestination, store: Path, spark: SparkSession, mode: LoadMode
) -> None:
    load(dest, frame(spark, ORDERS, [(1, "a"), (2, "b")]), request("orders", mode))

    result = load(
        dest,
        frame(spark, ORDERS, [(7, "new")]),
        request("orders", mode, batch="batch-2", run="run-2"),
    )

    assert result.rows_loaded == 1 and not result.created_target
    assert table_rows(store / "orders") == [{"id": 7, "name": "new"}]
    assert version_of(store / "orders") == 1
    assert table_rows(store / "orders", version=0) == [
        {"id": 1, "name": "a"},
        {"id": 2, "name": "b"},
    ]
    assert history_of(store / "orders")[-1]["operationParameters"]["mode"] == "Overwrite"


@pytest.mark.parametrize("mode", [LoadMode.TRUNCATE, LoadMode.BLUE_GREEN])
def test_replacing_modes_refuse_an_empty_source(
    dest: ContextDestination, store: Path, spark: SparkSession, mode: LoadMode
) -> None:
    load(dest, frame(spark, ORDERS, [(1, "a")]), request("orders", mode))
    staged = dest.stage(
        RuleCheck.unchecked(frame(spark, ORDERS, [])), request("orders", mode, batch="batch-2")
    )
    assert staged.rows == 0

    with pytest.raises(EmptySource) as caught:
        dest.commit(staged, request("orders", mode, batch="batch-2"), lambda _: None)

    verb = "truncate" if mode is LoadMode.TRUNCATE else "replace"
    assert caught.value.reason == (
        f"the source produced 0 rows; refusing to {verb} {store / 'orders'} (load mode {mode.value})"
    )
    assert "fail_on_empty_source = false" in (caught.value.hint or "")
    assert version_of(store / "orders") == 0
    assert table_rows(store / "orders") == [{"id": 1, "name": "a"}]
    assert staging_dirs(store) == []


def test_an_empty_source_empties_the_table_when_allowed(
    dest: ContextDestination, store: Path, spark: SparkSession
) -> None:
    load(dest, frame(spark, ORDERS, [(1, "a")]), request("orders", "truncate"))

    result = load(
        dest,
        frame(spark, ORDERS, []),
        request("orders", "truncate", batch="batch-2", fail_on_empty_source=False),
    )

    assert result.rows_loaded == 0
    assert table_rows(store / "orders") == []
    assert version_of(store / "orders") == 1


# ---------------------------------------------------------------- upsert


def test_upsert_updates_matching_keys_and_inserts_the_rest_in_one_merge(
    dest: ContextDestination, store: Path, spark: SparkSession
) -> None:
    ddl = "`Order.Id` bigint, region string, amount decimal(10,2), at timestamp"
    key = ["Order.Id", "region"]
    t0, t1 = datetime(2024, 1, 1, tzinfo=UTC), datetime(2024, 6, 1, 8, 30, tzinfo=UTC)
    first = load(
        dest,
        frame(spark, ddl, [(1, "eu", Decimal("1.00"), t0), (2, "eu", Decimal("2.00"), t0)]),
        request("sales", "upsert", upsert_key=key),
    )
    assert first.created_target and first.rows_loaded == 2

    # The same columns in another order: matched by name.
    result = load(
        dest,
        frame(
            spark,
            "at timestamp, amount decimal(10,2), region string, `Order.Id` bigint",
            [(t1, Decimal("20.00"), "eu", 2), (t1, Decimal("5.00"), "us", 2)],
        ),
        request("sales", "upsert", batch="batch-2", upsert_key=key),
    )

    assert result.rows_loaded == 2  # one updated, one inserted
    assert table_rows(store / "sales") == [
        {"Order.Id": 1, "region": "eu", "amount": Decimal("1.00"), "at": t0},
        {"Order.Id": 2, "region": "eu", "amount": Decimal("20.00"), "at": t1},
        {"Order.Id": 2, "region": "us", "amount": Decimal("5.00"), "at": t1},
    ]
    assert version_of(store / "sales") == 1
    merge = history_of(store / "sales")[-1]
    assert merge["operation"] == "MERGE" and merge["hakiri.batch_id"] == "batch-2"
    assert table_rows(store / "sales", version=0) == [
        {"Order.Id": 1, "region": "eu", "amount": Decimal("1.00"), "at": t0},
        {"Order.Id": 2, "region": "eu", "amount": Decimal("2.00"), "at": t0},
    ]


def test_upsert_key_missing_from_the_rows_is_refused_before_anything_is_written(
    dest: ContextDestination, store: Path, spark: SparkSession
) -> None:
    load(dest, frame(spark, ORDERS, [(1, "a")]), request("orders"))
    req = request("orders", "upsert", batch="batch-2", upsert_key=["order_id"])

    with pytest.raises(LoadError) as caught:
        load(dest, frame(spark, ORDERS, [(1, "b")]), req)

    # The same check, and words, as the PostgreSQL destination (`commit_checks`).
    assert caught.value.reason == (
        f"upsert_key column 'order_id' does not exist in the target {store / 'orders'}"
    )
    assert "the target has: id, name" in (caught.value.hint or "")
    assert version_of(store / "orders") == 0 and staging_dirs(store) == []


def test_upsert_refuses_duplicate_and_null_keys_in_the_batch(
    dest: ContextDestination, store: Path, spark: SparkSession
) -> None:
    with pytest.raises(LoadError, match=r"upsert_key \(id\) = 1 appears 2 times in batch "):
        load(
            dest,
            frame(spark, ORDERS, [(1, "a"), (1, "b"), (2, "c")]),
            request("orders", "upsert", upsert_key=["id"]),
        )
    with pytest.raises(LoadError, match=r"upsert_key \(id\) is NULL in 1 rows of batch "):
        load(
            dest,
            frame(spark, ORDERS, [(None, "a"), (2, "c")]),
            request("orders", "upsert", upsert_key=["id"]),
        )
    assert not (store / "orders" / "_delta_log").exists()


def test_upsert_key_covering_every_column_is_refused(
    dest: ContextDestination, spark: SparkSession
) -> None:
    with pytest.raises(LoadError, match="covers every loaded column"):
        load(
            dest,
            frame(spark, ORDERS, [(1, "a")]),
            request("orders", "upsert", upsert_key=["id", "name"]),
        )


# ---------------------------------------------------------------- incremental_watermark


def _incremental(batch: str, pipeline: str = PIPELINE, column: str = "seq"):
    return request(
        "events",
        "incremental_watermark",
        batch=batch,
        run=f"run-{batch}",
        pipeline=pipeline,
        watermark_column=column,
    )


EVENTS = "seq bigint, what string"


def test_incremental_first_run_loads_everything_and_records_the_mark(
    dest: ContextDestination, store: Path, spark: SparkSession
) -> None:
    result = load(dest, frame(spark, EVENTS, [(1, "a"), (3, "c"), (2, "b")]), _incremental("b1"))

    assert result.rows_loaded == 3 and result.created_target and result.watermark == "3"
    commit = history_of(store / "events")[-1]
    assert commit["hakiri.watermark"] == "3" and commit["hakiri.watermark_column"] == "seq"


def test_incremental_later_runs_skip_rows_at_or_below_the_mark(
    dest: ContextDestination, store: Path, spark: SparkSession
) -> None:
    load(dest, frame(spark, EVENTS, [(1, "a"), (3, "c")]), _incremental("b1"))

    staged = dest.stage(
        RuleCheck.unchecked(frame(spark, EVENTS, [(2, "late"), (3, "c"), (4, "d"), (5, "e")])),
        _incremental("b2"),
    )
    assert staged.rows == 2  # filtered when staged: only 4 and 5 are past the mark
    result = dest.commit(staged, _incremental("b2"), lambda _: None)

    assert result.rows_loaded == 2 and result.watermark == "5"
    assert [r["seq"] for r in table_rows(store / "events")] == [1, 3, 4, 5]

    nothing_new = load(dest, frame(spark, EVENTS, [(5, "e"), (1, "a")]), _incremental("b3"))

    assert nothing_new.rows_loaded == 0 and nothing_new.watermark == "5"
    assert [r["seq"] for r in table_rows(store / "events")] == [1, 3, 4, 5]
    assert dest.is_committed(_incremental("b3"))  # the empty batch is recorded too


def test_incremental_reads_its_mark_from_the_history_not_from_the_rows(
    dest: ContextDestination, store: Path, spark: SparkSession
) -> None:
    load(dest, frame(spark, EVENTS, [(1, "a"), (3, "c")]), _incremental("b1"))
    # Another pipeline appends rows far past our mark.
    load(
        dest,
        frame(spark, EVENTS, [(100, "other")]),
        request("events", batch="x1", pipeline="other_pipe"),
    )

    result = load(dest, frame(spark, EVENTS, [(4, "d"), (50, "e")]), _incremental("b2"))

    assert result.rows_loaded == 2 and result.watermark == "50"  # MAX(seq) would have skipped both
    assert [r["seq"] for r in table_rows(store / "events")] == [1, 3, 4, 50, 100]


def test_incremental_first_run_on_an_existing_table_starts_from_its_max(
    dest: ContextDestination, store: Path, spark: SparkSession
) -> None:
    load(dest, frame(spark, EVENTS, [(1, "a"), (7, "g")]), request("events", batch="seed"))

    result = load(dest, frame(spark, EVENTS, [(5, "old"), (8, "h")]), _incremental("b1"))

    assert result.rows_loaded == 1 and result.watermark == "8"
    assert [r["seq"] for r in table_rows(store / "events")] == [1, 7, 8]


def test_incremental_on_a_timestamp_column(
    dest: ContextDestination, store: Path, spark: SparkSession
) -> None:
    ddl = "at timestamp, what string"
    t1 = datetime(2024, 5, 1, 12, 0, 0, 250000, tzinfo=UTC)
    t2 = datetime(2024, 5, 2, tzinfo=UTC)
    first = load(dest, frame(spark, ddl, [(t1, "a")]), _incremental("b1", column="at"))
    assert first.watermark == "2024-05-01 12:00:00.250000Z"

    result = load(dest, frame(spark, ddl, [(t1, "a"), (t2, "b")]), _incremental("b2", column="at"))

    assert result.rows_loaded == 1 and result.watermark == "2024-05-02 00:00:00.000000Z"
    assert [r["at"] for r in table_rows(store / "events")] == [t1, t2]


def test_incremental_refuses_a_missing_or_unordered_watermark_column(
    dest: ContextDestination, spark: SparkSession
) -> None:
    with pytest.raises(LoadError, match="watermark_column 'seq' is not among the rows to load"):
        dest.stage(RuleCheck.unchecked(frame(spark, "id bigint", [(1,)])), _incremental("b1"))
    with pytest.raises(LoadError, match="has type boolean, which has no order"):
        dest.stage(RuleCheck.unchecked(frame(spark, "seq boolean", [(True,)])), _incremental("b1"))


# ---------------------------------------------------------------- refusals


def test_a_schema_that_differs_from_the_table_is_refused(
    dest: ContextDestination, store: Path, spark: SparkSession
) -> None:
    load(dest, frame(spark, ORDERS, [(1, "a")]), request("orders"))

    with pytest.raises(LoadError) as caught:
        load(
            dest,
            frame(spark, "id string, name string, qty int", [("1", "a", 1)]),
            request("orders", batch="b2"),
        )

    assert caught.value.reason == (
        f"the staged rows do not match the columns of the Delta table at {store / 'orders'}: "
        "new columns qty; changed types id long -> string"
    )
    assert "evolves the table to the source's columns before it stages a batch" in (
        caught.value.hint or ""
    )
    assert version_of(store / "orders") == 0
    assert staging_dirs(store) == []


def test_columns_in_another_order_are_the_same_schema(
    dest: ContextDestination, store: Path, spark: SparkSession
) -> None:
    load(dest, frame(spark, ORDERS, [(1, "a")]), request("orders"))

    load(dest, frame(spark, "name string, id bigint", [("b", 2)]), request("orders", batch="b2"))

    assert table_rows(store / "orders") == [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}]


# ---------------------------------------------------------------- cdc_mirror

CHANGES = "id bigint, name string, note string, _hakiri_cdc_op string, _hakiri_cdc_unchanged string"


def test_cdc_mirror_creates_a_missing_table_from_the_rows_without_control_columns(
    dest: ContextDestination, store: Path, spark: SparkSession
) -> None:
    rows = [(1, "a", "n1", "u", None), (2, None, None, "d", None)]

    result = load(dest, frame(spark, CHANGES, rows), request("t", "cdc_mirror", upsert_key=["id"]))

    assert result.created_target and (result.rows_loaded, result.rows_deleted) == (1, 0)
    assert table_rows(store / "t") == [{"id": 1, "name": "a", "note": "n1"}]
    assert [c.name for c in inspect_context_target(store, "t").columns] == ["id", "name", "note"]


def test_cdc_mirror_mirrors_a_table_of_key_columns_only(
    dest: ContextDestination, store: Path, spark: SparkSession
) -> None:
    """Unlike upsert, nothing to update is no refusal: keys still come and go."""
    ddl = "a bigint, b bigint, _hakiri_cdc_op string, _hakiri_cdc_unchanged string"
    key = ["a", "b"]
    load(dest, frame(spark, ddl, [(1, 1, "u", None), (1, 2, "u", None)]), request(
        "links", "cdc_mirror", upsert_key=key
    ))  # fmt: skip

    result = load(
        dest,
        frame(spark, ddl, [(1, 1, "d", None), (1, 2, "u", None), (2, 1, "u", None)]),
        request("links", "cdc_mirror", batch="batch-2", upsert_key=key),
    )

    assert table_rows(store / "links") == [{"a": 1, "b": 2}, {"a": 2, "b": 1}]
    assert (result.rows_loaded, result.rows_deleted) == (1, 1)


def test_cdc_mirror_refuses_rows_without_the_control_columns(
    dest: ContextDestination, store: Path, spark: SparkSession
) -> None:
    load(dest, frame(spark, ORDERS, [(1, "a")]), request("orders"))

    with pytest.raises(LoadError) as caught:
        load(
            dest,
            frame(spark, ORDERS, [(1, "b")]),
            request("orders", "cdc_mirror", batch="batch-2", upsert_key=["id"]),
        )

    assert caught.value.reason == (
        f"load mode cdc_mirror: the rows staged for {store / 'orders'} lack _hakiri_cdc_op, "
        "_hakiri_cdc_unchanged"
    )
    assert version_of(store / "orders") == 0 and staging_dirs(store) == []


def test_a_table_name_that_is_not_one_directory_is_refused(
    dest: ContextDestination, spark: SparkSession
) -> None:
    for name in ("../escape", "a/b", "_staging", ".hidden"):
        with pytest.raises(LoadError, match="cannot be a table of the context store"):
            dest.stage(RuleCheck.unchecked(frame(spark, ORDERS, [(1, "a")])), request(name))
