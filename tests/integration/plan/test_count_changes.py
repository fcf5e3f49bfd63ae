"""`plan --count-changes`: a reviewer sees what the next batch of an upsert or scd2 pipeline
does to the target's rows (inserts, updates, deletes, unchanged) before anything loads.

Day 1 loads ids 1-10. Day 2 is a full snapshot: 3 new ids, 2 changed names, 2 ids gone, 6 as
they were (one of them with a NULL name: compared NULL-safe). plan counts exactly those
numbers, in text and JSON, and loads nothing; apply then does what plan said.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from psycopg import sql
from pyspark.sql import SparkSession

from tests.support.project import Project, postgres_project

pytestmark = pytest.mark.integration

DAY1 = "id,name,region\n" + "".join(
    f"{i},{'' if i == 4 else f'name {i}'},{'EU' if i % 2 else 'US'}\n" for i in range(1, 11)
)
# ids 9 and 10 gone, 2 and 3 renamed, 11-13 new; 1 and 4-8 as they were
DAY2 = (
    "id,name,region\n"
    + "1,name 1,EU\n2,renamed 2,US\n3,renamed 3,EU\n4,,US\n"
    + "".join(f"{i},name {i},{'EU' if i % 2 else 'US'}\n" for i in range(5, 9))
    + "".join(f"{i},name {i},EU\n" for i in range(11, 14))
)

UPSERT = 'mode = "upsert", upsert_key = ["id"], deletes = "hard", max_delete_fraction = 0.5'
SCD2 = 'mode = "scd2", key = ["id"], deletes = "close", max_delete_fraction = 0.5'


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


def _rows(project: Project, destination: str) -> list[tuple]:
    """Every row of the target, all columns, sorted."""
    if destination == "postgres":
        return sorted(
            project.query(sql.SQL("SELECT * FROM {}").format(sql.Identifier(project.schema, "t"))),
            key=repr,
        )
    from deltalake import DeltaTable

    table = DeltaTable(str(project.root / ".hakiri" / "context" / "t")).to_pyarrow_table()
    return sorted((tuple(r.values()) for r in table.to_pylist()), key=repr)


@pytest.mark.parametrize("destination", ["postgres", "context"])
@pytest.mark.parametrize(("load", "verb"), [(UPSERT, "delete"), (SCD2, "close")])
def test_plan_counts_what_the_next_batch_inserts_updates_and_deletes(
    destination: str,
    load: str,
    verb: str,
    tmp_path: Path,
    pg_url: str,
    pg_schema: str,
    spark: SparkSession,
) -> None:
    project = _project(tmp_path, pg_url, pg_schema, destination, load)
    project.write("data/day1.csv", DAY1)
    assert project.cli("apply").exit_code == 0
    project.write("data/day2.csv", DAY2)
    before = _rows(project, destination)

    # without the flag: one hint, nothing counted
    plain = project.cli("plan")
    assert plain.exit_code == 0, plain.output
    text = " ".join(plain.output.split())
    assert text.count("hakiri plan --count-changes` counts rows to insert/update/delete") == 1
    assert "(counted)" not in text

    planned = project.cli("plan", "--json", "--count-changes")
    assert planned.exit_code == 0, planned.output
    document = json.loads(planned.stdout)
    assert document["hints"] == []
    [pending] = document["pipelines"][0]["pending"]
    batch = pending["changes"]["batch"]
    assert pending["changes"] == {
        "batch": batch,
        "insert": 3,
        "update": 2,
        "delete": 2,
        "unchanged": 6,
        "verb": verb,
    }
    # the delete guard's numbers come with it, as --count-deletes gives them
    assert pending["deletes"]["rows"] == 2 and pending["deletes"]["of"] == 10
    assert pending["deletes"]["refused"] is False

    shown = project.cli("plan", "--count-changes")
    assert shown.exit_code == 0, shown.output
    assert (
        f"next batch {batch}: +3 insert, ~2 update, -2 {verb}, 6 unchanged (counted)"
        in " ".join(shown.output.split())
    )
    assert _rows(project, destination) == before  # plan loaded nothing

    assert project.cli("apply").exit_code == 0
    # apply did what plan counted: scd2 keeps the closed and replaced versions too
    assert len(_rows(project, destination)) == (11 if load == UPSERT else 10 + 3 + 2)


def test_count_changes_without_deletes_shows_no_delete_count(
    tmp_path: Path, pg_url: str, pg_schema: str, spark: SparkSession
) -> None:
    project = _project(
        tmp_path, pg_url, pg_schema, "postgres", 'mode = "upsert", upsert_key = ["id"]'
    )
    project.write("data/day1.csv", DAY1)
    assert project.cli("apply").exit_code == 0
    project.write("data/day2.csv", DAY2)
    planned = project.cli("plan", "--json", "--count-changes")
    assert planned.exit_code == 0, planned.output
    [pending] = json.loads(planned.stdout)["pipelines"][0]["pending"]
    assert pending["changes"] == {
        "batch": pending["changes"]["batch"],
        "insert": 3,
        "update": 2,
        "delete": None,
        "unchanged": 6,
        "verb": None,
    }
    assert pending["deletes"] is None
    shown = project.cli("plan", "--count-changes")
    assert "+3 insert, ~2 update, 6 unchanged (counted)" in " ".join(shown.output.split())
