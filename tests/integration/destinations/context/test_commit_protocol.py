"""Exactly-once into Delta tables: the batch's app transaction id is the ledger, and a commit
that never happened leaves nothing a reader can see."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from hakiri.destinations.context.client import ContextDestination
from hakiri.destinations.context.commit import app_id
from hakiri.errors import HakiriError, HookError, LoadError
from hakiri.quality.rules import RuleCheck
from hakiri.spec.load import LoadMode
from tests.integration.destinations.context.support import (
    Crash,
    Recorder,
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
MODES = [
    ("append", {}),
    ("truncate", {}),
    ("blue_green", {}),
    ("upsert", {"upsert_key": ["id"]}),
    ("incremental_watermark", {"watermark_column": "id"}),
]


def test_the_batch_is_committed_with_its_app_transaction_id(
    dest: ContextDestination, store: Path, spark: SparkSession
) -> None:
    req = request("orders")
    assert not dest.is_committed(req)  # no table yet

    load(dest, frame(spark, ORDERS, [(1, "a")]), req)

    assert dest.is_committed(req)
    assert dest.is_committed(request("orders", run="recovery"))  # the run does not matter
    assert not dest.is_committed(request("orders", batch="batch-2"))
    assert not dest.is_committed(request("other"))
    assert app_id(req) == "hakiri:shop:orders_pipe:orders:batch-1"
    from deltalake import DeltaTable

    assert DeltaTable(str(store / "orders")).transaction_version(app_id(req)) == 1


@pytest.mark.parametrize(("mode", "options"), MODES)
def test_committing_a_batch_twice_loads_it_once(
    dest: ContextDestination, store: Path, spark: SparkSession, mode: str, options: dict
) -> None:
    load(dest, frame(spark, ORDERS, [(1, "a")]), request("orders", mode, batch="seed", **options))
    req = request("orders", mode, **options)
    staged = dest.stage(RuleCheck.unchecked(frame(spark, ORDERS, [(2, "b"), (3, "c")])), req)
    first = dest.commit(staged, req, Recorder())
    expected = table_rows(store / "orders")
    version = version_of(store / "orders")

    # The same staged batch again (its staging area is gone), then a fresh stage of the same batch.
    again = Recorder()
    second = dest.commit(staged, req, again)
    restaged = dest.stage(
        RuleCheck.unchecked(frame(spark, ORDERS, [(2, "b"), (3, "c")])),
        request("orders", mode, run="run-2", **options),
    )
    third = dest.commit(restaged, request("orders", mode, run="run-2", **options), again)

    assert first.rows_loaded == 2 and not first.already_committed
    assert second.already_committed and second.rows_loaded == 0
    assert third.already_committed and third.rows_loaded == 0
    assert again.seen == []  # no checkpoint for a batch that is already in
    assert version_of(store / "orders") == version
    assert table_rows(store / "orders") == expected
    assert staging_dirs(store) == []


@pytest.mark.parametrize(("mode", "options"), MODES)
def test_a_crash_before_the_commit_leaves_the_previous_version_and_a_retry_loads_once(
    dest: ContextDestination, store: Path, spark: SparkSession, mode: str, options: dict
) -> None:
    load(dest, frame(spark, ORDERS, [(1, "a")]), request("orders", mode, batch="seed", **options))
    before = table_rows(store / "orders")
    files_before = files_in(store / "orders")
    rows = frame(spark, ORDERS, [(2, "b"), (3, "c")])

    with pytest.raises(Crash):
        load(
            dest,
            rows,
            request("orders", mode, **options),
            checkpoint=Recorder("before_dest_commit"),
        )

    assert version_of(store / "orders") == 0
    assert table_rows(store / "orders") == before
    assert files_in(store / "orders") == files_before  # nothing was written
    assert staging_dirs(store) == []
    assert not dest.is_committed(request("orders", mode, **options))

    retry = request("orders", mode, run="run-2", **options)
    result = load(dest, rows, retry)
    again = load(dest, rows, retry)

    assert result.rows_loaded == 2 and again.already_committed
    assert version_of(store / "orders") == 1
    ids = [r["id"] for r in table_rows(store / "orders")]
    assert ids == ([2, 3] if mode in ("truncate", "blue_green") else [1, 2, 3])


def test_data_files_of_a_write_that_never_committed_are_invisible(
    dest: ContextDestination, store: Path, spark: SparkSession
) -> None:
    load(dest, frame(spark, ORDERS, [(1, "a")]), request("orders", batch="seed"))
    # What a writer killed between writing its data files and its commit leaves behind.
    orphan = store / "orders" / "part-00000-killed-before-commit.snappy.parquet"
    shutil.copy(store / "orders" / files_in(store / "orders")[0], orphan)

    assert len(files_in(store / "orders")) == 2  # the orphan is there...
    assert table_rows(store / "orders") == [{"id": 1, "name": "a"}]  # ...and no reader sees it

    load(dest, frame(spark, ORDERS, [(2, "b")]), request("orders", run="run-2"))

    assert table_rows(store / "orders") == [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}]


def test_a_crash_right_after_the_commit_finds_the_batch_committed(
    dest: ContextDestination, store: Path, spark: SparkSession
) -> None:
    with pytest.raises(Crash):
        load(
            dest,
            frame(spark, ORDERS, [(1, "a")]),
            request("orders"),
            checkpoint=Recorder("after_dest_commit"),
        )

    assert staging_dirs(store) == []  # gone before the checkpoint
    assert dest.is_committed(request("orders"))
    again = load(dest, frame(spark, ORDERS, [(1, "a")]), request("orders", run="run-2"))
    assert again.already_committed
    assert table_rows(store / "orders") == [{"id": 1, "name": "a"}]
    assert len(history_of(store / "orders")) == 1


def test_a_crash_before_the_first_commit_creates_no_table(
    dest: ContextDestination, store: Path, spark: SparkSession
) -> None:
    with pytest.raises(Crash):
        load(
            dest,
            frame(spark, ORDERS, [(1, "a")]),
            request("orders"),
            checkpoint=Recorder("before_dest_commit"),
        )

    assert not (store / "orders" / "_delta_log").exists()
    assert not dest.is_committed(request("orders"))


# ---------------------------------------------------------------- staging areas


def test_discard_deletes_the_staging_area_and_tolerates_a_missing_one(
    dest: ContextDestination, store: Path, spark: SparkSession
) -> None:
    staged = dest.stage(RuleCheck.unchecked(frame(spark, ORDERS, [(1, "a")])), request("orders"))
    assert staging_dirs(store) == [staged.staging_table]
    assert len(staged.staging_table) == 16

    dest.discard(staged)
    dest.discard(staged)

    assert staging_dirs(store) == []
    assert not (store / "orders").exists()


def test_a_failed_stage_leaves_no_staging_area(
    dest: ContextDestination, store: Path, spark: SparkSession
) -> None:
    from pyspark.sql import functions as F

    bad = frame(spark, "id string", [("1",), ("x",)]).select(F.col("id").cast("int").alias("id"))

    with pytest.raises(HakiriError):  # ANSI mode: the cast fails while Spark writes
        dest.stage(RuleCheck.unchecked(bad), request("orders"))

    assert staging_dirs(store) == []


def test_a_commit_whose_staging_area_is_gone_says_so(
    dest: ContextDestination, spark: SparkSession
) -> None:
    staged = dest.stage(RuleCheck.unchecked(frame(spark, ORDERS, [(1, "a")])), request("orders"))
    dest.discard(staged)

    with pytest.raises(LoadError, match=r"the staging area .* of batch batch-1 is gone"):
        dest.commit(staged, request("orders"), lambda _: None)


def test_a_damaged_table_is_reported_in_one_line(
    dest: ContextDestination, store: Path, spark: SparkSession
) -> None:
    load(dest, frame(spark, ORDERS, [(1, "a")]), request("orders"))
    (store / "orders" / "_delta_log" / "00000000000000000000.json").write_text("{not json")

    with pytest.raises(HakiriError) as caught:
        dest.is_committed(request("orders", batch="b2"))

    assert caught.value.reason.startswith(f"cannot read the Delta table at {store / 'orders'}: ")
    assert "\n" not in caught.value.reason and caught.value.hint
    shutil.rmtree(store / "orders")  # damaged on purpose: no table other readers must open


# ---------------------------------------------------------------- what the context store refuses


def test_sql_hooks_are_refused(dest: ContextDestination) -> None:
    from hakiri.spec.hooks import SqlHook

    with pytest.raises(HookError) as caught:
        dest.run_sql_hooks("post", [SqlHook(type="sql", statement="ANALYZE orders")], None)

    assert caught.value.reason == (
        "post hooks: sql and refresh_mat_view hooks need a PostgreSQL destination; "
        "the context store has no SQL engine"
    )
    assert "webhook" in (caught.value.hint or "")
    dest.run_sql_hooks("pre", [], None)  # nothing to run, nothing refused


def test_blue_green_with_an_in_swap_post_hook_is_refused(
    dest: ContextDestination, spark: SparkSession
) -> None:
    from dataclasses import replace

    req = replace(request("orders", LoadMode.BLUE_GREEN), post_hook=lambda conn: None)

    with pytest.raises(HookError, match="the context store has no SQL engine"):
        dest.stage(RuleCheck.unchecked(frame(spark, ORDERS, [(1, "a")])), req)


def test_replay_is_refused_loudly(dest: ContextDestination, spark: SparkSession) -> None:
    from hakiri.destinations.base import QuarantineTable

    with pytest.raises(HakiriError, match="replay into the context store is not supported yet"):
        dest.read_for_replay(
            spark, QuarantineTable(None, "q", "orders"), request("orders"), "run-1"
        )


def test_timestamps_need_spark_to_write_microseconds(
    dest: ContextDestination, store: Path, spark: SparkSession
) -> None:
    setting = "spark.sql.parquet.outputTimestampType"
    spark.conf.set(setting, "INT96")
    try:
        with pytest.raises(LoadError, match="needs Spark to write timestamps as TIMESTAMP_MICROS"):
            dest.stage(
                RuleCheck.unchecked(frame(spark, "at timestamp", [(None,)])), request("orders")
            )
    finally:
        spark.conf.set(setting, "TIMESTAMP_MICROS")
    assert staging_dirs(store) == []
