"""A PostgreSQL table loaded into the context store (the embedded default destination), as a
user runs it: what delta-rs reads equals the source, Spark opens the table too, and the next
apply of a changed source succeeds. (The rest and cdc_mirror sources into the context store
are checked the same way in test_rest_source.py and test_cdc_mirror.py.)"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path

import pytest

from tests.support.context_store import read_context_table
from tests.support.tables import table_project

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(
    "load", ['{ mode = "truncate" }', '{ mode = "upsert", upsert_key = ["id"] }']
)
def test_a_postgres_table_in_the_context_store_reads_back_as_the_source(
    tmp_path: Path, pg_url: str, pg_schema: str, spark, load: str
) -> None:
    project = table_project(
        tmp_path,
        pg_url,
        pg_schema,
        incremental=None,
        load=load,
        destination='{ connector = "context" }',
    )
    project.query(
        f'CREATE TABLE "{pg_schema}".src (id bigint PRIMARY KEY, name text, kind varchar(10), '
        "amount numeric(10,2), at timestamptz)"
    )
    project.query(
        f"INSERT INTO \"{pg_schema}\".src SELECT g, 'item ' || g, 'k' || g % 3, g * 1.5, "
        "timestamptz '2026-01-01 00:00+00' + g * interval '1 hour' FROM generate_series(1, 50) g"
    )

    def source() -> list[dict]:
        rows = project.query(f'SELECT id, name, kind, amount, at FROM "{pg_schema}".src')
        names = ("id", "name", "kind", "amount", "at")
        return sorted((dict(zip(names, row, strict=True)) for row in rows), key=lambda r: r["id"])

    def target() -> list[dict]:
        read = read_context_table(tmp_path / ".hakiri" / "context" / "dst", spark)
        return sorted(read, key=lambda r: r["id"])

    first = project.cli("apply")
    assert first.exit_code == 0, first.output
    assert target() == source()
    assert target()[0] == {
        "id": 1,
        "name": "item 1",
        "kind": "k1",
        "amount": Decimal("1.50"),
        "at": dt.datetime(2026, 1, 1, 1, tzinfo=dt.UTC),
    }
    shown = project.cli("context", "show", "dst", "--limit", "1")
    assert shown.exit_code == 0, shown.output

    project.query(f"UPDATE \"{pg_schema}\".src SET name = 'renamed' WHERE id = 7")
    project.query(f"INSERT INTO \"{pg_schema}\".src VALUES (51, 'new', 'k0', 1, now())")
    second = project.cli("apply")
    assert second.exit_code == 0, second.output
    assert target() == source()
