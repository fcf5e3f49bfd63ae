"""The load modes' SQL, run inside the commit transaction: from the staging table into the target.

Every mode inserts with an explicit column list, the columns present in both the
staging table and the target, in the target's order. (Empty strings bound for a
text-like target column were staged as NULL already: see `client.py`.) blue_green's
swap lives in `swap.py`; the transaction around all of this in `client.py`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import sql
from psycopg.rows import tuple_row

from hakiri.destinations.base import LoadRequest, TargetColumn
from hakiri.destinations.commit_checks import (
    DUPLICATE_EXAMPLES,
    check_upsert_key,
    duplicate_keys_error,
)
from hakiri.destinations.postgres.ledger import WatermarkStore
from hakiri.destinations.postgres.names import derived_name, mark_table, utc_now
from hakiri.errors import LoadError
from hakiri.quality.validators import repeated_keys

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "LoadContext",
    "backup_target",
    "create_target",
    "insert_from_staging",
    "is_text_type",
    "load_incremental_watermark",
    "load_truncate",
    "load_upsert",
    "refuse_repeated_keys",
]

_NUMERIC_TYPES = ("smallint", "integer", "bigint", "numeric", "real", "double precision")
_TEMPORAL_TYPES = ("date", "timestamp")


def is_text_type(pg_type: str) -> bool:
    """text, varchar(n), char(n) (as format_type spells them), and citext."""
    return pg_type in ("text", "citext") or pg_type.startswith("character")


@dataclass(frozen=True)
class LoadContext:
    """One commit's view of the target and the staging table (inside the commit transaction)."""

    conn: psycopg.Connection[Any]
    request: LoadRequest
    schema: str
    staging_table: sql.Identifier
    target_oid: int
    target_columns: tuple[TargetColumn, ...]
    staged_columns: tuple[TargetColumn, ...]

    @property
    def table(self) -> str:
        return self.request.target_table

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.table}"

    @property
    def target(self) -> sql.Identifier:
        return sql.Identifier(self.schema, self.table)

    def columns(self) -> list[TargetColumn]:
        """Target columns that the staging table also has, in the target's order."""
        staged = {column.name for column in self.staged_columns}
        shared = [column for column in self.target_columns if column.name in staged]
        if not shared:
            raise LoadError(
                f"none of the staged columns exists in the target {self.qualified}",
                "check the target table (or rename the columns in a transform so they match)",
            )
        return shared

    def column_type(self, name: str) -> str | None:
        return next((c.type for c in self.target_columns if c.name == name), None)


def create_target(
    conn: psycopg.Connection[Any],
    schema: str,
    table: str,
    staged: Sequence[TargetColumn],
    key: Sequence[str] | None,
) -> tuple[TargetColumn, ...]:
    """CREATE TABLE from the staged columns; PRIMARY KEY (key) when an upsert key is set."""
    names = {column.name for column in staged}
    missing = [k for k in key or () if k not in names]
    if missing:
        raise LoadError(
            f"upsert_key column {missing[0]!r} is not among the staged columns for {schema}.{table}",
            "fix `upsert_key`, or select that column in the pipeline's transforms",
        )
    keyed = set(key or ())
    body: list[sql.Composable] = [
        sql.SQL("{} {}{}").format(
            sql.Identifier(column.name),
            sql.SQL(column.type),
            sql.SQL(" NOT NULL") if column.name in keyed else sql.SQL(""),
        )
        for column in staged
    ]
    if key:
        body.append(
            sql.SQL("PRIMARY KEY ({})").format(sql.SQL(", ").join(map(sql.Identifier, key)))
        )
    conn.execute(
        sql.SQL("CREATE TABLE {} ({})").format(
            sql.Identifier(schema, table), sql.SQL(", ").join(body)
        )
    )
    return tuple(TargetColumn(c.name, c.type, c.name not in keyed) for c in staged)


def backup_target(ctx: LoadContext) -> str:
    """Copy the target's rows into `<t>_backup_<UTC yyyymmddHHMMSS>` (data only); its name."""
    stamp = utc_now().strftime("%Y%m%d%H%M%S")
    name = derived_name(ctx.table, f"_backup_{stamp}")
    attempt = 1
    while relation_exists(ctx.conn, ctx.schema, name):
        attempt += 1
        name = derived_name(ctx.table, f"_backup_{stamp}_{attempt}")
    backup = sql.Identifier(ctx.schema, name)
    ctx.conn.execute(sql.SQL("CREATE TABLE {} AS TABLE {}").format(backup, ctx.target))
    mark_table(ctx.conn, backup, "backup", ctx.request)
    return name


