"""A load mode added from outside hakiri (tests/support/insert_only_mode.py) loads on both
destinations through the real CLI, with nothing in the planner, engine or destinations
naming it: the mode's own strategy and the destinations' `merge` primitive are all it takes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.insert_only_mode import insert_only_new_keys
from tests.support.project import Project, postgres_project

pytestmark = pytest.mark.integration

LOAD = 'load = { mode = "insert_only_new_keys", upsert_key = ["id"] }'


@pytest.fixture(autouse=True)
def _registered() -> Iterator[None]:
    with insert_only_new_keys():
        yield


def _project(tmp_path: Path, pg_url: str, pg_schema: str, destination: str) -> Project:
    project = postgres_project(
        tmp_path,
        pg_url,
        pg_schema,
        source='{ path = "data/*.csv", columns = { id = "bigint", name = "string" } }',
        body=LOAD,
    )
    if destination == "context":
        path = project.root / "hakiri.toml"
        text = path.read_text().replace(
            f'destination = {{ connector = "postgres", config = {{ connection = "wh", schema = "{pg_schema}" }} }}',
            'destination = { connector = "context" }',
        )
        path.write_text(text)
    return project


@pytest.mark.parametrize("destination", ["postgres", "context"])
def test_a_mode_registered_by_a_test_keeps_the_first_row_of_each_key(
    destination: str, tmp_path: Path, pg_url: str, pg_schema: str, spark
) -> None:
    project = _project(tmp_path, pg_url, pg_schema, destination)
    project.write("data/a.csv", "id,name\n1,ada\n2,grace\n")
    plan = project.cli("plan", "--json")
    assert plan.exit_code == 0, plan.output
    assert '"insert_only_new_keys"' in plan.stdout

    first = project.cli("apply", "--json")
    assert first.exit_code == 0, first.output
    assert project.id_name_rows("t", destination) == [(1, "ada"), (2, "grace")]

    project.write("data/b.csv", "id,name\n2,GRACE\n3,edsger\n")
    second = project.cli("apply", "--json")
    assert second.exit_code == 0, second.output
    [outcome] = json.loads(second.stdout)
    assert outcome["batches"] == 1
    # key 2 was there: skipped, its first name kept; key 3 is new
    assert project.id_name_rows("t", destination) == [(1, "ada"), (2, "grace"), (3, "edsger")]


def test_an_unregistered_mode_is_refused_in_one_line(
    tmp_path: Path, pg_url: str, pg_schema: str
) -> None:
    project = _project(tmp_path, pg_url, pg_schema, "postgres")
    (project.root / "hakiri.toml").write_text(
        (project.root / "hakiri.toml").read_text().replace("insert_only_new_keys", "insert_only")
    )
    done = project.cli("validate")
    assert done.exit_code == 1
    assert 'expected one of "append", "truncate"' in done.output
    assert '"insert_only_new_keys"' in done.output  # the registered mode is a choice too
    assert "Traceback" not in done.output
