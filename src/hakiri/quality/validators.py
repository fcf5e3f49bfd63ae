"""Dataset validators as SQL probes on the staged rows, inside the load transaction.

Write-audit-publish: the rows are staged, each validator is ONE small SELECT
over the staging table (composed with `psycopg.sql`), and the verdict is judged
here in Python on that one result row. The probes run on the caller's
connection, in its open transaction, under a savepoint that is released on
success: they never commit, roll back the caller's work, or change the session.

Text columns are read as `NULLIF(col, '')`, because that is what the load
publishes: a probe sees the rows as they will land in the target.

A probe that cannot run (a missing column or ref_table, a freshness column that
is not a timestamp) raises `ValidationFailed` naming the validator and the
server's one-line reason. A lost connection or a lock conflict is re-raised as
the driver's error, for the destination's own error boundary to report.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, dataclass
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any

from psycopg import sql

from hakiri.errors import ValidationFailed
from hakiri.spec.quality import (
    CardinalityValidator,
    DatasetValidator,
    DuplicateKeyValidator,
    FkIntegrityValidator,
    FreshnessValidator,
    RowCountValidator,
)

if TYPE_CHECKING:
    import psycopg

__all__ = ["ProbeResult", "probe_staged", "validator_check_id"]

EXAMPLE_LIMIT = 3  # orphan values quoted in an fk_integrity message

_TIMESTAMP_TYPES = frozenset({"timestamp with time zone", "timestamp without time zone", "date"})
_TEXT_TYPES = frozenset({"text", "character varying", "character"})


@dataclass(frozen=True)
class ProbeResult:
    """The verdict of one dataset validator on the staged rows."""

    check: str  # stable short id: 'row_count', 'freshness:created_at', 'duplicate_key:id,email'
    on_fail: str  # 'abort' | 'warn', carried from the validator
    ok: bool
    message: str  # one line for the user, naming the numbers
    observed: Any  # JSON-able: the count, ISO timestamp or distinct count measured

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def validator_check_id(validator: DatasetValidator) -> str:
    """'row_count', 'freshness:<column>', 'fk_integrity:<column>', 'cardinality:<column>',
    'duplicate_key:<c1>,<c2>'."""
    if isinstance(validator, RowCountValidator):
        return "row_count"
    if isinstance(validator, DuplicateKeyValidator):
        return "duplicate_key:" + ",".join(validator.columns)
    return f"{validator.type}:{validator.column}"


def probe_staged(
    conn: psycopg.Connection[Any],
    staging: sql.Identifier,
    validators: Sequence[DatasetValidator],
    *,
    default_schema: str,
    text_columns: Collection[str] = (),
) -> list[ProbeResult]:
    """Run every validator against the staging table; one ProbeResult each, in order.

    `staging` is the (schema-qualified) staging table; an unqualified `ref_table`
    is looked up in `default_schema`; `text_columns` are the staged text columns,
    whose '' the load publishes as NULL.
    """
    if not validators:
        return []
    from psycopg.rows import tuple_row

    probe = _Probe(staging, frozenset(text_columns), default_schema)
    results: list[ProbeResult] = []
    # A cursor of our own: the caller's row factory must not change what we read.
    with _savepoint(conn), conn.cursor(row_factory=tuple_row) as cur:
        for validator in validators:
            with _reported_as(validator, default_schema):
                results.append(probe.run(cur, validator))
    return results


# ---------------------------------------------------------------------- probes


class _Probe:
    def __init__(self, staging: sql.Identifier, text_columns: frozenset[str], default_schema: str):
        self.staging = staging
        self.text_columns = text_columns
        self.default_schema = default_schema

    def run(self, cur: psycopg.Cursor[Any], validator: DatasetValidator) -> ProbeResult:
        if isinstance(validator, RowCountValidator):
            return self.row_count(cur, validator)
        if isinstance(validator, FreshnessValidator):
            return self.freshness(cur, validator)
        if isinstance(validator, FkIntegrityValidator):
            return self.fk_integrity(cur, validator)
        if isinstance(validator, CardinalityValidator):
            return self.cardinality(cur, validator)
        return self.duplicate_key(cur, validator)

    def value(self, column: str, *, as_text: bool = False) -> sql.Composable:
        """A staged column as the load will publish it: '' is NULL in text columns."""
        if as_text or column in self.text_columns:
            return sql.SQL("NULLIF({}, {})").format(sql.Identifier(column), sql.Literal(""))
        return sql.Identifier(column)

    def row_count(self, cur: psycopg.Cursor[Any], v: RowCountValidator) -> ProbeResult:
        rows = _one(cur, sql.SQL("SELECT count(*) FROM {}").format(self.staging))[0]
        too_few = v.min is not None and rows < v.min
        too_many = v.max is not None and rows > v.max
        message = f"row_count: {_rows(rows)}, expected {_bounds(v.min, v.max)}"
        return _result(v, not (too_few or too_many), message, int(rows))

    def freshness(
        self, cur: psycopg.Cursor[Any], v: FreshnessValidator, *, as_text: bool = False
    ) -> ProbeResult:
        label = f"freshness({v.column})"
        expr = self.value(v.column, as_text=as_text)
        if as_text or v.column in self.text_columns:
            # ISO strings: compare as instants (an offset-less value is read in the
            # session's time zone, which hakiri's connections set to UTC).
            expr = sql.SQL("({})::timestamptz").format(expr)
        newest, pg_type, now = _one(
            cur,
            sql.SQL("SELECT max({0}), pg_typeof(max({0}))::text, now() FROM {1}").format(
                expr, self.staging
            ),
        )
        if pg_type in _TEXT_TYPES and not as_text:
            return self.freshness(cur, v, as_text=True)
        if pg_type not in _TIMESTAMP_TYPES:
            raise ValidationFailed(
                f"validator {validator_check_id(v)} could not run on the staged rows: column "
                f"{v.column!r} has type {pg_type}; freshness needs a timestamp, a date or text "
                "holding ISO 8601 timestamps",
                "point the validator at a timestamp column, or cast the column in a transform",
            )
        if newest is None:
            return _result(v, False, f"{label}: no values in {v.column} to judge freshness", None)
        instant = _as_utc(newest)
        age_hours = (now - instant) / timedelta(hours=1)
        ok = instant >= now - timedelta(hours=v.within_hours)
        observed = newest.isoformat() if type(newest) is date else instant.isoformat()
        if age_hours >= 0:
            age = f"is {_hours(age_hours)} old"
        else:
            age = f"is {_hours(-age_hours)} in the future"
        message = f"{label}: newest value {observed} {age} (allowed: {_hours(v.within_hours)})"
        return _result(v, ok, message, observed)

    def fk_integrity(self, cur: psycopg.Cursor[Any], v: FkIntegrityValidator) -> ProbeResult:
        ref_schema, ref_table = _split_table(v.ref_table, self.default_schema)
        ref = sql.Identifier(ref_schema, ref_table)
        # One statement: the orphan count, and a few distinct orphans to quote.
        query = sql.SQL(
            "WITH staged AS (SELECT {value} AS v FROM {staging}), "
            "orphans AS (SELECT s.v FROM staged s WHERE s.v IS NOT NULL "
            "AND NOT EXISTS (SELECT 1 FROM {ref} r WHERE r.{ref_column} = s.v)) "
            "SELECT (SELECT count(*) FROM orphans), "
            "ARRAY(SELECT DISTINCT v::text FROM orphans ORDER BY 1 LIMIT {limit})"
        ).format(
            value=self.value(v.column),
            staging=self.staging,
            ref=ref,
            ref_column=sql.Identifier(v.ref_column),
            limit=sql.Literal(EXAMPLE_LIMIT),
        )
        orphans, examples = _one(cur, query)
        target = f"{ref_schema}.{ref_table}({v.ref_column})"
        if orphans:
            shown = ", ".join(repr(e) for e in examples)
            message = (
                f"fk_integrity({v.column}): {_count(orphans, 'value')} with no match in {target} "
                f"(e.g. {shown})"
            )
        else:
            message = f"fk_integrity({v.column}): every value has a match in {target}"
        return _result(v, orphans == 0, message, int(orphans))

    def cardinality(self, cur: psycopg.Cursor[Any], v: CardinalityValidator) -> ProbeResult:
        query = sql.SQL("SELECT count(DISTINCT {}) FROM {}").format(
            self.value(v.column), self.staging
        )
        distinct = int(_one(cur, query)[0])
        message = (
            f"cardinality({v.column}): {_count(distinct, 'distinct value')}, "
            f"expected at least {v.min_distinct:,}"
        )
        return _result(v, distinct >= v.min_distinct, message, distinct)

    def duplicate_key(self, cur: psycopg.Cursor[Any], v: DuplicateKeyValidator) -> ProbeResult:
        keys = [sql.Identifier(c) for c in v.columns]
        values = [self.value(c) for c in v.columns]
        # A key with a NULL part is not a duplicate (as for a UNIQUE constraint);
        # not_null rules are the place to refuse NULL keys.
        query = sql.SQL(
            "SELECT count(*) OVER (), {texts} FROM ("
            "SELECT {aliased} FROM {staging} WHERE {not_null} GROUP BY {values} HAVING count(*) > 1"
            ") d ORDER BY {keys} LIMIT 1"
        ).format(
            texts=sql.SQL(", ").join(sql.SQL("{}::text").format(k) for k in keys),
            aliased=sql.SQL(", ").join(
                sql.SQL("{} AS {}").format(value, key)
                for value, key in zip(values, keys, strict=True)
            ),
            staging=self.staging,
            not_null=sql.SQL(" AND ").join(sql.SQL("{} IS NOT NULL").format(x) for x in values),
            values=sql.SQL(", ").join(values),
            keys=sql.SQL(", ").join(keys),
        )
        row = cur.execute(query).fetchone()
        label = f"duplicate_key({', '.join(v.columns)})"
        if row is None:
            return _result(v, True, f"{label}: every key value appears once", 0)
        duplicates, *example = row
        shown = ", ".join(f"{c}={x}" for c, x in zip(v.columns, example, strict=True))
        noun = "key value appears" if duplicates == 1 else "key values appear"
        message = f"{label}: {duplicates:,} {noun} more than once (e.g. {shown})"
        return _result(v, False, message, int(duplicates))


# ------------------------------------------------------------- driver boundary


@contextmanager
def _savepoint(conn: psycopg.Connection[Any]) -> Iterator[None]:
    """A savepoint inside the caller's open transaction (released on success, rolled back
    on error so the transaction stays usable); nothing when no transaction is open, so
    that we never COMMIT anything of the caller's."""
    from psycopg.pq import TransactionStatus

    in_transaction = conn.info.transaction_status == TransactionStatus.INTRANS
    with conn.transaction() if in_transaction else nullcontext():
        yield


