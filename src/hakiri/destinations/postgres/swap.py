"""blue_green: load `<t>_new`, then swap it in for `<t>` in the commit transaction, keeping what depends on `<t>`.

PostgreSQL ties views, foreign keys, grants and comments to a table's OID, not
its name, so a plain rename would leave them on the old table (and DROP would
refuse, or CASCADE would silently destroy them). Under an ACCESS EXCLUSIVE lock
taken with a short lock_timeout, we capture them from the old table, rename
`<t>` -> `<t>_old` and `<t>_new` -> `<t>`, re-create them on the new table, and
drop `<t>_old` without CASCADE: anything we did not carry over makes the drop
fail and the whole load roll back, instead of being lost.

Carried over: views reading the table (CREATE OR REPLACE with the captured
definition and options), table and column grants, the table comment, the owner,
foreign keys from other tables and from the table itself, non-internal triggers,
ownership of serial sequences, and the original index names. Materialized views
reading the table are refused up front (LoadError naming them).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from psycopg import sql

from hakiri.destinations.postgres.load_modes import (
    LoadContext,
    insert_from_staging,
    relation_exists,
)
from hakiri.destinations.postgres.names import derived_name, mark_table, parse_marker
from hakiri.errors import LoadError

if TYPE_CHECKING:
    import psycopg

__all__ = ["NEW_SUFFIX", "OLD_SUFFIX", "load_blue_green", "same_definition", "swap_in"]

NEW_SUFFIX = "_new"
OLD_SUFFIX = "_old"
_PRIVILEGES = frozenset(
    {"SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER", "MAINTAIN"}
)


@dataclass
class Dependents:
    """What hangs on the target by OID, captured before the rename."""

    owner: str = ""
    comment: str | None = None
    grants: list[tuple[str | None, str, str | None, bool]] = field(default_factory=list)
    views: list[tuple[str, str, str, list[str]]] = field(default_factory=list)
    incoming_fks: list[tuple[str, str, str, str]] = field(default_factory=list)
    own_fks: list[tuple[str, str]] = field(default_factory=list)
    triggers: list[str] = field(default_factory=list)
    sequences: list[tuple[str, str, str]] = field(default_factory=list)
    indexes: list[tuple[str, str]] = field(default_factory=list)  # (name, definition after USING)


def load_blue_green(
    ctx: LoadContext,
    post_hook: Callable[[Any], None] | None,
    lock_timeout: str,
    *,
    staged_like_target: int | None = None,
) -> int:
    """Load `<t>_new`, run the post-hook, swap; the number of rows loaded.

    `staged_like_target` (its row count) says the staging table was created like the target
    and holds the rows already: once the target is locked (before the post-hook, then) and
    still has the definition the staging table copied, the staging table itself becomes
    `<t>_new` and nothing is copied."""
    conn = ctx.conn
    _refuse_materialized_views(ctx)
    new_name = derived_name(ctx.table, NEW_SUFFIX)
    old_name = derived_name(ctx.table, OLD_SUFFIX)
    if relation_exists(conn, ctx.schema, old_name):
        raise LoadError(
            f"blue_green needs the name {ctx.schema}.{old_name} for a moment, and a table has it",
            f"rename or drop {ctx.schema}.{old_name}",
        )
    _clear_leftover(ctx, new_name)
    new = sql.Identifier(ctx.schema, new_name)
    if staged_like_target is not None:
        # Locked first, so the definition compared is the one that is swapped out.
        _lock(ctx, lock_timeout)
        if same_definition(ctx):
            # The staged rows are the new table: it takes the name `<t>_new`, nothing is copied.
            conn.execute(
                sql.SQL("ALTER TABLE {} RENAME TO {}").format(
                    ctx.staging_table, sql.Identifier(new_name)
                )
            )
            rows = staged_like_target
        else:  # the target changed since staging: copy into a fresh `<t>_new` after all
            staged_like_target = None
    if staged_like_target is None:
        conn.execute(sql.SQL("CREATE TABLE {} (LIKE {} INCLUDING ALL)").format(new, ctx.target))
        mark_table(conn, new, "blue_green_new", ctx.request)
        rows = insert_from_staging(ctx, new)
    if post_hook is not None:
        post_hook(conn)

    # From here on the target is locked against everyone; a busy target times out
    # (TransientLoadError) and the caller retries the whole transaction.
    _lock(ctx, lock_timeout)
    swap_in(ctx, new, old_name)
    return rows


def swap_in(ctx: LoadContext, new: sql.Identifier, old_name: str) -> None:
    """Put the table `new` (in the target's schema) in the locked target's place, carrying
    what hangs on the target by OID (see the module's docstring), and drop the old table
    without CASCADE (`old_name` is its name for that moment: free, the caller checked)."""
    conn = ctx.conn
    # Definitions are printed with every name schema-qualified, so they still mean
    # the same objects whatever search_path the load or a user has.
    conn.execute("SELECT pg_catalog.set_config('search_path', 'pg_catalog', true)")
    deps = _capture(conn, ctx.target_oid)

    for schema, table, name, _ in deps.incoming_fks:
        conn.execute(
            sql.SQL("ALTER TABLE {} DROP CONSTRAINT {}").format(
                sql.Identifier(schema, table), sql.Identifier(name)
            )
        )
    conn.execute(
        sql.SQL("ALTER TABLE {} RENAME TO {}").format(ctx.target, sql.Identifier(old_name))
    )
    conn.execute(sql.SQL("ALTER TABLE {} RENAME TO {}").format(new, sql.Identifier(ctx.table)))
    _restore(conn, ctx, deps)
    conn.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(ctx.schema, old_name)))
    _restore_index_names(conn, ctx, deps)


def _lock(ctx: LoadContext, lock_timeout: str) -> None:
    """The target, locked against everyone (ACCESS EXCLUSIVE) within `lock_timeout`."""
    ctx.conn.execute("SELECT pg_catalog.set_config('lock_timeout', %s, true)", (lock_timeout,))
    ctx.conn.execute(sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(ctx.target))


# What LIKE … INCLUDING ALL copies, without names: columns (type, NOT NULL, default,
# generation, identity), check and not-null constraints, indexes.
_DEFINITION = """
SELECT
  (SELECT array_agg(ROW(a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod), a.attnotnull,
                        pg_catalog.pg_get_expr(d.adbin, d.adrelid), a.attgenerated, a.attidentity,
                        a.attcollation)::text ORDER BY a.attnum)
   FROM pg_catalog.pg_attribute a
   LEFT JOIN pg_catalog.pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
   WHERE a.attrelid = %(rel)s::regclass AND a.attnum > 0 AND NOT a.attisdropped),
  (SELECT array_agg(def ORDER BY def) FROM (
     SELECT pg_catalog.pg_get_constraintdef(c.oid) AS def FROM pg_catalog.pg_constraint c
     WHERE c.conrelid = %(rel)s::regclass AND c.contype = 'c') AS checks),
  (SELECT array_agg(def ORDER BY def) FROM (
     SELECT ROW(i.indisunique, i.indisprimary,
                split_part(pg_catalog.pg_get_indexdef(i.indexrelid), ' USING ', 2))::text AS def
     FROM pg_catalog.pg_index i WHERE i.indrelid = %(rel)s::regclass) AS indexes)
"""


def same_definition(ctx: LoadContext) -> bool:
    """Has the staging table (created like the target) still the target's definition?"""
    return _definition(ctx.conn, ctx.staging_table) == _definition(ctx.conn, ctx.target)


def _definition(conn: psycopg.Connection[Any], table: sql.Identifier) -> tuple[Any, ...]:
    row = conn.execute(_DEFINITION, {"rel": table.as_string(conn)}).fetchone()
    return tuple(row) if row else ()


def _relation_comment(conn: psycopg.Connection[Any], schema: str, name: str) -> str | None:
    row = conn.execute(
        "SELECT pg_catalog.obj_description(c.oid, 'pg_class') FROM pg_catalog.pg_class c"
        " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = %s AND c.relname = %s",
        (schema, name),
    ).fetchone()
    return row[0] if row else None


def _clear_leftover(ctx: LoadContext, new_name: str) -> None:
    """A `<t>_new` hakiri left behind is dropped; one that is not ours stops the load."""
    if not relation_exists(ctx.conn, ctx.schema, new_name):
        return
    if parse_marker(_relation_comment(ctx.conn, ctx.schema, new_name)) is None:
        raise LoadError(
            f"blue_green loads into {ctx.schema}.{new_name}, and a table hakiri did not create has that name",
            f"rename or drop {ctx.schema}.{new_name}",
        )
    ctx.conn.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(ctx.schema, new_name)))


