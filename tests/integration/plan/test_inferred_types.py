"""`plan` on a CSV without declared `columns`: the types apply would create, inferred from a
sample as apply infers them from all rows, marked as inferred; a float for money is hinted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psycopg
from psycopg import sql

from tests.support.project import Project

ROWS = 5_000


def _project(root: Path, pg_url: str, schema: str) -> Project:
    project = Project(root, pg_url, schema)
    project.write(
        "hakiri.toml",
        f"""
        [project]
        name = "inferred"

        [connections.wh]
        type = "postgres"
        url = "{pg_url}"

        [[pipeline]]
        id = "sales"
        source = {{ connector = "files", config = {{ path = "data/*.csv" }} }}
        tables = [{{ name = "sales", target = "sales" }}]
        destination = {{ connector = "postgres", config = {{ connection = "wh", schema = "{schema}" }} }}
        load = {{ mode = "append" }}
        """,
    )
    lines = ["id,customer,amount,sold_on"]
    lines += [
        f"{i},c{i % 97},{i * 3 % 1000}.{i % 100:02d},2024-01-{i % 28 + 1:02d}" for i in range(ROWS)
    ]
    project.write("data/sales.csv", "\n".join(lines) + "\n")
    return project


def _plan(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hakiri.cli.main", "plan", *args, "--project", str(root)],
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "HAKIRI_CRASH_AT"},
        timeout=120,
        check=False,
    )


def test_plan_shows_the_inferred_types_and_hints_at_a_float_for_money(
    tmp_path: Path, pg_url: str, pg_schema: str, spark: object
) -> None:
    project = _project(tmp_path, pg_url, pg_schema)
    done = _plan(tmp_path)
    assert done.returncode == 0, done.stderr
    said = " ".join((done.stdout + done.stderr).split())
    assert (
        f"+ create {pg_schema}.sales (id integer, customer text, amount double precision, "
        "sold_on date; inferred from 1,000 records, as apply infers them)"
    ) in said
    assert "column amount infers as double precision from the data (1,000 records sampled)" in said
    assert (
        'declare the source\'s `columns` with a decimal for money, e.g. { amount = "decimal(18,2)" }'
        in said
    )

    document = json.loads(_plan(tmp_path, "--json").stdout)
    [target] = document["pipelines"][0]["targets"]
    assert target["inferred_rows"] == 1_000
    assert {c["name"]: c["type"] for c in target["inferred"]} == {
        "id": "integer",
        "customer": "text",
        "amount": "double precision",
        "sold_on": "date",
    }

    # What plan said is what apply created.
    assert project.cli("apply").exit_code == 0
    with psycopg.connect(pg_url) as conn:
        created = conn.execute(
            sql.SQL(
                "SELECT column_name, data_type FROM information_schema.columns "
                "WHERE table_schema = %s AND table_name = 'sales' ORDER BY ordinal_position"
            ),
            (pg_schema,),
        ).fetchall()
    assert dict(created) == {
        "id": "integer",
        "customer": "text",
        "amount": "double precision",
        "sold_on": "date",
    }

    # Declared, the hint is gone.
    text = (tmp_path / "hakiri.toml").read_text()
    declared = (
        'columns = { id = "int", customer = "string", amount = "decimal(18,2)", sold_on = "date" }'
    )
    (tmp_path / "hakiri.toml").write_text(
        text.replace('path = "data/*.csv" }', f'path = "data/*.csv", {declared} }}')
    )
    done = _plan(tmp_path)
    assert "infers as" not in done.stdout + done.stderr
