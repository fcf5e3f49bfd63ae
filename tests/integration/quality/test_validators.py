"""Dataset validators probing a staged table in a real PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.rows import dict_row
from pydantic import TypeAdapter

from hakiri.errors import ValidationFailed
from hakiri.quality.validators import ProbeResult, probe_staged, validator_check_id
from hakiri.spec.quality import DatasetValidator

pytestmark = pytest.mark.engine_free(
    "the dataset validators as PostgreSQL's own SQL probes, over rows staged by SQL"
)

STAGING = "_hakiri_stg_0123456789abcdef"
ON_FAIL = pytest.mark.parametrize("on_fail", ["abort", "warn"])
_VALIDATOR: TypeAdapter[Any] = TypeAdapter(DatasetValidator)


def validator(**fields: Any) -> Any:
    return _VALIDATOR.validate_python(fields)


def create_table(
    conn: psycopg.Connection,
    schema: str,
    table: str,
    columns: Sequence[tuple[str, str]],
    rows: Iterable[Sequence[Any]] = (),
    *,
    unlogged: bool = False,
) -> sql.Identifier:
    name = sql.Identifier(schema, table)
    conn.execute(
        sql.SQL("CREATE {}TABLE {} ({})").format(
            sql.SQL("UNLOGGED " if unlogged else ""),
            name,
            sql.SQL(", ").join(
                sql.SQL("{} {}").format(sql.Identifier(c), sql.SQL(t)) for c, t in columns
            ),
        )
    )
    rows = list(rows)
    if rows:
        with conn.cursor() as cur:
            cur.executemany(
                sql.SQL("INSERT INTO {} VALUES ({})").format(
                    name, sql.SQL(", ").join(sql.Placeholder() * len(columns))
                ),
                rows,
            )
    return name


def stage(
    conn: psycopg.Connection,
    schema: str,
    columns: Sequence[tuple[str, str]],
    rows: Iterable[Sequence[Any]],
    table: str = STAGING,
) -> sql.Identifier:
    """A staging-like table: UNLOGGED, Spark-mapped PostgreSQL types."""
    return create_table(conn, schema, table, columns, rows, unlogged=True)


def probe_one(
    conn: psycopg.Connection,
    staging: sql.Identifier,
    schema: str,
    text_columns: Sequence[str] = (),
    **fields: Any,
) -> ProbeResult:
    [result] = probe_staged(
        conn, staging, [validator(**fields)], default_schema=schema, text_columns=text_columns
    )
    return result


# ------------------------------------------------------------------ row_count


@ON_FAIL
def test_row_count_within_bounds_passes(
    pg_conn: psycopg.Connection, pg_schema: str, on_fail: str
) -> None:
    staging = stage(pg_conn, pg_schema, [("id", "bigint")], [(i,) for i in range(5)])
    result = probe_one(
        pg_conn, staging, pg_schema, type="row_count", min=1, max=10, on_fail=on_fail
    )
    assert result == ProbeResult(
        "row_count", on_fail, True, "row_count: 5 rows, expected between 1 and 10", 5
    )


@ON_FAIL
def test_row_count_outside_bounds_fails(
    pg_conn: psycopg.Connection, pg_schema: str, on_fail: str
) -> None:
    staging = stage(pg_conn, pg_schema, [("id", "bigint")], [(i,) for i in range(5)])
    few = probe_one(pg_conn, staging, pg_schema, type="row_count", min=1000, on_fail=on_fail)
    assert (few.ok, few.observed, few.on_fail) == (False, 5, on_fail)
    assert few.message == "row_count: 5 rows, expected at least 1,000"
    many = probe_one(pg_conn, staging, pg_schema, type="row_count", max=3, on_fail=on_fail)
    assert (many.ok, many.observed) == (False, 5)
    assert many.message == "row_count: 5 rows, expected at most 3"


# ------------------------------------------------------------------ freshness


def _two_hours_ago() -> datetime:
    return datetime.now(UTC) - timedelta(hours=2)


FRESHNESS_CASES = {
    "timestamptz": ("timestamp with time zone", lambda t: t),
    "timestamp": ("timestamp without time zone", lambda t: t.replace(tzinfo=None)),
    "text-iso-offset": ("text", lambda t: t.isoformat()),
    "text-iso-z": ("text", lambda t: t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")),
}


@ON_FAIL
@pytest.mark.parametrize("case", sorted(FRESHNESS_CASES))
def test_freshness_judges_the_newest_value(
    pg_conn: psycopg.Connection, pg_schema: str, case: str, on_fail: str
) -> None:
    pg_type, as_value = FRESHNESS_CASES[case]
    newest = _two_hours_ago()
    rows = [(1, as_value(newest)), (2, as_value(newest - timedelta(days=3))), (3, None)]
    if pg_type == "text":
        rows.append((4, ""))  # '' is published as NULL: it must not break the cast
    staging = stage(pg_conn, pg_schema, [("id", "bigint"), ("created_at", pg_type)], rows)
    text_columns = ["created_at"] if pg_type == "text" else []
    check = {"type": "freshness", "column": "created_at", "on_fail": on_fail}

    fresh = probe_one(pg_conn, staging, pg_schema, text_columns, within_hours=24, **check)
    stale = probe_one(pg_conn, staging, pg_schema, text_columns, within_hours=1, **check)

    assert fresh.check == stale.check == "freshness:created_at"
    assert (fresh.ok, fresh.on_fail) == (True, on_fail)
    assert (stale.ok, stale.on_fail) == (False, on_fail)
    observed = datetime.fromisoformat(fresh.observed)
    assert observed.utcoffset() == timedelta(0)
    assert abs(observed - newest) < timedelta(milliseconds=1)
    assert stale.observed == fresh.observed
    assert fresh.message.startswith(f"freshness(created_at): newest value {fresh.observed} is 2")
    assert fresh.message.endswith("old (allowed: 24 hours)")
    assert stale.message.endswith("old (allowed: 1 hour)")


@ON_FAIL
def test_freshness_on_a_date_column(
    pg_conn: psycopg.Connection, pg_schema: str, on_fail: str
) -> None:
    day = date.today() - timedelta(days=2)
    staging = stage(
        pg_conn, pg_schema, [("day", "date")], [(day,), (day - timedelta(days=9),), (None,)]
    )
    check = {"type": "freshness", "column": "day", "on_fail": on_fail}
    fresh = probe_one(pg_conn, staging, pg_schema, within_hours=24 * 5, **check)
    stale = probe_one(pg_conn, staging, pg_schema, within_hours=24, **check)
    assert (fresh.ok, fresh.observed, fresh.on_fail) == (True, day.isoformat(), on_fail)
    assert (stale.ok, stale.observed, stale.on_fail) == (False, day.isoformat(), on_fail)
    assert f"newest value {day.isoformat()} is" in stale.message
    assert "(allowed: 24 hours)" in stale.message


def test_freshness_with_no_values_fails(pg_conn: psycopg.Connection, pg_schema: str) -> None:
    staging = stage(pg_conn, pg_schema, [("created_at", "text")], [(None,), ("",)])
    result = probe_one(
        pg_conn,
        staging,
        pg_schema,
        ["created_at"],
        type="freshness",
        column="created_at",
        within_hours=1,
        on_fail="warn",
    )
    assert (result.ok, result.observed) == (False, None)
    assert result.message == "freshness(created_at): no values in created_at to judge freshness"


def test_freshness_text_that_is_not_a_timestamp_is_refused(
    pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    staging = stage(pg_conn, pg_schema, [("created_at", "text")], [("2024-05-01",), ("soon",)])
    with pytest.raises(ValidationFailed) as caught:
        probe_one(
            pg_conn,
            staging,
            pg_schema,
            ["created_at"],
            type="freshness",
            column="created_at",
            within_hours=1,
        )
    assert caught.value.reason.startswith("validator freshness:created_at could not run")
    assert '"soon"' in caught.value.reason
    assert "ISO 8601" in (caught.value.hint or "")


def test_freshness_on_an_undeclared_text_column_still_casts(
    pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    newest = _two_hours_ago()
    staging = stage(pg_conn, pg_schema, [("at", "text")], [(newest.isoformat(),), ("",)])
    result = probe_one(pg_conn, staging, pg_schema, type="freshness", column="at", within_hours=3)
    assert result.ok
    assert abs(datetime.fromisoformat(result.observed) - newest) < timedelta(milliseconds=1)


def test_freshness_on_a_number_column_is_refused(
    pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    staging = stage(pg_conn, pg_schema, [("n", "bigint")], [(1,)])
    with pytest.raises(ValidationFailed) as caught:
        probe_one(pg_conn, staging, pg_schema, type="freshness", column="n", within_hours=1)
    assert caught.value.reason == (
        "validator freshness:n could not run on the staged rows: column 'n' has type bigint; "
        "freshness needs a timestamp, a date or text holding ISO 8601 timestamps"
    )


def test_fk_integrity_across_types_that_cannot_be_compared(
    pg_conn: psycopg.Connection, pg_schema: str, customers: sql.Identifier
) -> None:
    staging = stage(pg_conn, pg_schema, [("customer_id", "text")], [("1",)])
    with pytest.raises(ValidationFailed) as caught:
        probe_one(
            pg_conn,
            staging,
            pg_schema,
            ["customer_id"],
            type="fk_integrity",
            column="customer_id",
            ref_table="customers",
            ref_column="id",
        )
    assert "operator does not exist: bigint = text" in caught.value.reason
    assert "cast the column in a transform" in (caught.value.hint or "")


# --------------------------------------------------------------- fk_integrity


@pytest.fixture
def customers(pg_conn: psycopg.Connection, pg_schema: str) -> sql.Identifier:
    return create_table(pg_conn, pg_schema, "customers", [("id", "bigint")], [(1,), (2,), (3,)])


@ON_FAIL
@pytest.mark.parametrize("qualified", [False, True], ids=["unqualified", "schema-qualified"])
def test_fk_integrity_passes_when_every_value_matches(
    pg_conn: psycopg.Connection,
    pg_schema: str,
    customers: sql.Identifier,
    on_fail: str,
    qualified: bool,
) -> None:
    staging = stage(pg_conn, pg_schema, [("customer_id", "bigint")], [(1,), (2,), (2,), (None,)])
    ref, default = (f"{pg_schema}.customers", "public") if qualified else ("customers", pg_schema)
    result = probe_one(
        pg_conn,
        staging,
        default,
        type="fk_integrity",
        column="customer_id",
        ref_table=ref,
        ref_column="id",
        on_fail=on_fail,
    )
    assert result == ProbeResult(
        "fk_integrity:customer_id",
        on_fail,
        True,
        f"fk_integrity(customer_id): every value has a match in {pg_schema}.customers(id)",
        0,
    )


@ON_FAIL
@pytest.mark.parametrize("qualified", [False, True], ids=["unqualified", "schema-qualified"])
def test_fk_integrity_counts_orphans_and_quotes_three(
    pg_conn: psycopg.Connection,
    pg_schema: str,
    customers: sql.Identifier,
    on_fail: str,
    qualified: bool,
) -> None:
    values = [1, 4, 5, 5, 6, 7, None]
    staging = stage(pg_conn, pg_schema, [("customer_id", "bigint")], [(v,) for v in values])
    ref, default = (f"{pg_schema}.customers", "public") if qualified else ("customers", pg_schema)
    result = probe_one(
        pg_conn,
        staging,
        default,
        type="fk_integrity",
        column="customer_id",
        ref_table=ref,
        ref_column="id",
        on_fail=on_fail,
    )
    assert (result.ok, result.observed, result.on_fail) == (False, 5, on_fail)
    assert result.message == (
        f"fk_integrity(customer_id): 5 values with no match in {pg_schema}.customers(id) "
        "(e.g. '4', '5', '6')"
    )


def test_fk_integrity_with_a_missing_ref_table_names_it(
    pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    staging = stage(pg_conn, pg_schema, [("customer_id", "bigint")], [(1,)])
    with pytest.raises(ValidationFailed) as caught:
        probe_one(
            pg_conn,
            staging,
            pg_schema,
            type="fk_integrity",
            column="customer_id",
            ref_table="clients",
            ref_column="id",
        )
    reason, hint = caught.value.reason, caught.value.hint or ""
    assert reason == (
        "validator fk_integrity:customer_id could not run on the staged rows: "
        f'relation "{pg_schema}.clients" does not exist'
    )
    assert f"{pg_schema}.clients" in hint and "unqualified" in hint
    for noise in ("SELECT", "Traceback", "LINE", "\n"):
        assert noise not in reason + hint


# ------------------------------------------------------------- cardinality


@ON_FAIL
def test_cardinality(pg_conn: psycopg.Connection, pg_schema: str, on_fail: str) -> None:
    staging = stage(
        pg_conn, pg_schema, [("country", "text")], [("DE",), ("FR",), ("DE",), (None,), ("IT",)]
    )
    check = {"type": "cardinality", "column": "country", "on_fail": on_fail}
    enough = probe_one(pg_conn, staging, pg_schema, ["country"], min_distinct=3, **check)
    too_few = probe_one(pg_conn, staging, pg_schema, ["country"], min_distinct=4, **check)
    assert enough == ProbeResult(
        "cardinality:country",
        on_fail,
        True,
        "cardinality(country): 3 distinct values, expected at least 3",
        3,
    )
    assert (too_few.ok, too_few.observed, too_few.on_fail) == (False, 3, on_fail)
    assert too_few.message == "cardinality(country): 3 distinct values, expected at least 4"


# ------------------------------------------------------------ duplicate_key


@ON_FAIL
def test_duplicate_key_passes_on_unique_keys(
    pg_conn: psycopg.Connection, pg_schema: str, on_fail: str
) -> None:
    staging = stage(
        pg_conn, pg_schema, [("id", "bigint"), ("email", "text")], [(1, "a"), (1, "b"), (2, "a")]
    )
    result = probe_one(
        pg_conn, staging, pg_schema, type="duplicate_key", columns=["id", "email"], on_fail=on_fail
    )
    assert result == ProbeResult(
        "duplicate_key:id,email",
        on_fail,
        True,
        "duplicate_key(id, email): every key value appears once",
        0,
    )


@ON_FAIL
def test_duplicate_key_counts_repeated_keys(
    pg_conn: psycopg.Connection, pg_schema: str, on_fail: str
) -> None:
    rows = [(9, "c"), (7, "a"), (7, "a"), (8, "b"), (8, "b"), (8, "b"), (7, "z")]
    staging = stage(pg_conn, pg_schema, [("id", "bigint"), ("email", "text")], rows)
    pair = probe_one(
        pg_conn, staging, pg_schema, type="duplicate_key", columns=["id", "email"], on_fail=on_fail
    )
    assert (pair.ok, pair.observed, pair.on_fail) == (False, 2, on_fail)
    assert pair.message == (
        "duplicate_key(id, email): 2 key values appear more than once (e.g. id=7, email=a)"
    )
    single = probe_one(pg_conn, staging, pg_schema, type="duplicate_key", columns=["id"])
    assert (single.check, single.observed) == ("duplicate_key:id", 2)
    assert single.message == "duplicate_key(id): 2 key values appear more than once (e.g. id=7)"
    [one] = probe_staged(
        pg_conn,
        stage(pg_conn, pg_schema, [("k", "integer")], [(1,), (1,)], table="one_dup"),
        [validator(type="duplicate_key", columns=["k"])],
        default_schema=pg_schema,
    )
    assert one.message == "duplicate_key(k): 1 key value appears more than once (e.g. k=1)"


# ---------------------------------------------------- '' is NULL in text columns


def test_empty_strings_count_as_null_in_text_columns(
    pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    create_table(pg_conn, pg_schema, "codes", [("code", "text")], [("A",), ("B",)])
    staging = stage(
        pg_conn,
        pg_schema,
        [("id", "bigint"), ("code", "text")],
        [(1, "A"), (1, ""), (1, ""), (2, "B"), (3, "")],
    )
    checks = [
        validator(type="cardinality", column="code", min_distinct=3),
        validator(type="duplicate_key", columns=["id", "code"]),
        validator(type="fk_integrity", column="code", ref_table="codes", ref_column="code"),
    ]

    as_loaded = probe_staged(
        pg_conn, staging, checks, default_schema=pg_schema, text_columns=["code"]
    )
    raw = probe_staged(pg_conn, staging, checks, default_schema=pg_schema)

    assert [(r.check, r.ok, r.observed) for r in as_loaded] == [
        ("cardinality:code", False, 2),
        ("duplicate_key:id,code", True, 0),
        ("fk_integrity:code", True, 0),
    ]
    assert [(r.ok, r.observed) for r in raw] == [(True, 3), (False, 1), (False, 3)]


# ------------------------------------------------------------ transactions


def _all_checks(schema: str) -> list[Any]:
    return [
        validator(type="row_count", min=1),
        validator(type="freshness", column="at", within_hours=1),
        validator(type="fk_integrity", column="id", ref_table="refs", ref_column="id"),
        validator(type="cardinality", column="id", min_distinct=1),
        validator(type="duplicate_key", columns=["id"]),
    ]


def test_probes_leave_the_load_transaction_usable(
    pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    create_table(pg_conn, pg_schema, "refs", [("id", "bigint")], [(1,), (2,)])
    target = create_table(pg_conn, pg_schema, "target", [("id", "bigint")])
    staging = stage(
        pg_conn, pg_schema, [("id", "bigint"), ("at", "timestamptz")], [(1, _two_hours_ago())]
    )
    # The caller's connection has its own row factory and is mid-transaction.
    with psycopg.connect(pg_url, row_factory=dict_row) as conn:
        conn.execute(sql.SQL("INSERT INTO {} VALUES (1)").format(target))
        results = probe_staged(conn, staging, _all_checks(pg_schema), default_schema=pg_schema)
        assert [r.ok for r in results] == [True, False, True, True, True]
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS

        with pytest.raises(ValidationFailed):
            probe_staged(
                conn,
                staging,
                [validator(type="cardinality", column="nope", min_distinct=1)],
                default_schema=pg_schema,
            )
        # The failed probe was rolled back to its savepoint: the transaction goes on.
        conn.execute(sql.SQL("INSERT INTO {} VALUES (2)").format(target))
        conn.commit()

    ids = pg_conn.execute(sql.SQL("SELECT id FROM {} ORDER BY id").format(target)).fetchall()
    assert ids == [(1,), (2,)]


def test_no_validators_run_no_sql(pg_conn: psycopg.Connection, pg_schema: str) -> None:
    missing = sql.Identifier(pg_schema, "never_created")
    assert probe_staged(pg_conn, missing, [], default_schema=pg_schema) == []


def test_a_missing_column_is_a_readable_failure(
    pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    staging = stage(pg_conn, pg_schema, [("id", "bigint")], [(1,)])
    with pytest.raises(ValidationFailed) as caught:
        probe_one(pg_conn, staging, pg_schema, type="duplicate_key", columns=["id", "Email"])
    assert caught.value.reason == (
        "validator duplicate_key:id,Email could not run on the staged rows: "
        'column "Email" does not exist'
    )
    assert "case-sensitive" in (caught.value.hint or "")


# ------------------------------------------------------------ odd identifiers


def test_quoted_identifiers(pg_conn: psycopg.Connection, pg_schema: str) -> None:
    order_id, created, country = "Order Id", 'Created "At"', "Land Ü"
    create_table(pg_conn, pg_schema, 'Ref "Orders"', [(order_id, "bigint")], [(1,), (2,)])
    staging = stage(
        pg_conn,
        pg_schema,
        [(order_id, "bigint"), (created, "text"), (country, "text")],
        [(1, _two_hours_ago().isoformat(), "DE"), (1, "", "FR"), (3, None, "")],
        table='Staged "Rows" Ü',
    )
    checks = [
        validator(type="row_count", min=3, max=3),
        validator(type="freshness", column=created, within_hours=3),
        validator(
            type="fk_integrity",
            column=order_id,
            ref_table=f'{pg_schema}.Ref "Orders"',
            ref_column=order_id,
        ),
        validator(type="cardinality", column=country, min_distinct=2),
        validator(type="duplicate_key", columns=[order_id]),
    ]
    results = probe_staged(
        pg_conn, staging, checks, default_schema=pg_schema, text_columns=[created, country]
    )
    assert [(r.check, r.ok, r.observed) for r in results[:1] + results[2:]] == [
        ("row_count", True, 3),
        ("fk_integrity:Order Id", False, 1),
        ("cardinality:Land Ü", True, 2),
        ("duplicate_key:Order Id", False, 1),
    ]
    assert results[1].check == 'freshness:Created "At"' and results[1].ok
    assert results[2].message.endswith("(e.g. '3')")
    assert results[4].message.endswith("(e.g. Order Id=1)")


def test_check_ids_are_stable() -> None:
    assert [validator_check_id(v) for v in _all_checks("s")] == [
        "row_count",
        "freshness:at",
        "fk_integrity:id",
        "cardinality:id",
        "duplicate_key:id",
    ]
    result = ProbeResult("row_count", "warn", False, "m", 3)
    assert result.as_dict() == {
        "check": "row_count",
        "on_fail": "warn",
        "ok": False,
        "message": "m",
        "observed": 3,
    }
