"""truncate without a second copy: when nothing is bound to the target's identity, the staging
table (created like the target) is swapped in; otherwise TRUNCATE + INSERT … SELECT keeps it.

Either way psql sees the same rows, indexes, constraints, grants and comments afterwards, and
a crash at any point of an apply loses nothing and loads nothing twice."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg
import pytest
from psycopg import sql
from typer.testing import CliRunner

from hakiri.cli.main import app
from hakiri.destinations.postgres.replace import identity_bindings
from hakiri.engine.crash import POINTS, SimulatedCrash, crashing_at
from hakiri.errors import LoadError
from hakiri.quality.rules import RuleCheck
from hakiri.spec.load import LoadMode
from tests.integration.destinations.load.support import (
    create_table,
    destination,
    insert,
    ledger_batches,
    no_checkpoint,
    request,
    rows_of,
    tables_in,
    temp_role,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

BODY = (
    "id bigint PRIMARY KEY, name text NOT NULL DEFAULT 'anon', "
    "amount numeric(12,2) CHECK (amount >= 0), tier text UNIQUE"
)
FRAME = "id bigint, name string, amount decimal(12,2), tier string"
NEW_ROWS = [(1, "ann", "1.50", "gold"), (3, "cy", "0.00", None)]


def _oid(conn: psycopg.Connection, schema: str, table: str) -> int:
    row = conn.execute(
        "SELECT %s::regclass::oid", (sql.Identifier(schema, table).as_string(conn),)
    ).fetchone()
    assert row is not None
    return int(row[0])


def _shape(conn: psycopg.Connection, schema: str, table: str) -> dict[str, Any]:
    """What psql shows of the table besides its rows: indexes, constraints, grants, comments,
    owner, columns (with defaults), in a form that does not depend on its OID."""
    oid = _oid(conn, schema, table)

    def rows(query: str) -> list[tuple[Any, ...]]:
        return conn.execute(query, {"oid": oid}).fetchall()

    return {
        "indexes": rows(
            "SELECT c.relname, pg_get_indexdef(i.indexrelid) FROM pg_index i "
            "JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = %(oid)s ORDER BY 1"
        ),
        "constraints": rows(
            "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
            "WHERE conrelid = %(oid)s ORDER BY 1"
        ),
        "grants": rows(
            "SELECT a.privilege_type, a.grantee::regrole::text, a.is_grantable "
            "FROM pg_class c, aclexplode(c.relacl) a WHERE c.oid = %(oid)s ORDER BY 1, 2"
        ),
        "column_grants": rows(
            "SELECT t.attname, a.privilege_type, a.grantee::regrole::text FROM pg_attribute t, "
            "aclexplode(t.attacl) a WHERE t.attrelid = %(oid)s ORDER BY 1, 2, 3"
        ),
        "comments": rows(
            "SELECT obj_description(%(oid)s, 'pg_class'), "
            "array_agg(col_description(%(oid)s, attnum) ORDER BY attnum) "
            "FROM pg_attribute WHERE attrelid = %(oid)s AND attnum > 0"
        ),
        "owner": rows(
            "SELECT relowner::regrole::text, relpersistence FROM pg_class WHERE oid = %(oid)s"
        ),
        "columns": rows(
            "SELECT attname, format_type(atttypid, atttypmod), attnotnull, "
            "pg_get_expr(d.adbin, d.adrelid) FROM pg_attribute a LEFT JOIN pg_attrdef d "
            "ON d.adrelid = a.attrelid AND d.adnum = a.attnum "
            "WHERE a.attrelid = %(oid)s AND a.attnum > 0 AND NOT a.attisdropped ORDER BY attnum"
        ),
    }


def _target(conn: psycopg.Connection, schema: str, role: str) -> None:
    """t: a primary key, a unique and a plain index, a check, a default, grants to `role` on
    the table and a column, comments: nothing that binds it to its identity."""
    t = create_table(conn, schema, "t", BODY)
    conn.execute(sql.SQL("CREATE INDEX t_by_name ON {} (lower(name))").format(t))
    conn.execute(sql.SQL("GRANT SELECT, INSERT ON {} TO {}").format(t, sql.Identifier(role)))
    conn.execute(sql.SQL("GRANT UPDATE (name) ON {} TO {}").format(t, sql.Identifier(role)))
    conn.execute(sql.SQL("COMMENT ON TABLE {} IS 'the customers'").format(t))
    conn.execute(sql.SQL("COMMENT ON COLUMN {}.name IS 'as written'").format(t))
    insert(conn, schema, "t", [(1, "old", 9, "x"), (2, "gone", 1, "y")])


def _frame(spark: SparkSession) -> Any:
    from decimal import Decimal

    rows = [(i, n, Decimal(a), tier) for i, n, a, tier in NEW_ROWS]
    return spark.createDataFrame(rows, FRAME)


EXPECTED = [(1, "ann", "1.50", "gold"), (3, "cy", "0.00", None)]


def _loaded(conn: psycopg.Connection, schema: str) -> list[tuple[Any, ...]]:
    return [(i, n, str(a), t) for i, n, a, t in rows_of(conn, schema, "t")]


def test_a_target_nothing_is_bound_to_is_replaced_by_the_staging_table(
    spark: SparkSession, pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    with temp_role(pg_conn) as role:
        _target(pg_conn, pg_schema, role)
        before = _shape(pg_conn, pg_schema, "t")
        assert identity_bindings(pg_conn, _oid(pg_conn, pg_schema, "t")) == []
        dest = destination(pg_url, pg_schema, writer="copy")
        req = request(pg_schema, "t", LoadMode.TRUNCATE)

        staged = dest.stage(RuleCheck.unchecked(_frame(spark)), req)
        assert staged.like_target
        staged_oid = _oid(pg_conn, pg_schema, staged.staging_table)
        result = dest.commit(staged, req, no_checkpoint)

        assert result.rows_loaded == 2
        assert _oid(pg_conn, pg_schema, "t") == staged_oid  # swapped in: no second copy
        assert _loaded(pg_conn, pg_schema) == EXPECTED
        assert _shape(pg_conn, pg_schema, "t") == before
        assert tables_in(pg_conn, pg_schema) == ["t"]
        assert ledger_batches(pg_conn, pg_schema) == [("batch-1", 2)]


# Each binds the target to its identity: truncate keeps it (TRUNCATE + INSERT … SELECT).
BINDINGS = {
    "view": "CREATE VIEW {s}.v AS SELECT id, upper(name) AS shout FROM {s}.t",
    "foreign key from it": (
        "CREATE TABLE {s}.parent (tier text PRIMARY KEY); "
        "INSERT INTO {s}.parent VALUES ('gold'), ('x'), ('y'); "
        "ALTER TABLE {s}.t ADD FOREIGN KEY (tier) REFERENCES {s}.parent (tier)"
    ),
    "trigger": (
        "CREATE FUNCTION {s}.f() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NEW; END'; "
        "CREATE TRIGGER tr BEFORE INSERT ON {s}.t FOR EACH ROW EXECUTE FUNCTION {s}.f()"
    ),
    "row-level security": (
        "ALTER TABLE {s}.t ENABLE ROW LEVEL SECURITY; CREATE POLICY p ON {s}.t USING (true)"
    ),
    "publication": "CREATE PUBLICATION pub_{u} FOR TABLE {s}.t",
    "replica identity": "ALTER TABLE {s}.t REPLICA IDENTITY FULL",
    "storage parameters": "ALTER TABLE {s}.t SET (fillfactor = 70)",
    "function of its row type": "CREATE FUNCTION {s}.g() RETURNS SETOF {s}.t LANGUAGE sql AS 'SELECT * FROM {s}.t'",
}


@pytest.mark.parametrize("binding", sorted(BINDINGS))
@pytest.mark.parametrize("when", ["before staging", "after staging"])
def test_a_target_bound_to_its_identity_keeps_it(
    spark: SparkSession,
    pg_url: str,
    pg_conn: psycopg.Connection,
    pg_schema: str,
    binding: str,
    when: str,
) -> None:
    with temp_role(pg_conn) as role:
        _target(pg_conn, pg_schema, role)
        oid = _oid(pg_conn, pg_schema, "t")
        unique = uuid.uuid4().hex[:8]
        ddl = BINDINGS[binding].format(s=sql.Identifier(pg_schema).as_string(pg_conn), u=unique)
        dest = destination(pg_url, pg_schema, writer="copy")
        req = request(pg_schema, "t", LoadMode.TRUNCATE)
        if when == "before staging":
            pg_conn.execute(ddl)
            before = _shape(pg_conn, pg_schema, "t")
        staged = dest.stage(RuleCheck.unchecked(_frame(spark)), req)
        assert staged.like_target == (when == "after staging")
        if when == "after staging":  # it appears between staging and commit
            pg_conn.execute(ddl)
            before = _shape(pg_conn, pg_schema, "t")
        try:
            assert identity_bindings(pg_conn, oid) != []
            result = dest.commit(staged, req, no_checkpoint)

            assert result.rows_loaded == 2
            assert _oid(pg_conn, pg_schema, "t") == oid  # the same table, truncated and filled
            assert _loaded(pg_conn, pg_schema) == EXPECTED
            assert _shape(pg_conn, pg_schema, "t") == before
            if binding == "view":
                shout = pg_conn.execute(
                    sql.SQL("SELECT shout FROM {} ORDER BY id").format(
                        sql.Identifier(pg_schema, "v")
                    )
                ).fetchall()
                assert shout == [("ANN",), ("CY",)]
            assert not [t for t in tables_in(pg_conn, pg_schema) if t.startswith("_hakiri")]
        finally:
            if binding == "publication":
                pg_conn.execute(
                    sql.SQL("DROP PUBLICATION {}").format(sql.Identifier(f"pub_{unique}"))
                )


def test_a_target_another_table_references_is_refused_as_before(
    spark: SparkSession, pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    # PostgreSQL refuses to TRUNCATE it; a swap would have to drop the foreign key: neither
    # happens, and the target is left as it was.
    with temp_role(pg_conn) as role:
        _target(pg_conn, pg_schema, role)
        oid = _oid(pg_conn, pg_schema, "t")
        create_table(pg_conn, pg_schema, "child", "tid bigint")
        pg_conn.execute(
            sql.SQL("ALTER TABLE {} ADD FOREIGN KEY (tid) REFERENCES {} (id)").format(
                sql.Identifier(pg_schema, "child"), sql.Identifier(pg_schema, "t")
            )
        )
        dest = destination(pg_url, pg_schema, writer="copy")
        req = request(pg_schema, "t", LoadMode.TRUNCATE)
        staged = dest.stage(RuleCheck.unchecked(_frame(spark)), req)
        assert not staged.like_target

        with pytest.raises(LoadError, match="referenced in a foreign key constraint"):
            dest.commit(staged, req, no_checkpoint)

        assert _oid(pg_conn, pg_schema, "t") == oid
        assert _loaded(pg_conn, pg_schema) == [(1, "old", "9.00", "x"), (2, "gone", "1.00", "y")]


# --------------------------------------------------------------- through `hakiri apply`


def _project(root: Path, pg_url: str, schema: str, rows: str) -> Path:
    (root / "data").mkdir(parents=True, exist_ok=True)
    (root / "data" / "t.csv").write_text("id,name,amount,tier\n" + rows)
    (root / "hakiri.toml").write_text(
        f"""