_MATVIEWS = """
SELECT DISTINCT vn.nspname || '.' || v.relname
FROM pg_catalog.pg_depend d
JOIN pg_catalog.pg_rewrite r ON r.oid = d.objid
JOIN pg_catalog.pg_class v ON v.oid = r.ev_class
JOIN pg_catalog.pg_namespace vn ON vn.oid = v.relnamespace
WHERE d.classid = 'pg_catalog.pg_rewrite'::regclass AND d.refclassid = 'pg_catalog.pg_class'::regclass
  AND d.refobjid = %s AND v.oid <> d.refobjid AND v.relkind = 'm'
ORDER BY 1
"""


def _refuse_materialized_views(ctx: LoadContext) -> None:
    names = [row[0] for row in ctx.conn.execute(_MATVIEWS, (ctx.target_oid,))]
    if names:
        raise LoadError(
            f"blue_green cannot swap {ctx.qualified}: materialized view(s) {', '.join(names)} read it",
            "use load mode 'truncate' (it keeps dependents in place), or drop the materialized view "
            "and re-create it after the load",
        )


_TABLE = """
SELECT pg_catalog.pg_get_userbyid(c.relowner), pg_catalog.obj_description(c.oid, 'pg_class')
FROM pg_catalog.pg_class c WHERE c.oid = %(oid)s
"""
# (column or NULL for the table, privilege, grantee or NULL for PUBLIC, grantable)
_GRANTS = """
SELECT NULL::name, acl.privilege_type,
       CASE WHEN acl.grantee = 0 THEN NULL ELSE pg_catalog.pg_get_userbyid(acl.grantee) END,
       acl.is_grantable
FROM pg_catalog.pg_class c, pg_catalog.aclexplode(c.relacl) AS acl
WHERE c.oid = %(oid)s AND acl.grantee <> c.relowner
UNION ALL
SELECT a.attname, acl.privilege_type,
       CASE WHEN acl.grantee = 0 THEN NULL ELSE pg_catalog.pg_get_userbyid(acl.grantee) END,
       acl.is_grantable
FROM pg_catalog.pg_attribute a
JOIN pg_catalog.pg_class c ON c.oid = a.attrelid,
     pg_catalog.aclexplode(a.attacl) AS acl
WHERE a.attrelid = %(oid)s AND a.attnum > 0 AND NOT a.attisdropped AND acl.grantee <> c.relowner
"""
_VIEWS = """
SELECT DISTINCT vn.nspname, v.relname, pg_catalog.pg_get_viewdef(v.oid), coalesce(v.reloptions, '{}')
FROM pg_catalog.pg_depend d
JOIN pg_catalog.pg_rewrite r ON r.oid = d.objid
JOIN pg_catalog.pg_class v ON v.oid = r.ev_class
JOIN pg_catalog.pg_namespace vn ON vn.oid = v.relnamespace
WHERE d.classid = 'pg_catalog.pg_rewrite'::regclass AND d.refclassid = 'pg_catalog.pg_class'::regclass
  AND d.refobjid = %(oid)s AND v.oid <> d.refobjid AND v.relkind = 'v'
"""
_INCOMING_FKS = """
SELECT n.nspname, c.relname, con.conname, pg_catalog.pg_get_constraintdef(con.oid)
FROM pg_catalog.pg_constraint con
JOIN pg_catalog.pg_class c ON c.oid = con.conrelid
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE con.contype = 'f' AND con.confrelid = %(oid)s AND con.conrelid <> %(oid)s
ORDER BY 1, 2, 3
"""
# LIKE … INCLUDING ALL copies checks, defaults, indexes and comments, but not foreign keys.
_OWN_FKS = """
SELECT con.conname, pg_catalog.pg_get_constraintdef(con.oid)
FROM pg_catalog.pg_constraint con
WHERE con.contype = 'f' AND con.conrelid = %(oid)s ORDER BY 1
"""
_TRIGGERS = """
SELECT pg_catalog.pg_get_triggerdef(t.oid) FROM pg_catalog.pg_trigger t
WHERE t.tgrelid = %(oid)s AND NOT t.tgisinternal ORDER BY t.tgname
"""
# Sequences of serial columns are owned by the old table and would be dropped with it.
_SEQUENCES = """
SELECT sn.nspname, s.relname, a.attname
FROM pg_catalog.pg_depend d
JOIN pg_catalog.pg_class s ON s.oid = d.objid AND s.relkind = 'S'
JOIN pg_catalog.pg_namespace sn ON sn.oid = s.relnamespace
JOIN pg_catalog.pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
WHERE d.classid = 'pg_catalog.pg_class'::regclass AND d.refclassid = 'pg_catalog.pg_class'::regclass
  AND d.refobjid = %(oid)s AND d.deptype = 'a'
"""
_INDEXES = """
SELECT ic.relname, i.indisunique, i.indisprimary,
       split_part(pg_catalog.pg_get_indexdef(i.indexrelid), ' USING ', 2)
FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class ic ON ic.oid = i.indexrelid
WHERE i.indrelid = %(oid)s ORDER BY ic.relname
"""