@contextmanager
def _reported_as(validator: DatasetValidator, default_schema: str) -> Iterator[None]:
    import psycopg
    from psycopg import errors as e

    try:
        yield
    except psycopg.Error as exc:
        lost = exc.sqlstate is None or exc.sqlstate.startswith(("08", "57P"))
        if lost and isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
            raise  # the connection is gone: the destination's boundary reports that
        if isinstance(exc, e.LockNotAvailable | e.DeadlockDetected | e.SerializationFailure):
            raise  # transient: the caller may retry the whole transaction
        check = validator_check_id(validator)
        raise ValidationFailed(
            f"validator {check} could not run on the staged rows: {_first_line(exc)}",
            _hint(exc, validator, default_schema),
        ) from None


def _hint(exc: Exception, validator: DatasetValidator, default_schema: str) -> str:
    from psycopg import errors as e

    if isinstance(exc, e.UndefinedTable) and isinstance(validator, FkIntegrityValidator):
        schema, table = _split_table(validator.ref_table, default_schema)
        return (
            f"check ref_table {validator.ref_table!r}: it is read as {schema}.{table} "
            f"(an unqualified name is looked up in schema {default_schema!r}) and must exist "
            "before the load"
        )
    if isinstance(exc, e.UndefinedColumn):
        if isinstance(validator, FkIntegrityValidator):
            return (
                f"check that the rows have column {validator.column!r} and that "
                f"{validator.ref_table} has column {validator.ref_column!r} (names are case-sensitive)"
            )
        return "check the validator's column names against the rows being loaded (names are case-sensitive)"
    if isinstance(exc, e.InsufficientPrivilege):
        return "grant the loading role SELECT on the table named above"
    if isinstance(exc, e.UndefinedFunction | e.DatatypeMismatch):
        if isinstance(validator, FkIntegrityValidator):
            return (
                f"{validator.column} and {validator.ref_table}.{validator.ref_column} have types "
                "that cannot be compared: cast the column in a transform"
            )
        return "the column's type does not support this check: cast it in a transform"
    if isinstance(exc, e.DataError) and isinstance(validator, FreshnessValidator):
        return (
            f"{validator.column} must hold ISO 8601 timestamps (e.g. 2024-05-01T12:00:00Z): "
            "fix or cast the values in a transform"
        )
    if isinstance(exc, e.InFailedSqlTransaction):
        return "an earlier statement of the load transaction failed; fix that first"
    return "fix the validator in [pipeline.validate] or the rows it checks, then apply again"