def relation_exists(conn: psycopg.Connection[Any], schema: str, table: str) -> bool:
    """Does any relation (table, view, index, sequence) with this name exist in the schema?"""
    row = conn.execute(
        "SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = %s AND c.relname = %s",
        (schema, table),
    ).fetchone()
    return row is not None


def insert_from_staging(
    ctx: LoadContext,
    into: sql.Composable | None = None,
    *,
    where: sql.Composable | None = None,
    on_conflict: sql.Composable | None = None,
) -> int:
    """INSERT INTO target (shared columns) SELECT … FROM staging; the number of rows inserted/updated."""
    columns = ctx.columns()
    return ctx.conn.execute(_insert_sql(ctx, columns, into, where, on_conflict)).rowcount


def _insert_sql(
    ctx: LoadContext,
    columns: Sequence[TargetColumn],
    into: sql.Composable | None,
    where: sql.Composable | None,
    tail: sql.Composable | None,
) -> sql.Composed:
    names = sql.SQL(", ").join(sql.Identifier(c.name) for c in columns)
    return sql.SQL("INSERT INTO {} ({}) SELECT {} FROM {}{}{}").format(
        into or ctx.target,
        names,
        names,
        ctx.staging_table,
        sql.SQL(" WHERE {}").format(where) if where is not None else sql.SQL(""),
        sql.SQL(" {}").format(tail) if tail is not None else sql.SQL(""),
    )


def load_truncate(ctx: LoadContext) -> int:
    # In the commit transaction: a failed insert rolls the TRUNCATE back with it.
    ctx.conn.execute(sql.SQL("TRUNCATE TABLE {}").format(ctx.target))
    return insert_from_staging(ctx)


def refuse_repeated_keys(ctx: LoadContext) -> None:
    """Refuse the batch when its upsert key repeats among the staged rows, before deletes or
    upserts write anything (ON CONFLICT would stop at the second row with an error naming
    neither the key nor the file)."""
    key = check_upsert_key(
        ctx.request.load,
        [c.name for c in ctx.staged_columns],
        [c.name for c in ctx.target_columns],
        ctx.qualified,
    )
    text = {c.name for c in ctx.staged_columns if is_text_type(c.type)}
    with ctx.conn.cursor(row_factory=tuple_row) as cur:
        repeated, examples = repeated_keys(cur, ctx.staging_table, key, text, DUPLICATE_EXAMPLES)
    if repeated:
        raise duplicate_keys_error(key, examples, repeated, ctx.request.source_label)


def load_upsert(ctx: LoadContext, *, keys_checked: bool = False, update: bool = True) -> int:
    """INSERT … ON CONFLICT (key) DO UPDATE (DO NOTHING without `update`) from the staging
    table; the rows written. A key repeated among the staged rows is refused
    (`refuse_repeated_keys`): looked for only when PostgreSQL stops the upsert at one (a second
    update of a row in one command), since counting the staged keys first costs as much as a
    quarter of the upsert."""
    key = list(
        check_upsert_key(
            ctx.request.load,
            [c.name for c in ctx.staged_columns],
            [c.name for c in ctx.target_columns],
            ctx.qualified,
        )
    )
    columns = ctx.columns()
    updated = [c.name for c in columns if c.name not in key] if update else []
    if not _has_unique_index_on(ctx, key):
        raise LoadError(
            f"upsert into {ctx.qualified} needs a unique constraint on {key}, and the target has none",
            "add one: ALTER TABLE … ADD PRIMARY KEY (…) or CREATE UNIQUE INDEX … ON … (…)",
        )
    if not updated:
        # The source sends only the key (its other columns were dropped), or the mode keeps
        # rows already there: new keys are inserted, the others keep their values.
        # DO NOTHING would skip a repeated key's second row without a word: look first.
        if not keys_checked:
            refuse_repeated_keys(ctx)
        do_nothing = sql.SQL("ON CONFLICT ({}) DO NOTHING").format(
            sql.SQL(", ").join(map(sql.Identifier, key))
        )
        return ctx.conn.execute(_insert_sql(ctx, columns, None, None, do_nothing)).rowcount
    on_conflict = sql.SQL("ON CONFLICT ({}) DO UPDATE SET {}").format(
        sql.SQL(", ").join(map(sql.Identifier, key)),
        sql.SQL(", ").join(
            sql.SQL("{} = EXCLUDED.{}").format(sql.Identifier(name), sql.Identifier(name))
            for name in updated
        ),
    )
    try:
        with ctx.conn.transaction():  # a savepoint: the error below leaves the load usable
            return ctx.conn.execute(_insert_sql(ctx, columns, None, None, on_conflict)).rowcount
    except psycopg.errors.CardinalityViolation:
        refuse_repeated_keys(ctx)  # raises, naming the keys and the source
        raise


