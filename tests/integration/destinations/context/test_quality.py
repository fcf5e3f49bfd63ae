"""Quarantine records and dataset validators in the context store: written exactly once, and
nothing at all when an `abort` validator fails."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession

from hakiri.destinations.base import QuarantineTable
from hakiri.destinations.context.client import ContextDestination
from hakiri.errors import ValidationFailed
from hakiri.quality.rules import RuleCheck
from hakiri.spec.quality import (
    CardinalityValidator,
    DuplicateKeyValidator,
    FkIntegrityValidator,
    NotNullRule,
    RowCountValidator,
)
from tests.integration.destinations.context.support import (
    PIPELINE,
    Crash,
    Recorder,
    frame,
    history_of,
    load,
    request,
    staging_dirs,
    table_rows,
    version_of,
)

ORDERS = "id bigint, name string"
DLQ = QuarantineTable(None, "orders_quarantine", "orders")


# A skip rule that quarantines (and drops) every row whose name is NULL.
NAMED = NotNullRule(type="not_null", column="name", on_fail="skip")


def _with_nameless(spark: SparkSession, rows: list[tuple[int, str]], *ids: int) -> DataFrame:
    """`rows`, plus one row without a name per id in `ids` (each one quarantine record under NAMED)."""
    return frame(spark, ORDERS, [*rows, *[(i, None) for i in ids]])


def _dlq_rows(store: Path) -> list[dict]:
    return table_rows(store / DLQ.table)


# ---------------------------------------------------------------- quarantine


def test_quarantine_records_land_in_their_delta_table_with_the_batch(
    dest: ContextDestination, store: Path, spark: SparkSession
) -> None:
    req = request("orders", quarantine=DLQ)
    checked = RuleCheck(_with_nameless(spark, [(1, "a")], 7, 8), [NAMED], label="orders")
    staged = dest.stage(checked, req)
    assert staged.quarantined == 2 and staged.quarantine_table == staged.staging_table

    result = dest.commit(staged, req, lambda _: None)

    assert result.quarantined == 2 and result.rows_loaded == 1
    records = _dlq_rows(store)
    assert sorted(json.loads(r["row"])["id"] for r in records) == [7, 8]
    for record in records:
        assert record["pipeline_id"] == PIPELINE and record["run_id"] == "run-1"
        assert record["node_id"] == "orders" and record["batch_id"] == "batch-1"
        assert record["rule_id"] == "not_null:name" and record["on_fail"] == "skip"
        assert record["dropped"] is True and record["replayed_by"] is None
        assert record["created_at"].tzinfo is not None and len(record["id"]) == 36
    assert [c for c in records[0]] == [
        "id", "pipeline_id", "run_id", "node_id", "rule_id", "on_fail", "dropped", "row",
        "batch_id", "replayed_by", "created_at",
    ]  # fmt: skip
    assert history_of(store / DLQ.table)[-1]["hakiri.batch_id"] == "batch-1"


def test_a_retried_batch_writes_its_quarantine_records_once(
    dest: ContextDestination, store: Path, spark: SparkSession
) -> None:
    rows = _with_nameless(spark, [(1, "a")], 7)
    with pytest.raises(Crash):
        load(
            dest,
            rows,
            request("orders", quarantine=DLQ),
            rules=[NAMED],
            checkpoint=Recorder("before_dest_commit"),
        )
    # Delta has no transaction across tables: the records are in, the rows are not.
    assert len(_dlq_rows(store)) == 1
    assert not (store / "orders" / "_delta_log").exists()

    retry = request("orders", run="run-2", quarantine=DLQ)
    result = load(dest, rows, retry, rules=[NAMED])
    again = load(dest, rows, retry, rules=[NAMED])

    assert result.rows_loaded == 1 and result.quarantined == 0  # written by the first attempt
    assert again.already_committed
    assert [r["run_id"] for r in _dlq_rows(store)] == ["run-1"]
    assert version_of(store / DLQ.table) == 0
    assert table_rows(store / "orders") == [{"id": 1, "name": "a"}]
    assert staging_dirs(store) == []


def test_quarantined_pages_newest_first(
    dest: ContextDestination, store: Path, spark: SparkSession
) -> None:
    assert dest.quarantined(DLQ, PIPELINE) is None  # no quarantine table yet
    for n, ids in enumerate([(1, 2), (3, 4, 5)], start=1):
        load(
            dest,
            _with_nameless(spark, [(100 + n, "x")], *ids),
            request("orders", batch=f"b{n}", run=f"run-{n}", quarantine=DLQ),
            rules=[NAMED],
        )

    everything = dest.quarantined(DLQ, PIPELINE)
    page = dest.quarantined(DLQ, PIPELINE, limit=2)
    first_run = dest.quarantined(DLQ, PIPELINE, run_id="run-1")

    assert everything is not None and page is not None and first_run is not None
    assert sorted(r.row["id"] for r in everything) == [1, 2, 3, 4, 5]
    assert [r.run_id for r in everything] == ["run-2"] * 3 + ["run-1"] * 2
    assert [r.run_id for r in page] == ["run-2", "run-2"]
    assert sorted(r.row["id"] for r in first_run) == [1, 2]
    assert dest.quarantined(DLQ, "another_pipeline") == []
    record = first_run[0]
    assert isinstance(record.id, str) and record.dropped and record.rule_id == "not_null:name"
    assert record.as_dict()["created_at"].endswith("+00:00")


# ---------------------------------------------------------------- validators


def test_an_abort_validator_that_fails_commits_nothing_at_all(
    dest: ContextDestination, store: Path, spark: SparkSession
) -> None:
    load(dest, frame(spark, ORDERS, [(1, "a")]), request("orders", batch="seed"))
    req = request(
        "orders",
        quarantine=DLQ,
        validators=[RowCountValidator(type="row_count", min=10, on_fail="abort")],
    )
    seen = Recorder()

    with pytest.raises(ValidationFailed) as caught:
        load(
            dest,
            _with_nameless(spark, [(2, "b"), (3, "c")], 9),
            req,
            rules=[NAMED],
            checkpoint=seen,
        )

    assert caught.value.reason == (
        f"validator row_count: 2 rows, expected at least 10; nothing was loaded into {store / 'orders'}"
    )
    assert seen.seen == []
    assert version_of(store / "orders") == 0
    assert table_rows(store / "orders") == [{"id": 1, "name": "a"}]
    assert not (store / DLQ.table).exists()  # no quarantine record either
    assert staging_dirs(store) == []
    assert not dest.is_committed(req)


def test_warn_validators_load_and_report_their_results(
    dest: ContextDestination, store: Path, spark: SparkSession
) -> None:
    req = request(
        "orders",
        validators=[
            DuplicateKeyValidator(type="duplicate_key", columns=["id"], on_fail="warn"),
            CardinalityValidator(
                type="cardinality", column="name", min_distinct=1, on_fail="abort"
            ),
        ],
    )

    result = load(dest, frame(spark, ORDERS, [(1, "a"), (1, "b")]), req)

    assert result.rows_loaded == 2
    duplicate, cardinality = result.validations
    assert (duplicate.check, duplicate.ok, duplicate.on_fail) == ("duplicate_key:id", False, "warn")
    assert duplicate.message.startswith("duplicate_key(id): 1 key value appears more than once")
    assert cardinality.ok
    assert len(table_rows(store / "orders")) == 2


def test_fk_integrity_reads_its_ref_table_from_the_context_store(
    dest: ContextDestination, store: Path, spark: SparkSession
) -> None:
    load(dest, frame(spark, "id bigint, label string", [(1, "one")]), request("customers"))
    fk = FkIntegrityValidator(
        type="fk_integrity", column="customer_id", ref_table="customers", ref_column="id",
        on_fail="abort",
    )  # fmt: skip
    rows = "order_id bigint, customer_id bigint"

    ok = load(dest, frame(spark, rows, [(10, 1)]), request("orders", validators=[fk]))
    with pytest.raises(
        ValidationFailed, match=r"fk_integrity\(customer_id\): 1 value with no match"
    ):
        load(dest, frame(spark, rows, [(11, 2)]), request("orders", batch="b2", validators=[fk]))
    missing = fk.model_copy(update={"ref_table": "nowhere"})
    with pytest.raises(ValidationFailed, match="no table 'nowhere' in the context store"):
        load(
            dest, frame(spark, rows, [(12, 1)]), request("orders", batch="b3", validators=[missing])
        )

    assert ok.validations[0].ok
    assert table_rows(store / "orders") == [{"order_id": 10, "customer_id": 1}]
