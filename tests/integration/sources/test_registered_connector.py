"""A source connector added from outside hakiri (tests/support/sequence_source/) loads through
the real CLI into PostgreSQL and the context store, with nothing in hakiri naming it: its
package and one `sources.kinds.register` are all it takes. `validate` and `plan` check its
config with its own model; its numeric cursor loads only the new rows; `hakiri diff`, which
it does not offer, says so in one line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.project import Project
from tests.support.sequence_source import sequence_connector

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def _registered() -> Iterator[None]:
    with sequence_connector():
        yield


def _project(tmp_path: Path, pg_url: str, pg_schema: str, destination: str, rows: int) -> Project:
    project = Project(tmp_path / "p", pg_url, pg_schema)
    target = (
        f'{{ connector = "postgres", config = {{ connection = "wh", schema = "{pg_schema}" }} }}'
        if destination == "postgres"
        else '{ connector = "context" }'
    )
    project.write(
        "hakiri.toml",
        f"""
        [project]
        name = "registered"

        [connections.wh]
        type = "postgres"
        url = "{pg_url}"

        [[pipeline]]
        id = "numbers"
        source = {{ connector = "sequence", config = {{ rows = {rows}, prefix = "n" }} }}
        tables = [{{ name = "t", incremental = "id" }}]
        destination = {target}
        load = {{ mode = "append" }}
        """,
    )
    return project


@pytest.mark.parametrize("destination", ["postgres", "context"])
def test_a_connector_registered_by_a_test_loads_its_rows_once(
    destination: str, tmp_path: Path, pg_url: str, pg_schema: str, spark
) -> None:
    project = _project(tmp_path, pg_url, pg_schema, destination, rows=3)
    assert project.cli("validate").exit_code == 0

    plan = project.cli("plan", "--json", "--detailed-exitcode")
    assert plan.exit_code == 2, plan.output  # changes to apply
    assert '"sequence"' in plan.stdout

    first = project.cli("apply", "--json")
    assert first.exit_code == 0, first.output
    assert project.id_name_rows("t", destination) == [(1, "n1"), (2, "n2"), (3, "n3")]

    # More rows: the cursor reads past 3 only.
    path = project.root / "hakiri.toml"
    path.write_text(path.read_text().replace("rows = 3", "rows = 5"))
    second = project.cli("apply", "--json")
    assert second.exit_code == 0, second.output
    [outcome] = json.loads(second.stdout)
    assert outcome["rows"] == 2, outcome
    assert project.id_name_rows("t", destination) == [(i, f"n{i}") for i in range(1, 6)]

    again = project.cli("plan", "--detailed-exitcode")
    assert again.exit_code == 0, again.output  # nothing left to load


def test_its_config_is_checked_with_its_own_model(
    tmp_path: Path, pg_url: str, pg_schema: str
) -> None:
    project = _project(tmp_path, pg_url, pg_schema, "context", rows=3)
    path = project.root / "hakiri.toml"
    path.write_text(path.read_text().replace("rows = 3", "rows = -1, colour = 2"))
    found = project.cli("validate")
    assert found.exit_code == 1
    assert "colour" in found.output
    assert "hakiri.toml:" in found.output
    assert "Traceback" not in found.output


def test_a_connector_no_longer_registered_is_refused_by_name(
    tmp_path: Path, pg_url: str, pg_schema: str
) -> None:
    project = _project(tmp_path, pg_url, pg_schema, "context", rows=3)
    with sequence_connector():
        pass  # registered and unregistered again inside the test's own registration
    from hakiri.sources import kinds

    kinds.unregister("sequence")
    try:
        found = project.cli("validate")
    finally:
        from tests.support.sequence_source import SEQUENCE

        kinds.register(SEQUENCE)
    assert found.exit_code == 1
    assert 'unknown connector "sequence"' in found.output
    assert "files" in found.output  # the hint names the connectors there are


def test_diff_says_in_one_line_that_the_connector_does_not_offer_it(
    tmp_path: Path, pg_url: str, pg_schema: str, spark
) -> None:
    project = _project(tmp_path, pg_url, pg_schema, "context", rows=3)
    assert project.cli("apply").exit_code == 0
    found = project.cli("diff", "numbers")
    assert found.exit_code == 1
    assert "cannot read a sequence source" in found.output
    assert "Traceback" not in found.output