# A unique, non-partial, non-expression, non-deferrable index whose key columns are exactly
# the upsert key (in any order): what ON CONFLICT (key) can use as its arbiter.
_UNIQUE_ON = """
SELECT EXISTS (
  SELECT 1 FROM pg_catalog.pg_index i
  WHERE i.indrelid = %(oid)s AND i.indisunique AND i.indimmediate
    AND i.indpred IS NULL AND i.indexprs IS NULL
    AND i.indnkeyatts = cardinality(%(key)s::text[])
    AND (SELECT array_agg(a.attname::text ORDER BY a.attname::text)
         FROM unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord)
         JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
         WHERE k.ord <= i.indnkeyatts)
        = (SELECT array_agg(x ORDER BY x) FROM unnest(%(key)s::text[]) AS x)
)
"""


def _has_unique_index_on(ctx: LoadContext, key: Sequence[str]) -> bool:
    row = ctx.conn.execute(_UNIQUE_ON, {"oid": ctx.target_oid, "key": list(key)}).fetchone()
    return bool(row and row[0])


def load_incremental_watermark(ctx: LoadContext) -> tuple[int, str | None]:
    """Insert the staged rows past the high-water mark and advance the mark; (rows, new mark)."""
    column = ctx.request.load.watermark_column
    if not column:
        raise LoadError(
            f"load mode incremental_watermark into {ctx.qualified} needs `watermark_column`",
            "set `watermark_column` (e.g. updated_at) in [pipeline.load]",
        )
    pg_type = ctx.column_type(column)
    if pg_type is None:
        raise LoadError(
            f"watermark_column {column!r} does not exist in the target {ctx.qualified}",
            "fix `watermark_column`, or add the column to the target",
        )
    if column not in {c.name for c in ctx.staged_columns}:
        raise LoadError(
            f"watermark_column {column!r} is not among the staged columns for {ctx.qualified}",
            "select that column in the pipeline's transforms",
        )
    store = WatermarkStore(ctx.conn)
    mark = store.read(ctx.request, ctx.schema)
    if mark is None:
        mark = _first_mark(ctx, column, pg_type)
    ident = sql.Identifier(column)
    where = sql.SQL("{} > CAST({} AS {})").format(ident, sql.Literal(mark), sql.SQL(pg_type))
    insert = _insert_sql(ctx, ctx.columns(), None, where, sql.SQL("RETURNING {}").format(ident))
    row = ctx.conn.execute(
        sql.SQL("WITH loaded AS ({}) SELECT count(*), max({})::text FROM loaded").format(
            insert, ident
        )
    ).fetchone()
    rows, loaded_max = (int(row[0]), row[1]) if row else (0, None)
    new_mark = loaded_max if loaded_max is not None else mark
    store.write(ctx.request, ctx.schema, new_mark, pg_type)
    return rows, new_mark


def _first_mark(ctx: LoadContext, column: str, pg_type: str) -> str:
    """No mark yet: MAX(col) of the target (so history is not replayed), else the type's floor."""
    row = ctx.conn.execute(
        sql.SQL("SELECT max({})::text FROM {}").format(sql.Identifier(column), ctx.target)
    ).fetchone()
    if row and row[0] is not None:
        return str(row[0])
    if pg_type.startswith(_TEMPORAL_TYPES):
        return "0001-01-01"
    if pg_type.startswith(_NUMERIC_TYPES):
        return "0"
    if is_text_type(pg_type):
        return ""
    raise LoadError(
        f"watermark_column {column!r} of {ctx.qualified} has type {pg_type}, which has no order to filter by",
        "use a number, date or timestamp column as `watermark_column`",
    )
