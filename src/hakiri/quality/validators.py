"""Dataset validators as SQL probes on the staged rows, inside the load transaction.

Write-audit-publish: the rows are staged, each validator is ONE small SELECT
over the staging table (composed with `psycopg.sql`), and the verdict is judged
here in Python on that one result row. The probes run on the caller's
connection, in its open transaction, under a savepoint that is released on
success: they never commit, roll back the caller's work, or change the session.

Text columns are read as `NULLIF(col, '')`, as the load publishes them (the
destination stages an empty string bound for a text column as NULL already; the
NULLIF keeps probes of any staging table to that rule).

A probe that cannot run (a missing column or ref_table, a freshness column that
is not a timestamp) raises `ValidationFailed` naming the validator and the
server's one-line reason. A lost connection or a lock conflict is re-raised as
the driver's error, for the destination's own error boundary to report.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from typing import TYPE_CHECKING, Any

from psycopg import sql

from hakiri.errors import ValidationFailed
from hakiri.quality.verdicts import (
    COLUMN_NAMES_HINT,
    EXAMPLE_LIMIT,
    UNCOMPARABLE_HINT,
    ProbeResult,
    fk_column_hint,
    fk_uncomparable_hint,
    freshness_text_hint,
    judge_cardinality,
    judge_duplicate_key,
    judge_fk_integrity,
    judge_freshness,
    judge_row_count,
    not_a_timestamp,
    probe_failed,
    validator_check_id,
)
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

__all__ = ["ProbeResult", "probe_staged", "repeated_keys", "validator_check_id"]

_TIMESTAMP_TYPES = frozenset({"timestamp with time zone", "timestamp without time zone", "date"})
_TEXT_TYPES = frozenset({"text", "character varying", "character"})


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
        return judge_row_count(v, int(rows))

    def freshness(
        self, cur: psycopg.Cursor[Any], v: FreshnessValidator, *, as_text: bool = False
    ) -> ProbeResult:
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
            raise not_a_timestamp(v, pg_type)
        return judge_freshness(v, newest, now)

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
        return judge_fk_integrity(
            v, int(orphans), examples, f"{ref_schema}.{ref_table}({v.ref_column})"
        )

    def cardinality(self, cur: psycopg.Cursor[Any], v: CardinalityValidator) -> ProbeResult:
        query = sql.SQL("SELECT count(DISTINCT {}) FROM {}").format(
            self.value(v.column), self.staging
        )
        return judge_cardinality(v, int(_one(cur, query)[0]))

    def duplicate_key(self, cur: psycopg.Cursor[Any], v: DuplicateKeyValidator) -> ProbeResult:
        repeated, examples = repeated_keys(cur, self.staging, v.columns, self.text_columns, 1)
        if not repeated:
            return judge_duplicate_key(v, 0, None)
        return judge_duplicate_key(v, repeated, examples[0][0])


def repeated_keys(
    cur: psycopg.Cursor[Any],
    staging: sql.Identifier,
    columns: Sequence[str],
    text_columns: Collection[str],
    limit: int,
) -> tuple[int, list[tuple[list[str | None], int]]]:
    """How many key values appear more than once among the staged rows, and the first
    `limit` of them in key order (as text, with their row counts). Keys are compared as
    the load publishes them ('' is NULL in text columns); a key with a NULL part is no key
    (as for a UNIQUE constraint: not_null rules are the place to refuse NULL keys)."""
    values = [
        sql.SQL("NULLIF({}, {})").format(sql.Identifier(c), sql.Literal(""))
        if c in text_columns
        else sql.Identifier(c)
        for c in columns
    ]
    keys = [sql.Identifier(f"k{i}") for i in range(len(columns))]
    query = sql.SQL(
        "SELECT count(*) OVER (), n, {texts} FROM ("
        "SELECT {aliased}, count(*) AS n FROM {staging} WHERE {not_null} GROUP BY {values} "
        "HAVING count(*) > 1) d ORDER BY {keys} LIMIT {limit}"
    ).format(
        texts=sql.SQL(", ").join(sql.SQL("{}::text").format(k) for k in keys),
        aliased=sql.SQL(", ").join(
            sql.SQL("{} AS {}").format(value, key) for value, key in zip(values, keys, strict=True)
        ),
        staging=staging,
        not_null=sql.SQL(" AND ").join(sql.SQL("{} IS NOT NULL").format(x) for x in values),
        values=sql.SQL(", ").join(values),
        keys=sql.SQL(", ").join(keys),
        limit=sql.Literal(limit),
    )
    rows = cur.execute(query).fetchall()
    if not rows:
        return 0, []
    return int(rows[0][0]), [(list(row[2:]), int(row[1])) for row in rows]


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
        raise probe_failed(
            validator, _first_line(exc), _hint(exc, validator, default_schema)
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
            return fk_column_hint(validator)
        return COLUMN_NAMES_HINT
    if isinstance(exc, e.InsufficientPrivilege):
        return "grant the loading role SELECT on the table named above"
    if isinstance(exc, e.UndefinedFunction | e.DatatypeMismatch):
        if isinstance(validator, FkIntegrityValidator):
            return fk_uncomparable_hint(validator)
        return UNCOMPARABLE_HINT
    if isinstance(exc, e.DataError) and isinstance(validator, FreshnessValidator):
        return freshness_text_hint(validator)
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


def _split_table(name: str, default_schema: str) -> tuple[str, str]:
    """'schema.table' (split on the first dot) or 'table' in the default schema."""
    schema, dot, table = name.partition(".")
    return (schema, table) if dot else (default_schema, name)
