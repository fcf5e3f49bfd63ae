"""The load modes against a real PostgreSQL: rows and table structure after each commit."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import psycopg
import pytest

from hakiri.errors import LoadError
from hakiri.spec.load import LoadMode, LoadSpec
from tests.integration.destinations.load.support import (
    PROJECT,
    columns_of,
    create_table,
    destination,
    exists,
    insert,
    ledger_batches,
    no_checkpoint,
    pipeline_of,
    primary_key_of,
    request,
    rows_of,
    stage_rows,
)

pytestmark = pytest.mark.engine_free("PostgreSQL's own SQL, over rows staged by SQL")


def _watermark(conn: psycopg.Connection, schema: str, table: str) -> tuple[str, str] | None:
    row = conn.execute(
        "SELECT watermark_value, watermark_type FROM _hakiri.pipeline_watermarks"
        " WHERE project = %s AND pipeline_id = %s AND target_schema = %s AND target_table = %s",
        (PROJECT, pipeline_of(schema), schema, table),
    ).fetchone()
    return (row[0], row[1]) if row else None


# ---------------------------------------------------------------- append, and what every mode shares


def test_append_loads_shared_columns_in_target_order(
    pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    create_table(
        pg_conn,
        pg_schema,
        "orders",
        "id bigint, name text, code varchar(5), grade char(2), qty integer, extra integer DEFAULT 7",
    )
    insert(pg_conn, pg_schema, "orders", [(1, "old", "A", "x", 1, 1)])
    staged = stage_rows(
        pg_conn,
        pg_schema,
        # a different order than the target, a column the target lacks, no `extra`
        [("qty", "integer"), ("only_in_source", "text"), ("name", "text"), ("code", "text"),
         ("grade", "text"), ("id", "bigint")],
        [(5, "zzz", "", "", "", 2), (6, "zzz", "bob", "B", "y", 3)],
    )  # fmt: skip

    result = destination(pg_url, pg_schema).commit(
        staged, request(pg_schema, "orders"), no_checkpoint
    )

    assert result.rows_loaded == 2 and not result.created_target and not result.already_committed
    assert rows_of(pg_conn, pg_schema, "orders") == [
        (1, "old", "A", "x ", 1, 1),
        # The commit copies values as staged ('' is staged as NULL: test_stage_spark.py).
        (2, "", "", "  ", 5, 7),
        (3, "bob", "B", "y ", 6, 7),
    ]
    assert [c[0] for c in columns_of(pg_url, pg_schema, "orders")] == [
        "id", "name", "code", "grade", "qty", "extra"
    ]  # fmt: skip
    assert not exists(pg_conn, pg_schema, staged.staging_table)
    assert ledger_batches(pg_conn, pg_schema) == [("batch-1", 2)]


def test_a_missing_target_is_created_from_the_staged_columns_with_the_upsert_key_as_primary_key(
    pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    at = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
    staged = stage_rows(
        pg_conn,
        pg_schema,
        [("region", "text"), ("id", "bigint"), ("amount", "numeric(12,2)"),
         ("at", "timestamp with time zone"), ("ok", "boolean")],
        [("eu", 1, Decimal("9.50"), at, True), ("us", 1, Decimal("1.00"), at, False)],
    )  # fmt: skip

    result = destination(pg_url, pg_schema).commit(
        staged,
        request(pg_schema, "sales", LoadMode.UPSERT, upsert_key=["region", "id"]),
        no_checkpoint,
    )

    assert result.created_target and result.rows_loaded == 2
    assert columns_of(pg_url, pg_schema, "sales") == [
        ("region", "text", False),
        ("id", "bigint", False),
        ("amount", "numeric(12,2)", True),
        ("at", "timestamp with time zone", True),
        ("ok", "boolean", True),
    ]
    assert primary_key_of(pg_url, pg_schema, "sales") == ("region", "id")
    assert rows_of(pg_conn, pg_schema, "sales") == [
        ("eu", 1, Decimal("9.50"), at, True),
        ("us", 1, Decimal("1.00"), at, False),
    ]


def test_a_missing_target_without_upsert_key_has_no_primary_key(
    pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    staged = stage_rows(pg_conn, pg_schema, [("id", "bigint"), ("name", "text")], [(1, "a")])

    result = destination(pg_url, pg_schema).commit(
        staged, request(pg_schema, "plain"), no_checkpoint
    )

    assert result.created_target
    assert primary_key_of(pg_url, pg_schema, "plain") == ()
    assert columns_of(pg_url, pg_schema, "plain") == [
        ("id", "bigint", True),
        ("name", "text", True),
    ]


# ---------------------------------------------------------------- truncate


def test_truncate_replaces_every_row(
    pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    create_table(pg_conn, pg_schema, "t", "id bigint PRIMARY KEY, name text")
    insert(pg_conn, pg_schema, "t", [(1, "a"), (2, "b")])
    staged = stage_rows(
        pg_conn, pg_schema, [("id", "bigint"), ("name", "text")], [(2, "B"), (3, "C")]
    )

    result = destination(pg_url, pg_schema).commit(
        staged, request(pg_schema, "t", LoadMode.TRUNCATE), no_checkpoint
    )

    assert result.rows_loaded == 2
    assert rows_of(pg_conn, pg_schema, "t") == [(2, "B"), (3, "C")]


def test_truncate_is_rolled_back_when_the_insert_fails(
    pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    create_table(pg_conn, pg_schema, "t", "id bigint PRIMARY KEY, name text NOT NULL")
    insert(pg_conn, pg_schema, "t", [(1, "a"), (2, "b")])
    staged = stage_rows(
        pg_conn, pg_schema, [("id", "bigint"), ("name", "text")], [(3, "c"), (4, None)]
    )

    with pytest.raises(LoadError) as caught:
        destination(pg_url, pg_schema).commit(
            staged, request(pg_schema, "t", LoadMode.TRUNCATE), no_checkpoint
        )

    assert "violated" in caught.value.reason and f"{pg_schema}.t" in caught.value.reason
    assert rows_of(pg_conn, pg_schema, "t") == [(1, "a"), (2, "b")]
    assert not exists(pg_conn, pg_schema, staged.staging_table)
    assert ledger_batches(pg_conn, pg_schema) == []


# ---------------------------------------------------------------- upsert


def test_upsert_updates_matching_keys_and_inserts_the_rest(
    pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    create_table(
        pg_conn,
        pg_schema,
        "p",
        "shop text, sku text, price integer, note text, PRIMARY KEY (shop, sku)",
    )
    insert(
        pg_conn,
        pg_schema,
        "p",
        [("a", "x", 1, "keep"), ("a", "y", 2, "keep"), ("b", "x", 3, "keep")],
    )
    staged = stage_rows(
        pg_conn,
        pg_schema,
        [("sku", "text"), ("shop", "text"), ("price", "integer")],  # no `note`: it is left alone
        [("y", "a", 20), ("x", "b", 30), ("z", "b", 40)],
    )

    result = destination(pg_url, pg_schema).commit(
        staged, request(pg_schema, "p", LoadMode.UPSERT, upsert_key=["shop", "sku"]), no_checkpoint
    )

    assert result.rows_loaded == 3
    assert rows_of(pg_conn, pg_schema, "p") == [
        ("a", "x", 1, "keep"),
        ("a", "y", 20, "keep"),
        ("b", "x", 30, "keep"),
        ("b", "z", 40, None),
    ]


@pytest.mark.parametrize(
    ("load", "expected", "hint"),
    [
        (LoadSpec.model_construct(mode=LoadMode.UPSERT, upsert_key=None), "needs `upsert_key`", "upsert_key"),
        (LoadSpec(mode=LoadMode.UPSERT, upsert_key=["nope"]), "'nope' does not exist in the target", "fix `upsert_key`"),
        (LoadSpec(mode=LoadMode.UPSERT, upsert_key=["id", "name"]), "nothing to update", "append"),
        (LoadSpec(mode=LoadMode.UPSERT, upsert_key=["name"]), "needs a unique constraint on ['name']", "PRIMARY KEY"),
    ],
    ids=["no-key", "key-not-in-target", "key-covers-every-column", "no-unique-constraint"],
)  # fmt: skip
def test_upsert_errors_leave_the_target_untouched(
    pg_url: str,
    pg_conn: psycopg.Connection,
    pg_schema: str,
    load: LoadSpec,
    expected: str,
    hint: str,
) -> None:
    create_table(pg_conn, pg_schema, "p", "id bigint PRIMARY KEY, name text")
    insert(pg_conn, pg_schema, "p", [(1, "a")])
    staged = stage_rows(pg_conn, pg_schema, [("id", "bigint"), ("name", "text")], [(1, "b")])
    req = request(pg_schema, "p")
    req = type(req)(**{**req.__dict__, "load": load})

    with pytest.raises(LoadError) as caught:
        destination(pg_url, pg_schema).commit(staged, req, no_checkpoint)

    assert expected in caught.value.reason and "\n" not in caught.value.reason
    assert hint in (caught.value.hint or "")
    assert rows_of(pg_conn, pg_schema, "p") == [(1, "a")]
    assert not exists(pg_conn, pg_schema, staged.staging_table)


@pytest.mark.parametrize("before", [[], [(1, "old"), (2, "kept")]], ids=["new-key", "known-key"])
def test_upsert_refuses_a_batch_with_the_same_key_twice(
    pg_url: str, pg_conn: psycopg.Connection, pg_schema: str, before: list[tuple[int, str]]
) -> None:
    create_table(pg_conn, pg_schema, "p", "id bigint PRIMARY KEY, name text")
    insert(pg_conn, pg_schema, "p", before)
    staged = stage_rows(
        pg_conn, pg_schema, [("id", "bigint"), ("name", "text")], [(1, "a"), (1, "b")]
    )

    with pytest.raises(LoadError) as caught:
        destination(pg_url, pg_schema).commit(
            staged, request(pg_schema, "p", LoadMode.UPSERT, upsert_key=["id"]), no_checkpoint
        )

    # named before anything is written: the key, its value, how often, and which batch
    assert caught.value.reason.startswith("upsert_key (id) = 1 appears 2 times in batch ")
    assert "dedupe" in (caught.value.hint or "")
    assert rows_of(pg_conn, pg_schema, "p") == before


# ---------------------------------------------------------------- incremental_watermark


def test_watermark_first_run_starts_from_the_targets_max_then_from_the_stored_mark(
    pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    create_table(pg_conn, pg_schema, "ev", "id bigint, at timestamptz")
    t = [datetime(2024, 1, d, tzinfo=UTC) for d in range(1, 8)]
    insert(pg_conn, pg_schema, "ev", [(1, t[0]), (2, t[2])])  # history loaded before hakiri
    dest = destination(pg_url, pg_schema)
    load = {"watermark_column": "at"}

    first = stage_rows(
        pg_conn, pg_schema, [("id", "bigint"), ("at", "timestamptz")],
        [(10, t[1]), (11, t[2]), (12, t[3]), (13, t[4])],
    )  # fmt: skip
    result = dest.commit(
        first, request(pg_schema, "ev", LoadMode.INCREMENTAL_WATERMARK, **load), no_checkpoint
    )

    assert result.rows_loaded == 2  # only rows after MAX(at) = Jan 3
    assert result.watermark == "2024-01-05 00:00:00+00"
    assert _watermark(pg_conn, pg_schema, "ev") == (
        "2024-01-05 00:00:00+00",
        "timestamp with time zone",
    )

    second = stage_rows(
        pg_conn, pg_schema, [("id", "bigint"), ("at", "timestamptz")],
        [(13, t[4]), (14, t[5]), (15, None)], batch="batch-2",
    )  # fmt: skip
    result = dest.commit(
        second,
        request(pg_schema, "ev", LoadMode.INCREMENTAL_WATERMARK, batch="batch-2", **load),
        no_checkpoint,
    )

    assert result.rows_loaded == 1 and result.watermark == "2024-01-06 00:00:00+00"
    assert [r[0] for r in rows_of(pg_conn, pg_schema, "ev")] == [1, 12, 13, 14, 2]


def test_watermark_on_an_empty_target_starts_from_zero_and_loads_everything(
    pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    create_table(pg_conn, pg_schema, "ev", "seq integer, v text")
    staged = stage_rows(
        pg_conn, pg_schema, [("seq", "integer"), ("v", "text")], [(1, "a"), (2, "b")]
    )

    result = destination(pg_url, pg_schema).commit(
        staged,
        request(pg_schema, "ev", LoadMode.INCREMENTAL_WATERMARK, watermark_column="seq"),
        no_checkpoint,
    )

    assert result.rows_loaded == 2 and result.watermark == "2"
    assert _watermark(pg_conn, pg_schema, "ev") == ("2", "integer")


def test_a_failed_watermark_insert_rolls_back_the_mark(
    pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    create_table(pg_conn, pg_schema, "ev", "seq integer, v text NOT NULL")
    dest = destination(pg_url, pg_schema)
    spec = {"watermark_column": "seq"}
    ok = stage_rows(pg_conn, pg_schema, [("seq", "integer"), ("v", "text")], [(1, "a")])
    dest.commit(ok, request(pg_schema, "ev", LoadMode.INCREMENTAL_WATERMARK, **spec), no_checkpoint)
    assert _watermark(pg_conn, pg_schema, "ev") == ("1", "integer")

    bad = stage_rows(
        pg_conn,
        pg_schema,
        [("seq", "integer"), ("v", "text")],
        [(2, "b"), (3, None)],
        batch="batch-2",
    )
    with pytest.raises(LoadError):
        dest.commit(
            bad,
            request(pg_schema, "ev", LoadMode.INCREMENTAL_WATERMARK, batch="batch-2", **spec),
            no_checkpoint,
        )

    assert _watermark(pg_conn, pg_schema, "ev") == ("1", "integer")
    assert rows_of(pg_conn, pg_schema, "ev") == [(1, "a")]


def test_watermark_column_must_exist_in_the_target(
    pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    create_table(pg_conn, pg_schema, "ev", "id integer")
    staged = stage_rows(pg_conn, pg_schema, [("id", "integer"), ("at", "date")], [(1, None)])

    with pytest.raises(LoadError) as caught:
        destination(pg_url, pg_schema).commit(
            staged,
            request(pg_schema, "ev", LoadMode.INCREMENTAL_WATERMARK, watermark_column="at"),
            no_checkpoint,
        )

    assert "watermark_column 'at' does not exist in the target" in caught.value.reason
    assert rows_of(pg_conn, pg_schema, "ev") == []
