"""Schema evolution of an existing PostgreSQL target: renamed, added, widened and retyped columns.

Everything runs in the caller's transaction, after an ACCESS EXCLUSIVE lock on the
target taken with a short lock_timeout (on a busy target psycopg's LockNotAvailable,
which the client's driver_errors turns into TransientLoadError and retries), so a
change is applied whole or not at all. The columns are read
under that lock, and a step another process already made is skipped rather than
failed: an added column that exists with the same type, a rename whose old column is
gone and whose new one exists, a type change already made.

Each type change is its own ALTER TABLE in a savepoint: PostgreSQL's conversion
errors ('invalid input syntax for type integer: "abc"') do not name the column, and
after a view blocks the change the catalog can still be asked which views those are.
The price: a table with several type changes is rewritten once per rewriting change.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from psycopg import sql

from hakiri.destinations.base import ColumnRetype, SchemaChange, TargetColumn
from hakiri.destinations.postgres.inspect import observe_targets
from hakiri.destinations.postgres.names import check_identifier
from hakiri.errors import LoadError

if TYPE_CHECKING:
    import psycopg

__all__ = ["evolve_target"]

_RELKIND = """
SELECT c.oid, c.relkind FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %s AND c.relname = %s
"""
# Views and materialized views whose query reads `column` of the table (a view's query is a rule).
_VIEWS_ON_COLUMN = """
SELECT DISTINCT vn.nspname, v.relname
FROM pg_catalog.pg_depend d
JOIN pg_catalog.pg_rewrite r ON r.oid = d.objid
JOIN pg_catalog.pg_class v ON v.oid = r.ev_class
JOIN pg_catalog.pg_namespace vn ON vn.oid = v.relnamespace
JOIN pg_catalog.pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
WHERE d.classid = 'pg_catalog.pg_rewrite'::regclass
  AND d.refclassid = 'pg_catalog.pg_class'::regclass
  AND d.refobjid = %s AND a.attname = %s AND v.oid <> d.refobjid
