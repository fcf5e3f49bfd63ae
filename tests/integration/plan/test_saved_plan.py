"""`hakiri plan -o plan.json`, then `hakiri apply plan.json`: executed as planned, or refused
when anything the plan observed has changed since (with nothing loaded)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.project import Project, postgres_project

pytestmark = pytest.mark.integration

ROWS = "id,name\n1,a\n2,b\n3,c\n"
MORE = "id,name\n4,d\n5,e\n"


def _project(root: Path, pg_url: str, schema: str) -> Project:
    project = postgres_project(
        root,
        pg_url,
        schema,
        source='{ path = "data/*.csv", format = "csv", columns = { id = "bigint", name = "string" } }',
        body='load = { mode = "append" }',
    )
    project.write("data/a.csv", ROWS)
    return project


def _count(project: Project) -> int:
    return project.query(f'SELECT count(*) FROM "{project.schema}".t')[0][0]


def test_a_fresh_saved_plan_does_what_plain_apply_does(
    tmp_path: Path, pg_url: str, pg_schema: str, spark
) -> None:
    planned = _project(tmp_path / "planned", pg_url, pg_schema)
    result = planned.cli("plan", "-o", str(tmp_path / "plan.json"))
    assert result.exit_code == 0, result.stderr
    assert "Saved the plan to" in result.stderr

    applied = planned.cli("apply", str(tmp_path / "plan.json"), "--json")
    assert applied.exit_code == 0, applied.stderr
    [outcome] = json.loads(applied.stdout)
    saved = json.loads((tmp_path / "plan.json").read_text())
    [pipeline] = saved["plan"]["pipelines"]
    assert outcome["steps"] == pipeline["steps"]  # executed as planned, step for step
    assert planned.rows("t") == [(1, "a"), (2, "b"), (3, "c")]

    # The same project applied without a plan file ends in the same target.
    plain = Project(tmp_path / "plain", pg_url, pg_schema)
    plain.write("hakiri.toml", (planned.root / "hakiri.toml").read_text().replace('"t"', '"t2"'))
    plain.write("data/a.csv", ROWS)
    assert plain.cli("apply").exit_code == 0
    assert plain.rows("t2") == planned.rows("t")


def _edit_manifest(project: Project, tmp_path: Path) -> None:
    text = (project.root / "hakiri.toml").read_text()
    project.write("hakiri.toml", text.replace('id = "p"', 'id = "p"\nschedule = "every 1h"'))


def _new_file(project: Project, tmp_path: Path) -> None:
    project.write("data/c.csv", "id,name\n6,f\n")


def _column_by_hand(project: Project, tmp_path: Path) -> None:
    project.query(f'ALTER TABLE "{project.schema}".t ADD COLUMN note text')


def _another_apply(project: Project, tmp_path: Path) -> None:
    assert project.cli("apply").exit_code == 0


STALE = {
    "manifest edit": (_edit_manifest, "its manifest changed"),
    "new file": (_new_file, "its source changed"),
    "target column added by hand": (_column_by_hand, "a target table changed"),
    "another apply ran": (_another_apply, "its state in the catalog changed"),
}


@pytest.mark.parametrize("cause", list(STALE))
def test_a_stale_plan_is_refused_and_nothing_is_loaded(
    cause: str, tmp_path: Path, pg_url: str, pg_schema: str, spark
) -> None:
    project = _project(tmp_path / "project", pg_url, pg_schema)
    assert project.cli("apply").exit_code == 0
    project.write("data/b.csv", MORE)
    plan_file = tmp_path / "plan.json"
    assert project.cli("plan", "-o", str(plan_file)).exit_code == 0

    change, why = STALE[cause]
    change(project, tmp_path)
    rows, runs = _count(project), project.cli("runs", "p", "--json").stdout

    result = project.cli("apply", str(plan_file))

    assert result.exit_code == 1
    assert f"error: plan is stale: pipeline `p`: {why}" in result.stderr
    assert "hint: run hakiri plan again" in result.stderr
    assert _count(project) == rows  # nothing loaded
    assert project.cli("runs", "p", "--json").stdout == runs  # no run started


def test_a_plan_of_another_projects_catalog_is_refused(
    tmp_path: Path, pg_url: str, pg_schema: str, spark
) -> None:
    first = _project(tmp_path / "first", pg_url, pg_schema)
    plan_file = tmp_path / "plan.json"
    assert first.cli("plan", "-o", str(plan_file)).exit_code == 0
    # The same manifests and data in another directory: its own catalog.
    other = Project(tmp_path / "other", pg_url, pg_schema)
    other.write("hakiri.toml", (first.root / "hakiri.toml").read_text())
    other.write("data/a.csv", ROWS)

    result = other.cli("apply", str(plan_file))

    assert result.exit_code == 1
    assert "error: plan is stale: it was made against the catalog sqlite:///" in result.stderr
    assert other.query(
        "SELECT count(*) FROM information_schema.tables WHERE table_schema = %s AND table_name = 't'",
        pg_schema,
    ) == [(0,)]


def test_a_saved_plan_holds_no_secret(
    tmp_path: Path, pg_url: str, pg_schema: str, monkeypatch
) -> None:
    secret = "s3cr3t-Pa55"
    project = _project(tmp_path / "project", pg_url, pg_schema)
    text = (
        (project.root / "hakiri.toml").read_text().replace(f'url = "{pg_url}"', 'url = "${WH_URL}"')
    )
    project.write("hakiri.toml", text)
    # A password in the URL the variable resolves to (the server trusts local connections).
    with_password = pg_url.replace("postgresql://postgres@", f"postgresql://postgres:{secret}@")
    monkeypatch.setenv("WH_URL", with_password)
    monkeypatch.setenv("HAKIRI_CATALOG_URL", f"sqlite:///{tmp_path / 'catalog.sqlite'}")

    result = project.cli("plan", "-o", str(tmp_path / "plan.json"))

    assert result.exit_code == 0, result.stderr
    saved = (tmp_path / "plan.json").read_text()
    assert secret not in saved
    assert json.loads(saved)["format"] == "hakiri-plan"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "is not a plan file: Expecting property name"),
        ('{"format": "terraform"}', "is not a hakiri plan file"),
        ('{"format": "hakiri-plan", "format_version": 9}', "format version 9"),
    ],
)
def test_what_is_not_a_plan_file_is_one_clear_error(
    content: str, message: str, tmp_path: Path, pg_url: str, pg_schema: str
) -> None:
    project = _project(tmp_path / "project", pg_url, pg_schema)
    (tmp_path / "plan.json").write_text(content)

    result = project.cli("apply", str(tmp_path / "plan.json"))

    assert result.exit_code == 1
    assert message in result.stderr and "Traceback" not in result.stderr


def test_batches_that_appear_after_the_check_are_refused_not_loaded(
    tmp_path: Path, pg_url: str, pg_schema: str, spark
) -> None:
    """Between the staleness check and the load, a new file is refused as stale too: apply of
    a saved plan never loads beyond the plan (here the plan had nothing to enqueue)."""
    from hakiri.services.apply import apply_project

    project = _project(tmp_path / "project", pg_url, pg_schema)
    assert project.cli("apply").exit_code == 0
    project.write("data/b.csv", MORE)  # appeared after a plan that saw no new file

    [outcome] = apply_project(project.root, planned={"p": {}})

    assert outcome.status == "failed"
    assert outcome.error == (
        "plan is stale: pipeline `p`: the batches of t changed after the plan was checked"
    )
    assert _count(project) == 3


def test_apply_of_a_named_pipeline_only_in_the_catalog_retires_it_as_plan_said(
    tmp_path: Path, pg_url: str, pg_schema: str, spark
) -> None:
    project = _project(tmp_path / "project", pg_url, pg_schema)
    assert project.cli("apply").exit_code == 0
    text = (project.root / "hakiri.toml").read_text()
    project.write("hakiri.toml", text[: text.index("[[pipeline]]")])  # p removed

    planned = json.loads(project.cli("plan", "p", "--json").stdout)
    [pipeline] = planned["pipelines"]
    assert pipeline["action"] == "retire" and pipeline["steps"] == [{"step": "retire"}]
    applied = project.cli("apply", "p", "--json")
    assert applied.exit_code == 0, applied.stderr
    [outcome] = json.loads(applied.stdout)
    assert (outcome["status"], outcome["steps"]) == ("retired", [{"step": "retire"}])


def test_apply_of_an_unknown_pipeline_is_refused_before_a_catalog_exists(
    tmp_path: Path, pg_url: str, pg_schema: str
) -> None:
    project = _project(tmp_path / "project", pg_url, pg_schema)

    result = project.cli("apply", "nope")

    assert result.exit_code == 1 and "no pipeline `nope`" in result.stderr
    assert not (project.root / ".hakiri").exists()
