"""How far a staging write has got, read from PostgreSQL while the engine's tasks write it.

Why PostgreSQL, and not the engine: hakiri speaks to its engine over Spark Connect, where
`SparkContext.statusTracker()` does not exist; what Spark Connect offers instead
(`SparkSession.registerProgressHandler`) reports stages, tasks done and input bytes read
when a *task* ends. A single-file load is one or two tasks, so that report stays at zero
until the batch is nearly done (and Sail sends none). The rows, though, arrive in
PostgreSQL as they are read: each COPY task shows in `pg_stat_progress_copy`
(PostgreSQL 14+) with `tuples_processed` growing every Arrow batch, whatever engine runs
the task. Measured on the suite's PostgreSQL 15 with local Spark, a 1M-row, 39 MB CSV
staged in two tasks: the rows seen grew in steps of 100,000 every ~0.5 s for the 6 s of
the write.

The rows so far are the running COPYs' `tuples_processed` plus the rows of the tasks
that already committed (`n_tup_ins` of the staging table, reported once a task's
transaction ends); the bytes are the staging table's size on disk, which grows with both.
The JDBC writer's INSERTs show in neither view until a partition commits, so with it
only finished partitions count.
"""

from __future__ import annotations

from psycopg import sql

from hakiri.destinations.base import StageProgress
from hakiri.destinations.postgres.sql_client import connect

__all__ = ["staging_progress"]

# A probe never waits behind the staging table's DDL (finishing renames its columns).
_PROBE = sql.SQL("""
SELECT coalesce((SELECT sum(tuples_processed) FROM pg_stat_progress_copy WHERE relid = r.oid), 0)
     + coalesce((SELECT n_tup_ins FROM pg_stat_user_tables WHERE relid = r.oid), 0),
       pg_relation_size(r.oid)
FROM pg_catalog.pg_class r
WHERE r.oid = to_regclass(format('%I.%I', {schema}::text, {table}::text))
""")


def staging_progress(url: str, schema: str, table: str) -> StageProgress | None:
    """Rows and bytes in staging table `schema.table` so far; None when it is not there."""
    with connect(url, autocommit=True) as conn:
        conn.execute("SET lock_timeout = '200ms'")
        conn.execute("SET statement_timeout = '2s'")
        found = conn.execute(
            _PROBE.format(schema=sql.Literal(schema), table=sql.Literal(table))
        ).fetchone()
    if found is None:
        return None
    return StageProgress(rows=int(found[0]), bytes=int(found[1]))
