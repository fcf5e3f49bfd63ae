"""truncate without a second copy: the staging table takes the target's place, when nothing
is bound to the target's identity.

truncate's commit is `TRUNCATE target; INSERT INTO target SELECT … FROM staging`: every row
is written twice, once by the staging pass's COPY and once by the commit. When the staging
table was created like the target (`CREATE TABLE … (LIKE target INCLUDING ALL)`, logged,
with its columns, defaults, checks, indexes and extended statistics) and nothing outside the
table's own definition refers to the target by its OID, the commit swaps the staging table
in instead (`swap.swap_in`, blue_green's swap: owner, comment, grants, serial sequences and
index names carried over) and copies nothing. Otherwise it keeps TRUNCATE + INSERT … SELECT,
which keeps the target's identity.

The rule (`identity_bindings`, one query of pg_catalog): the target is bound to its identity,
and keeps TRUNCATE + INSERT, when any of these holds:

- another object depends on the table or its row type (pg_depend, normal or automatic):
  views and rules, foreign keys to or from it, triggers, row-level security policies,
  publication memberships, functions or columns of its row type; its own indexes, unique,
  primary-key, exclusion, check and not-null constraints, column defaults, extended
  statistics and owned (serial) sequences are not bindings: the staging table has them, or
  the swap carries them;
- row-level security is enabled or forced, or the replica identity is not the default;
- a publication publishes it (FOR ALL TABLES or FOR TABLES IN SCHEMA included);
- it is partitioned, a partition, or in an inheritance tree;
- it has storage parameters, a tablespace of its own, security labels, per-column
  statistics targets or options, or identity columns (LIKE copies none of these as they
  are: an identity column would get a sequence of its own);
- it is not owned by the loading role (the swap drops the old table).

The check runs twice: when staging (to create the staging table like the target only when a
swap is likely) and in the commit, under the target's ACCESS EXCLUSIVE lock, with the
definitions compared as blue_green compares them; if either fails then, the commit copies as
before. The batch is recorded in the ledger in the same transaction either way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from psycopg import sql

from hakiri.destinations.postgres.load_modes import LoadContext, load_truncate, relation_exists
from hakiri.destinations.postgres.names import derived_name
from hakiri.destinations.postgres.swap import OLD_SUFFIX, same_definition, swap_in

if TYPE_CHECKING:
    import psycopg

__all__ = ["identity_bindings", "load_replace", "swappable"]

# One row per binding found, described by PostgreSQL (pg_describe_object) or by name.
_BINDINGS = """
WITH t AS (SELECT c.* FROM pg_catalog.pg_class c WHERE c.oid = %(oid)s)
SELECT pg_catalog.pg_describe_object(d.classid, d.objid, d.objsubid)
FROM pg_catalog.pg_depend d, t
WHERE ((d.refclassid = 'pg_catalog.pg_class'::regclass AND d.refobjid = t.oid)
    OR (d.refclassid = 'pg_catalog.pg_type'::regclass AND d.refobjid = t.reltype))
  AND d.deptype IN ('n', 'a')
  AND NOT (d.classid = 'pg_catalog.pg_class'::regclass AND d.objid IN (
        SELECT i.indexrelid FROM pg_catalog.pg_index i WHERE i.indrelid = t.oid
        UNION ALL
        SELECT s.oid FROM pg_catalog.pg_class s WHERE s.relkind = 'S' AND d.deptype = 'a'))
  AND NOT (d.classid = 'pg_catalog.pg_constraint'::regclass AND d.objid IN (
        SELECT k.oid FROM pg_catalog.pg_constraint k
        WHERE k.conrelid = t.oid AND k.contype IN ('p', 'u', 'c', 'x', 'n')))
  AND NOT (d.classid = 'pg_catalog.pg_attrdef'::regclass AND d.objid IN (
        SELECT a.oid FROM pg_catalog.pg_attrdef a WHERE a.adrelid = t.oid))
  AND NOT (d.classid = 'pg_catalog.pg_statistic_ext'::regclass AND d.objid IN (
        SELECT x.oid FROM pg_catalog.pg_statistic_ext x WHERE x.stxrelid = t.oid))
UNION ALL SELECT 'row-level security' FROM t WHERE t.relrowsecurity OR t.relforcerowsecurity
UNION ALL SELECT 'replica identity ' || t.relreplident::text FROM t WHERE t.relreplident <> 'd'
UNION ALL SELECT 'publication ' || p.pubname
  FROM t JOIN pg_catalog.pg_namespace n ON n.oid = t.relnamespace, pg_catalog.pg_publication_tables p
  WHERE p.schemaname = n.nspname AND p.tablename = t.relname
UNION ALL SELECT 'relkind ' || t.relkind::text FROM t WHERE t.relkind <> 'r' OR t.relispartition
UNION ALL SELECT 'inheritance' FROM t, pg_catalog.pg_inherits h
  WHERE h.inhrelid = t.oid OR h.inhparent = t.oid
UNION ALL SELECT 'storage parameters' FROM t WHERE t.reloptions IS NOT NULL
UNION ALL SELECT 'tablespace' FROM t WHERE t.reltablespace <> 0
UNION ALL SELECT 'security label' FROM t, pg_catalog.pg_seclabel l
  WHERE l.classoid = 'pg_catalog.pg_class'::regclass AND l.objoid = t.oid
UNION ALL SELECT 'column ' || a.attname FROM t, pg_catalog.pg_attribute a
  WHERE a.attrelid = t.oid AND a.attnum > 0 AND NOT a.attisdropped
    AND (a.attidentity <> '' OR a.attoptions IS NOT NULL
         OR coalesce(a.attstattarget::int, -1) <> -1)
UNION ALL SELECT 'owner' FROM t
  WHERE NOT pg_catalog.pg_has_role(current_user, t.relowner, 'USAGE')
"""


def identity_bindings(conn: psycopg.Connection[Any], oid: int) -> list[str]:
    """What binds the table `oid` to its identity (the module's rule); [] when nothing does."""
    return [row[0] for row in conn.execute(_BINDINGS, {"oid": oid})]


def load_replace(ctx: LoadContext, staged_like_target: int | None) -> int:
    """truncate's commit: the staged rows replace the target's; the number of rows loaded.

    `staged_like_target` (its row count): the staging table was created like the target. Then,
    under the target's lock, the staging table is swapped in when nothing binds the target to
    its identity and its definition is still the staged one; otherwise, and without it,
    TRUNCATE + INSERT … SELECT."""
    conn = ctx.conn
    old_name = derived_name(ctx.table, OLD_SUFFIX)
    if staged_like_target is not None and not relation_exists(conn, ctx.schema, old_name):
        # The lock TRUNCATE takes, waited for as TRUNCATE waits (no lock_timeout: a reader
        # holding the table delays truncate's commit, as it did, rather than failing it).
        conn.execute(sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(ctx.target))
        if same_definition(ctx) and not identity_bindings(conn, ctx.target_oid):
            swap_in(ctx, ctx.staging_table, old_name)
            return staged_like_target
    return load_truncate(ctx)


def swappable(conn: psycopg.Connection[Any], schema: str, table: str) -> bool:
    """Is the existing target `schema.table` free of identity bindings now (at staging)?"""
    row = conn.execute(
        "SELECT c.oid FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n"
        " ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname = %s",
        (schema, table),
    ).fetchone()
    return row is not None and not identity_bindings(conn, row[0])
