"""cdc_mirror from PostgreSQL's logical decoding into PostgreSQL and into the context store
(Delta): a snapshot, then inserts, updates (of the key, and leaving a TOASTed value out of
the WAL), deletes and a transaction over two tables, each target equal to its source after
every apply."""

from __future__ import annotations

import json
import textwrap
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from tests.support.cdc_workload import drop_mirror
from tests.support.context_store import read_context_table
from tests.support.project import Project

pytestmark = pytest.mark.integration

_TABLES = {
    "orders": "id bigint PRIMARY KEY, status text NOT NULL, note text, version int NOT NULL",
    "lines": "id bigint PRIMARY KEY, order_id bigint NOT NULL, qty int NOT NULL",
}
_BIG = "x" * 20_000  # stored out of line (TOAST), so an update that keeps it leaves it out


@pytest.fixture
def source(pg_url: str, pg_schema: str) -> Iterator[str]:
    """`pg_schema` with the two source tables; the slot and publication the test's pipeline
    makes are dropped afterwards (a slot keeps the server's WAL)."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        for table, columns in _TABLES.items():
            conn.execute(
                sql.SQL("CREATE TABLE {} ({})").format(
                    sql.Identifier(pg_schema, table), sql.SQL(columns)
                )
            )
        conn.execute(
            sql.SQL("ALTER TABLE {} ALTER COLUMN note SET STORAGE EXTERNAL").format(
                sql.Identifier(pg_schema, "orders")
            )
        )
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(f"{pg_schema}_m")))
    try:
        yield pg_schema
    finally:
        drop_mirror(pg_url, f"s_{pg_schema}", f"p_{pg_schema}", f"{pg_schema}_m")


_DESTINATIONS = {
    "postgres": '{{ connector = "postgres", config = {{ connection = "db", schema = "{schema}_m" }} }}',
    "context": '{{ connector = "context" }}',
}


def _project(tmp_path: Path, pg_url: str, schema: str, destination: str) -> Project:
    project = Project(tmp_path, pg_url, schema)
    target = _DESTINATIONS[destination].format(schema=schema)
    project.write(
        "hakiri.toml",
        textwrap.dedent(f"""
        [project]
        name = "cdc"

        [connections.db]
        type = "postgres"
        url = "{pg_url}"

        [[pipeline]]
        id = "mirror"
        tables = ["orders", "lines"]
        load = {{ mode = "cdc_mirror", upsert_key = ["id"] }}
        destination = {target}

        [pipeline.source]
        connector = "postgres"
        config = {{ connection = "db", schema = "{schema}", cdc = {{ slot = "s_{schema}", publication = "p_{schema}" }} }}
        """),
    )
    return project


def _run(pg_url: str, *statements: str) -> None:
    """The suite's server commits asynchronously, and decoding reads flushed WAL only: the
    workload commits synchronously so the next apply sees all of it."""
    with psycopg.connect(pg_url, autocommit=True, options="-c synchronous_commit=on") as conn:
        for statement in statements:
            conn.execute(statement)


def _names(table: str) -> list[str]:
    return [part.split()[0] for part in _TABLES[table].split(", ")]


def _differences(project: Project, destination: str) -> dict[str, int]:
    """Rows in one of source and target and not the other, per table (EXCEPT ALL both ways:
    a multiset comparison)."""
    if destination == "context":
        return {table: _delta_differences(project, table) for table in _TABLES}
    found = {}
    schema = project.schema
    with psycopg.connect(project.pg_url, autocommit=True) as conn:
        for table in _TABLES:
            names = ", ".join(_names(table))
            source = f'SELECT {names} FROM "{schema}".{table}'
            target = f'SELECT {names} FROM "{schema}_m".{table}'
            row = conn.execute(
                f"SELECT (SELECT count(*) FROM ({source} EXCEPT ALL {target}) a), "
                f"(SELECT count(*) FROM ({target} EXCEPT ALL {source}) b)"
            ).fetchone()
            assert row is not None
            found[table] = row[0] + row[1]
    return found


def _delta_differences(project: Project, table: str) -> int:
    """`_differences` for a Delta table of the context store: the source's rows (psycopg)
    and the table's (delta-rs) as multisets of tuples, counted both ways."""
    names = _names(table)
    source = Counter(
        project.query(
            sql.SQL("SELECT {} FROM {}").format(
                sql.SQL(", ").join(map(sql.Identifier, names)),
                sql.Identifier(project.schema, table),
            )
        )
    )
    target = Counter(tuple(row[n] for n in names) for row in _delta_rows(project, table))
    return sum((source - target).values()) + sum((target - source).values())


