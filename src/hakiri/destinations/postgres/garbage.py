"""Garbage collection: tables that crashed or killed runs left beside the targets.

A staging table (`_hakiri_stg_…`) and a blue_green `<t>_new` table carry a hakiri
marker comment naming their run and creation time. gc drops those whose run is
not live and that are older than the threshold. Backups (`<t>_backup_…`) are the
user's and are never dropped here; neither is any table without a hakiri marker.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from psycopg import sql

from hakiri.destinations.base import Garbage, KeptLeftover
from hakiri.destinations.postgres.names import parse_marker, utc_now
from hakiri.destinations.postgres.sql_client import Where, connect, driver_errors, translate
from hakiri.destinations.postgres.staging import STAGING_PREFIX

__all__ = ["GC_KINDS", "gc"]

GC_KINDS = frozenset({"staging", "blue_green_new"})
# A table still in use by a load is locked; gc must not wait for it.
_LOCK_TIMEOUT = "2s"

_CANDIDATES = """
SELECT c.relname, pg_catalog.obj_description(c.oid, 'pg_class')
FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %s AND c.relkind = 'r'
  AND (starts_with(c.relname, %s) OR pg_catalog.obj_description(c.oid, 'pg_class') LIKE 'hakiri %%')
ORDER BY c.relname
"""


def gc(
    url: str, schemas: Iterable[str], *, live_runs: set[str], older_than_seconds: float
) -> Garbage:
    """Drop leftover staging and `_new` tables in `schemas`; the qualified names dropped, and
    those kept (a live run's, too young, locked) with why."""
    import psycopg

    found = Garbage()
    conn = connect(url, autocommit=True)
    try:
        conn.execute("SELECT pg_catalog.set_config('lock_timeout', %s, false)", (_LOCK_TIMEOUT,))
        for schema in schemas:
            where = Where(url, schema, None, "drop leftover tables", conn.info.user)
            with driver_errors(where):
                candidates = conn.execute(_CANDIDATES, (schema, STAGING_PREFIX)).fetchall()
            for table, comment in candidates:
                keep = _kept_because(comment, live_runs, older_than_seconds)
                if keep:
                    if keep != "not ours":
                        found.kept.append(KeptLeftover(f"{schema}.{table}", keep))
                    continue
                try:
                    conn.execute(
                        sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(schema, table))
                    )
                except psycopg.errors.LockNotAvailable:
                    # in use right now: not garbage after all, or next time
                    found.kept.append(KeptLeftover(f"{schema}.{table}", "locked"))
                    continue
                except psycopg.Error as exc:
                    raise translate(exc, Where(url, schema, table, "drop", conn.info.user)) from exc
                found.dropped.append(f"{schema}.{table}")
    finally:
        conn.close()
    return found


def _kept_because(comment: str | None, live_runs: set[str], older_than_seconds: float) -> str:
    """Why the table is not dropped (`not ours`, `running`, `young`); "" when it is garbage."""
    fields = parse_marker(comment)
    if fields is None or fields.get("kind") not in GC_KINDS:
        return "not ours"  # not marked by hakiri (or a backup): not ours to judge
    if fields.get("run") in live_runs:
        return "running"
    try:
        created = datetime.fromisoformat(str(fields.get("created_at")))
    except ValueError:
        return "not ours"
    return "" if (utc_now() - created).total_seconds() >= older_than_seconds else "young"
