"""upsert with `deletes`: keys missing from a full snapshot are deleted (or marked), behind a guard.

Each file is a full extract of the table. The guard must refuse a partial one whole:
no row deleted, no row upserted, an alert; `max_delete_fraction = 1.0` lets it through.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from psycopg import sql
from pyspark.sql import SparkSession

from tests.support.project import Project, postgres_project

pytestmark = pytest.mark.integration

FULL = "id,name,region\n" + "".join(
    f"{i},name {i},{'EU' if i % 2 else 'US'}\n" for i in range(1, 11)
)
# 3 of the 10 keys (a partial extract), one of them changed
PARTIAL = "id,name,region\n1,name 1,EU\n2,renamed,US\n3,name 3,EU\n"


def _project(tmp_path: Path, pg_url: str, schema: str, destination: str, load: str) -> Project:
    project = postgres_project(
        tmp_path,
        pg_url,
        schema,
        source='{ path = "data/*.csv", columns = { id = "bigint", name = "string", '
        'region = "string" } }',
        body=f"load = {{ {load} }}",
    )
    if destination == "context":
        path = project.root / "hakiri.toml"
        text = path.read_text()
        start = text.index("destination = {")
        end = text.index("\n", start)
        path.write_text(text[:start] + 'destination = { connector = "context" }' + text[end:])
    return project


def _rows(project: Project, destination: str, columns: str = "id, name") -> list[tuple]:
    if destination == "postgres":
        return project.query(
            sql.SQL("SELECT {} FROM {} ORDER BY id").format(
                sql.SQL(columns), sql.Identifier(project.schema, "t")
            )
        )
    from deltalake import DeltaTable

    names = [c.strip() for c in columns.split(",")]
    table = DeltaTable(str(project.root / ".hakiri" / "context" / "t")).to_pyarrow_table()
    return sorted(tuple(r[c] for c in names) for r in table.select(names).to_pylist())


@pytest.mark.parametrize("destination", ["postgres", "context"])
def test_a_partial_snapshot_is_refused_whole_until_the_fraction_allows_it(
    destination: str, tmp_path: Path, pg_url: str, pg_schema: str, spark: SparkSession
) -> None:
    load = 'mode = "upsert", upsert_key = ["id"], deletes = "hard"'
    project = _project(tmp_path, pg_url, pg_schema, destination, load)
    project.write("data/day1.csv", FULL)
    assert project.cli("apply").exit_code == 0
    before = _rows(project, destination)
    assert len(before) == 10

    project.write("data/day2.csv", PARTIAL)
    # plan counts them before any load, and says apply will refuse
    assert "plan --count-deletes" in " ".join(project.cli("plan").output.split())
    planned = project.cli("plan", "--json", "--count-deletes")
    assert planned.exit_code == 0, planned.output
    [pending] = json.loads(planned.stdout)["pipelines"][0]["pending"]
    assert pending["deletes"] == {
        "batch": pending["deletes"]["batch"],
        "verb": "delete",
        "rows": 7,
        "of": 10,
        "max_fraction": 0.2,
        "refused": True,
    }
    shown = project.cli("plan", "--count-deletes")
    assert (
        "the next snapshot would delete 7 of 10 row(s) (70%), over max_delete_fraction = 0.2: "
        "apply will refuse it" in " ".join(shown.output.split())
    )
    refused = project.cli("apply")
    assert refused.exit_code == 1
    assert "would delete 7 of the 10 rows" in refused.output
    assert "over max_delete_fraction = 0.2; nothing was written" in refused.output
    assert _rows(project, destination) == before  # nothing deleted, nothing upserted
    alerts = json.loads(project.cli("alerts", "--json").output)
    guard = [a for a in alerts if a["kind"] == "delete_guard"]
    assert len(guard) == 1 and guard[0]["severity"] == "error"
    assert "would delete 7 of the 10 rows" in guard[0]["message"]

    manifest = project.root / "hakiri.toml"
    manifest.write_text(
        manifest.read_text().replace(
            'deletes = "hard"', 'deletes = "hard", max_delete_fraction = 1.0'
        )
    )
    allowed = project.cli("apply")
    assert allowed.exit_code == 0, allowed.output
    assert _rows(project, destination) == [(1, "name 1"), (2, "renamed"), (3, "name 3")]


def test_soft_deletes_mark_the_rows_in_scope_and_a_returning_key_is_live_again(
    tmp_path: Path, pg_url: str, pg_schema: str, spark: SparkSession
) -> None:
    load = (
        'mode = "upsert", upsert_key = ["id"], deletes = "soft", '
        "delete_scope = \"region = 'EU'\", max_delete_fraction = 0.5"
    )
    project = _project(tmp_path, pg_url, pg_schema, "postgres", load)
    project.write("data/day1.csv", FULL)
    assert project.cli("apply").exit_code == 0
    # day 2: ids 9 (EU) and 10 (US) are missing; only the EU row is this source's to delete
    project.write("data/day2.csv", "".join(FULL.splitlines(keepends=True)[:9]))
    assert project.cli("apply").exit_code == 0
    marked = project.query(
        sql.SQL("SELECT id FROM {} WHERE deleted_at IS NOT NULL ORDER BY id").format(
            sql.Identifier(pg_schema, "t")
        )
    )
    assert marked == [(9,)]
    assert len(_rows(project, "postgres")) == 10  # soft: the rows stay
    # day 3: id 9 comes back
    project.write("data/day3.csv", FULL.replace("name 9", "name nine"))
    assert project.cli("apply").exit_code == 0
    assert _rows(project, "postgres", "id, name, deleted_at")[8] == (9, "name nine", None)