ORDER BY 1, 2
"""
_SAME_BASE_TYPE = "SELECT pg_catalog.to_regtype(%s) = pg_catalog.to_regtype(%s)"
_TYPE_MODIFIERS = re.compile(r"\(([^)]*)\)")
_KINDS = {"v": "a view", "m": "a materialized view", "f": "a foreign table"}


def evolve_target(
    conn: psycopg.Connection[Any],
    schema: str,
    table: str,
    change: SchemaChange,
    lock_timeout: str,
) -> None:
    """Apply `change` to `schema.table` in the open transaction: renames, adds, widens, retypes."""
    target = sql.Identifier(schema, table)
    qualified = f"{schema}.{table}"
    conn.execute("SELECT pg_catalog.set_config('lock_timeout', %s, true)", (lock_timeout,))
    oid = _table_oid(conn, schema, table)
    conn.execute(sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(target))
    seen = observe_targets(conn, [(schema, table)])[0]
    columns = {c.name: c.type for c in seen.columns}

    for old, new in change.rename:
        if _rename_needed(columns, old, new, qualified):
            conn.execute(
                sql.SQL("ALTER TABLE {} RENAME COLUMN {} TO {}").format(
                    target, sql.Identifier(old), sql.Identifier(new)
                )
            )
            columns[new] = columns.pop(old)
    for column in change.add:
        if _add_needed(conn, columns, column, qualified):
            # Nullable, no default: existing rows read NULL and the table is not rewritten.
            conn.execute(
                sql.SQL("ALTER TABLE {} ADD COLUMN {} {}").format(
                    target, sql.Identifier(column.name), sql.SQL(column.type)
                )
            )
            columns[column.name] = column.type
    for step in (*change.widen, *change.retype):
        if step.column not in columns:
            raise LoadError(
                f"cannot change the type of column {_quoted(step.column)} of {qualified}: "
                "there is no such column",
                "the target changed since the plan was made; run `hakiri plan` again",
            )
        if not _same_type(conn, columns[step.column], step.new_type):
            _alter_type(conn, oid, qualified, target, step, columns[step.column])
            columns[step.column] = step.new_type


def _table_oid(conn: psycopg.Connection[Any], schema: str, table: str) -> int:
    row = conn.execute(_RELKIND, (schema, table)).fetchone()
    if row is None:
        raise LoadError(
            f"the target {schema}.{table} does not exist, so its columns cannot change",
            "run `hakiri plan` again: a missing target is created by the load, not evolved",
        )
    oid, relkind = row
    if relkind not in ("r", "p"):
        raise LoadError(
            f"the target {schema}.{table} is {_KINDS.get(relkind, 'not a table')}, not a table",
            "point the pipeline at a table (or drop the object so hakiri creates the table)",
        )
    return int(oid)


def _rename_needed(columns: dict[str, str], old: str, new: str, qualified: str) -> bool:
    check_identifier(new, "column")
    if old in columns and new not in columns:
        return True
    if old not in columns and new in columns:
        return False  # renamed already (by another process, or an earlier attempt)
    if old in columns:
        raise LoadError(
            f"cannot rename column {_quoted(old)} of {qualified} to {_quoted(new)}: "
            "both columns exist",
            f"drop or rename one of them in {qualified}, or remove the declared rename",
        )
    raise LoadError(
        f"cannot rename column {_quoted(old)} of {qualified} to {_quoted(new)}: "
        "neither column exists",
        "fix the declared rename (the old name as the target has it now)",
    )


def _add_needed(
    conn: psycopg.Connection[Any], columns: dict[str, str], column: TargetColumn, qualified: str
) -> bool:
    check_identifier(column.name, "column")
    if column.name not in columns:
        return True
    if _same_type(conn, columns[column.name], column.type):
        return False  # added already, by another process
    raise LoadError(
        f"cannot add column {_quoted(column.name)} {column.type} to {qualified}: it exists, "
        f"as {columns[column.name]}",
        "the target changed since the plan was made; run `hakiri plan` again",
    )


def _alter_type(
    conn: psycopg.Connection[Any],
    oid: int,
    qualified: str,
    target: sql.Identifier,
    step: ColumnRetype,
    current: str,
) -> None:
    from psycopg import errors as e

    column = sql.Identifier(step.column)
    new_type = sql.SQL(step.new_type)
    statement = sql.SQL("ALTER TABLE {} ALTER COLUMN {} TYPE {} USING {}::{}").format(
        target, column, new_type, column, new_type
    )
    what = f"cannot change column {_quoted(step.column)} of {qualified} from {current} to {step.new_type}"
    try:
        with conn.transaction():  # a savepoint: the catalog stays readable after a failure
            conn.execute(statement)
    except e.DataError as exc:  # a value that does not convert (or fit)
        raise LoadError(
            f"{what}: {_message(exc)}; nothing was changed",
            f"fix or delete the rows whose {_quoted(step.column)} cannot become {step.new_type}, "
            "then apply again",
        ) from exc
    except (e.CannotCoerce, e.DatatypeMismatch, e.UndefinedFunction) as exc:  # no cast at all
        raise LoadError(
            f"{what}: {_message(exc)}; nothing was changed",
            f"PostgreSQL has no cast from {current} to {step.new_type}: change the column by hand "
            "(ALTER TABLE … ALTER COLUMN … TYPE … USING <expression>), or keep its type",
        ) from exc
    except e.FeatureNotSupported as exc:
        if "view or rule" not in _message(exc):
            raise
        views = [f"{s}.{v}" for s, v in conn.execute(_VIEWS_ON_COLUMN, (oid, step.column))]
        named = ", ".join(views) or "the views"
        them = "it" if len(views) == 1 else "them"
        raise LoadError(
            f"{what}: it is read by {', '.join(views) or _message(exc)}; nothing was changed",
            f"PostgreSQL cannot change the type of a column a view reads: drop {named}, apply "
            f"again, then re-create {them} (save the definitions first, e.g. with pg_get_viewdef)",
        ) from exc


def _same_type(conn: psycopg.Connection[Any], current: str, wanted: str) -> bool:
    """Do two spellings name the same type ('character varying(20)' and 'varchar(20)')?"""
    if _normalized(current) == _normalized(wanted):
        return True
    if _modifiers(current) != _modifiers(wanted):
        return False
    # to_regtype drops the modifiers, compared above; it may raise on a malformed name,
    # which would fail the change anyway.
    row = conn.execute(_SAME_BASE_TYPE, (current, wanted)).fetchone()
    return bool(row and row[0])


def _normalized(type_: str) -> str:
    return " ".join(type_.lower().split())


def _modifiers(type_: str) -> list[str]:
    return ["".join(m.split()) for m in _TYPE_MODIFIERS.findall(type_)]


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _message(exc: psycopg.Error) -> str:
    """The server's primary message on one line (a value in it may hold line breaks)."""
    text = exc.diag.message_primary or str(exc)
    detail = exc.diag.message_detail
    return " ".join((f"{text} ({detail})" if detail else text).split())