def _first_line(exc: BaseException) -> str:
    diag = getattr(exc, "diag", None)
    primary = diag.message_primary if diag is not None else None
    lines = (primary or str(exc)).strip().splitlines()
    return lines[0].strip() if lines else type(exc).__name__


# ----------------------------------------------------------------------- small


def _one(cur: psycopg.Cursor[Any], query: sql.Composed) -> tuple[Any, ...]:
    row = cur.execute(query).fetchone()
    if row is None:  # pragma: no cover - an aggregate always returns one row
        raise ValidationFailed("a validator probe returned no row", "report this as a bug")
    return tuple(row)


def _result(validator: DatasetValidator, ok: bool, message: str, observed: Any) -> ProbeResult:
    return ProbeResult(validator_check_id(validator), validator.on_fail, ok, message, observed)


def _split_table(name: str, default_schema: str) -> tuple[str, str]:
    """'schema.table' (split on the first dot) or 'table' in the default schema."""
    schema, dot, table = name.partition(".")
    return (schema, table) if dot else (default_schema, name)


def _as_utc(value: datetime | date) -> datetime:
    """timestamptz as is; timestamp (no zone) and date (its midnight) read as UTC."""
    if not isinstance(value, datetime):
        return datetime(value.year, value.month, value.day, tzinfo=UTC)
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def _rows(n: int) -> str:
    return f"{n:,} row" if n == 1 else f"{n:,} rows"


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"


def _bounds(low: int | None, high: int | None) -> str:
    if low is not None and high is not None:
        return f"between {low:,} and {high:,}"
    if low is not None:
        return f"at least {low:,}"
    return f"at most {high:,}"


def _hours(hours: float) -> str:
    if math.isclose(hours, round(hours), abs_tol=0.05):
        whole = round(hours)
        return f"{whole:,} hour" if whole == 1 else f"{whole:,} hours"
    return f"{hours:,.1f} hours"