def _delta_rows(project: Project, table: str) -> list[dict[str, Any]]:
    """The table's rows (delta-rs), once Spark has opened it too."""
    return read_context_table(project.root / ".hakiri" / "context" / table)


def _note_of_order(project: Project, destination: str, order: int = 2) -> str | None:
    if destination == "context":
        [note] = [r["note"] for r in _delta_rows(project, "orders") if r["id"] == order]
        return note
    [(note,)] = project.query(f'SELECT note FROM "{project.schema}_m".orders WHERE id = {order}')
    return note


@pytest.mark.parametrize("destination", list(_DESTINATIONS))
def test_a_snapshot_then_every_kind_of_change_mirrors_exactly(
    tmp_path: Path, pg_url: str, source: str, spark, destination: str
) -> None:
    s = source
    _run(
        pg_url,
        f"INSERT INTO {s}.orders SELECT g, 'new', CASE WHEN g = 2 THEN '{_BIG}' END, 1 "
        "FROM generate_series(1, 50) g",
        f"INSERT INTO {s}.lines SELECT g, 1 + g % 50, g FROM generate_series(1, 120) g",
    )
    project = _project(tmp_path, pg_url, s, destination)
    first = project.cli("apply", "--json")
    assert first.exit_code == 0, first.output
    assert _differences(project, destination) == {"orders": 0, "lines": 0}
    # Right after the snapshot the targets are the source as of the slot's start: lag says so,
    # and plan estimates no rows for a batch of changes it has not counted.
    lag = json.loads(project.cli("cdc", "lag", "mirror", "--json").stdout)
    assert lag["applied_to"] is not None, lag
    [planned] = json.loads(project.cli("plan", "--json").stdout)["pipelines"]
    assert [w["estimated_rows"] for w in planned["pending"]] == [None, None], planned

    _run(
        pg_url,
        f"INSERT INTO {s}.orders VALUES (51, 'new', 'n', 1), (52, 'new', NULL, 1)",
        f"UPDATE {s}.orders SET status = 'paid', version = version + 1 WHERE id <= 10",
        f"UPDATE {s}.orders SET status = 'shipped', version = version + 1 WHERE id = 2",
        f"UPDATE {s}.orders SET id = 1001, version = version + 1 WHERE id = 1",
        f"DELETE FROM {s}.orders WHERE id BETWEEN 40 AND 45",
        f"BEGIN; UPDATE {s}.orders SET status = 'gone' WHERE id = 30; "
        f"DELETE FROM {s}.lines WHERE order_id = 30; COMMIT",
        f"INSERT INTO {s}.orders VALUES (40, 'again', 'back', 1)",
        f"UPDATE {s}.orders SET status = 'twice' WHERE id = 51",
        f"UPDATE {s}.orders SET note = '' WHERE id = 3",  # '' is not NULL in a mirror
    )
    again = project.cli("apply", "--json")
    assert again.exit_code == 0, again.output
    assert _differences(project, destination) == {"orders": 0, "lines": 0}
    assert _note_of_order(project, destination) == _BIG  # the update left it out of the WAL

    # Under REPLICA IDENTITY FULL a key update that keeps the large value sends the old row
    # whole: the mirror takes the value from it.
    _run(
        pg_url,
        f"ALTER TABLE {s}.orders REPLICA IDENTITY FULL",
        f"UPDATE {s}.orders SET id = 2002, version = version + 1 WHERE id = 2",
    )
    full = project.cli("apply", "--json")
    assert full.exit_code == 0, full.output
    assert _differences(project, destination) == {"orders": 0, "lines": 0}
    assert _note_of_order(project, destination, 2002) == _BIG

    quiet = project.cli("apply", "--json")
    assert quiet.exit_code == 0, quiet.output
    [outcome] = json.loads(quiet.stdout)
    assert outcome["rows"] == 0 and outcome["deleted"] == 0