def _capture(conn: psycopg.Connection[Any], oid: int) -> Dependents:
    args = {"oid": oid}
    owner, comment = conn.execute(_TABLE, args).fetchone() or ("", None)
    return Dependents(
        owner=owner,
        comment=comment,
        grants=[tuple(r) for r in conn.execute(_GRANTS, args)],  # type: ignore[misc]
        views=[(s, v, d, list(o)) for s, v, d, o in conn.execute(_VIEWS, args)],
        incoming_fks=[tuple(r) for r in conn.execute(_INCOMING_FKS, args)],  # type: ignore[misc]
        own_fks=[tuple(r) for r in conn.execute(_OWN_FKS, args)],  # type: ignore[misc]
        triggers=[r[0] for r in conn.execute(_TRIGGERS, args)],
        sequences=[tuple(r) for r in conn.execute(_SEQUENCES, args)],  # type: ignore[misc]
        indexes=[(n, f"{u}:{p}:{d}") for n, u, p, d in conn.execute(_INDEXES, args)],
    )


def _restore(conn: psycopg.Connection[Any], ctx: LoadContext, deps: Dependents) -> None:
    target = ctx.target
    current = conn.execute("SELECT current_user").fetchone()
    if deps.owner and current and deps.owner != current[0]:
        conn.execute(
            sql.SQL("ALTER TABLE {} OWNER TO {}").format(target, sql.Identifier(deps.owner))
        )
    for schema, sequence, column in deps.sequences:
        conn.execute(
            sql.SQL("ALTER SEQUENCE {} OWNED BY {}").format(
                sql.Identifier(schema, sequence), sql.Identifier(ctx.schema, ctx.table, column)
            )
        )
    # Restores the original comment, replacing the `_new` marker (or clears it).
    conn.execute(sql.SQL("COMMENT ON TABLE {} IS {}").format(target, sql.Literal(deps.comment)))
    for on_column, privilege, grantee, grantable in deps.grants:
        if privilege not in _PRIVILEGES:
            continue
        conn.execute(
            sql.SQL("GRANT {}{} ON {} TO {}{}").format(
                sql.SQL(privilege),
                sql.SQL(" ({})").format(sql.Identifier(on_column)) if on_column else sql.SQL(""),
                target,
                sql.Identifier(grantee) if grantee else sql.SQL("PUBLIC"),
                sql.SQL(" WITH GRANT OPTION") if grantable else sql.SQL(""),
            )
        )
    for name, definition in deps.own_fks:
        conn.execute(
            sql.SQL("ALTER TABLE {} ADD CONSTRAINT {} {}").format(
                target, sql.Identifier(name), sql.SQL(definition)
            )
        )
    for schema, table, name, definition in deps.incoming_fks:
        conn.execute(
            sql.SQL("ALTER TABLE {} ADD CONSTRAINT {} {}").format(
                sql.Identifier(schema, table), sql.Identifier(name), sql.SQL(definition)
            )
        )
    for definition in deps.triggers:
        # Printed as `CREATE TRIGGER … ON <schema>.<table> …`: the name now means the new table.
        conn.execute(sql.SQL(definition))
    for schema, view, definition, options in deps.views:
        conn.execute(
            sql.SQL("CREATE OR REPLACE VIEW {}{} AS {}").format(
                sql.Identifier(schema, view),
                _view_options(options),
                sql.SQL(definition.strip().rstrip(";")),
            )
        )