[project]
name = "swap"

[connections.wh]
type = "postgres"
url = "{pg_url}"

[[pipeline]]
id = "p"
source = {{ connector = "files", config = {{ path = "data/*.csv", columns = {{ id = "bigint", name = "string", amount = "decimal(12,2)", tier = "string" }} }} }}
destination = {{ connector = "postgres", config = {{ connection = "wh", schema = "{schema}" }} }}
tables = ["t"]
load = {{ mode = "truncate" }}
"""
    )
    return root


def _apply(root: Path, crash_at: str | None = None) -> None:
    argv = ["apply", "--project", str(root)]
    if crash_at is None:
        result = CliRunner().invoke(app, argv, catch_exceptions=False)
        assert result.exit_code == 0, result.output[-3000:]
        return
    with crashing_at(crash_at, 1, process_dies=True), pytest.raises(SimulatedCrash):
        CliRunner().invoke(app, argv, catch_exceptions=False)


@pytest.mark.parametrize("point", POINTS)
def test_a_crash_around_the_swap_loses_nothing_and_loads_nothing_twice(
    spark: SparkSession,
    pg_url: str,
    pg_conn: psycopg.Connection,
    pg_schema: str,
    tmp_path: Path,
    point: str,
) -> None:
    with temp_role(pg_conn) as role:
        _target(pg_conn, pg_schema, role)
        oid = _oid(pg_conn, pg_schema, "t")
        before = _shape(pg_conn, pg_schema, "t")
        root = _project(tmp_path / "p", pg_url, pg_schema, "1,ann,1.50,gold\n3,cy,0,\n")

        _apply(root, crash_at=point)
        crashed = _loaded(pg_conn, pg_schema)
        committed = point in ("after_dest_commit", "before_catalog_commit")
        assert crashed == (
            EXPECTED if committed else [(1, "old", "9.00", "x"), (2, "gone", "1.00", "y")]
        )
        _apply(root)

        assert _loaded(pg_conn, pg_schema) == EXPECTED
        assert _oid(pg_conn, pg_schema, "t") != oid  # swapped in
        assert _shape(pg_conn, pg_schema, "t") == before
        ledger = pg_conn.execute(
            "SELECT rows FROM _hakiri.load_ledger WHERE target_schema = %s", (pg_schema,)
        ).fetchall()
        assert ledger == [(2,)]  # one batch, recorded once
        # A crash before the staging table was swapped in or dropped leaves it; gc collects it.
        argv = ["gc", "--older-than", "0", "--project", str(root)]
        CliRunner().invoke(app, argv, catch_exceptions=False)
        assert tables_in(pg_conn, pg_schema) == ["t"]