def _view_options(options: list[str]) -> sql.Composable:
    # CREATE OR REPLACE VIEW resets options it is not given (security_barrier, check_option…).
    if not options:
        return sql.SQL("")
    pairs = [option.split("=", 1) for option in options]
    return sql.SQL(" WITH ({})").format(
        sql.SQL(", ").join(
            sql.SQL("{} = {}").format(sql.Identifier(key), sql.Literal(value))
            for key, value in pairs
        )
    )


def _restore_index_names(conn: psycopg.Connection[Any], ctx: LoadContext, deps: Dependents) -> None:
    """LIKE named the copied indexes after `<t>_new`; give them back the old table's names."""
    new_oid = conn.execute("SELECT %s::regclass::oid", (ctx.target.as_string(conn),)).fetchone()
    if not new_oid:
        return
    current = [
        (name, f"{u}:{p}:{d}") for name, u, p, d in conn.execute(_INDEXES, {"oid": new_oid[0]})
    ]
    taken: set[str] = set()
    for old_name, shape in deps.indexes:
        match = next((n for n, s in current if s == shape and n not in taken), None)
        if match is None:
            continue
        taken.add(match)
        if match != old_name:
            conn.execute(
                sql.SQL("ALTER INDEX {} RENAME TO {}").format(
                    sql.Identifier(ctx.schema, match), sql.Identifier(old_name)
                )
            )
