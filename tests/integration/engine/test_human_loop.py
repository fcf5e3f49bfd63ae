"""Exactly once through the human loop: a load fails, the person does what the hint says,
applies again. Each test is one of the reproductions of issue 27, as a user would meet it:
the real CLI in-process (the suite's SparkSession), a real PostgreSQL, a real catalog.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from deltalake import DeltaTable

from tests.support.project import Project

COLUMNS = '{ id = "bigint", amount = "decimal(10,2)", note = "string" }'


def _project(
    root: Path,
    pg_url: str,
    schema: str,
    mode: str,
    url: str | None = None,
    destination: str = "postgres",
) -> Project:
    """One pipeline `p`: data/in/*.csv with declared columns into `schema`.t (or the context
    store's t), loaded by `mode`; the warehouse's URL is `url` when given (e.g. `${WH_URL}`),
    else the suite's server."""
    project = Project(root, pg_url, schema)
    target = (
        f'{{ connector = "postgres", config = {{ connection = "wh", schema = "{schema}" }} }}'
        if destination == "postgres"
        else '{ connector = "context" }'
    )
    project.write(
        "hakiri.toml",
        f"""
        [project]
        name = "human-loop"

        [connections.wh]
        type = "postgres"
        url = "{url or pg_url}"

        [[pipeline]]
        id = "p"
        source = {{ connector = "files", config = {{ path = "data/in/*.csv", columns = {COLUMNS} }} }}
        tables = ["t"]
        destination = {target}
        load = {mode}
        """,
    )
    return project


def _ids(project: Project) -> list[int]:
    return [row[0] for row in project.rows("t")]


def _status(project: Project) -> dict:
    return json.loads(project.cli("status", "p", "--json").stdout)


def _alerts(project: Project, kind: str) -> list[dict]:
    return [a for a in json.loads(project.cli("alerts", "--json").stdout) if a["kind"] == kind]


def _one_line_error(stderr: str, *expected: str) -> None:
    """A failure a person reads: `error: …` and `hint: …`, no traceback."""
    assert "Traceback" not in stderr and "py4j" not in stderr.lower(), stderr
    errors = [line for line in stderr.splitlines() if "error:" in line]
    assert errors, stderr
    for text in expected:
        assert any(text in line for line in errors), stderr
    assert "hint:" in stderr, stderr


@pytest.fixture
def closed_port() -> int:
    """A loopback port nothing listens on: connecting to it is refused at once."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize(
    "mode", ['{ mode = "append" }', '{ mode = "upsert", upsert_key = ["id"] }'], ids=str
)
def test_a_file_fixed_after_a_malformed_record_loads_once(
    tmp_path: Path, pg_url: str, pg_schema: str, spark, mode: str
) -> None:
    project = _project(tmp_path, pg_url, pg_schema, mode)
    project.write("data/in/a.csv", "id,amount,note\n1,1.50,one\n2,2.50,two\n")
    assert project.cli("apply").exit_code == 0
    project.write("data/in/b.csv", "id,amount,note\n3,x4.50,three\n4,4.50,four\n")
    failed = project.cli("apply")
    assert failed.exit_code == 1
    _one_line_error(failed.stderr, "b.csv")

    project.write(
        "data/in/b.csv", "id,amount,note\n3,3.50,three\n4,4.50,four\n"
    )  # as the hint says
    fixed = project.cli("apply")
    assert fixed.exit_code == 0, fixed.stderr
    assert _ids(project) == [1, 2, 3, 4]  # 3 and 4 once each
    assert "1 batch superseded recorded" in fixed.stdout
    chunks = _status(project)["chunks"]
    # a.csv and the fixed b.csv loaded once each; the bad version never loaded
    assert (chunks["done"], chunks["superseded"], chunks["failed"]) == (2, 1, 0)
    [retired] = _status(project)["retired"]
    assert (
        retired["file"] == "data/in/b.csv" and "changed before it was loaded" in retired["reason"]
    )
    assert "no changes" in project.cli("apply").stdout


def test_an_outage_then_an_edit_loads_the_edited_file_once(
    tmp_path: Path, pg_url: str, pg_schema: str, spark, closed_port: int
) -> None:
    project = _project(tmp_path, pg_url, pg_schema, '{ mode = "append" }', url="${WH_URL}")
    project.write("data/in/a.csv", "id,amount,note\n1,1.50,one\n2,2.50,two\n")
    down = project.cli("apply", env={"WH_URL": f"postgresql://postgres@127.0.0.1:{closed_port}/x"})
    assert down.exit_code == 1
    _one_line_error(down.stderr)

    project.write("data/in/a.csv", "id,amount,note\n1,1.50,one\n2,2.50,two\n6,6.50,six\n")
    back = project.cli("apply", env={"WH_URL": pg_url})
    assert back.exit_code == 0, back.stderr
    assert _ids(project) == [1, 2, 6]


def test_a_failure_before_any_batch_is_a_failed_run_in_runs_status_and_alerts(
    tmp_path: Path, pg_url: str, pg_schema: str, spark, closed_port: int
) -> None:
    project = _project(tmp_path, pg_url, pg_schema, '{ mode = "append" }', url="${WH_URL}")
    toml = project.root / "hakiri.toml"
    toml.write_text(toml.read_text().replace('id = "p"', 'id = "p"\nsecrets = ["WH_TOKEN"]'))
    project.write("data/in/a.csv", "id,amount,note\n1,1.50,one\n")
    refused = project.cli(
        "apply",
        env={"WH_URL": f"postgresql://u:s3cret@127.0.0.1:{closed_port}/x", "WH_TOKEN": "t"},
    )
    assert refused.exit_code == 1
    _one_line_error(refused.stderr, str(closed_port))
    env = {"WH_URL": pg_url, "WH_TOKEN": None}
    missing = project.cli("apply", env=env)  # the pipeline's declared secret is not set
    assert missing.exit_code == 1
    _one_line_error(missing.stderr, "WH_TOKEN")

    runs = json.loads(project.cli("runs", "p", "--json", env=env).stdout)
    assert [r["status"] for r in runs] == ["failed", "failed"]
    assert "WH_TOKEN" in runs[0]["error_msg"]
    assert str(closed_port) in runs[1]["error_msg"] and "s3cret" not in runs[1]["error_msg"]
    status = json.loads(project.cli("status", "p", "--json", env=env).stdout)
    assert status["last_error"]["run_id"] == runs[0]["run_id"]
    assert "WH_TOKEN" in status["last_error"]["message"]
    alerts = json.loads(project.cli("alerts", "--json", env=env).stdout)
    assert [a["run_id"] for a in alerts if a["kind"] == "run_failed"] == [r["run_id"] for r in runs]
    tables = project.query("SELECT tablename FROM pg_tables WHERE schemaname = %s", pg_schema)
    assert tables == []  # nothing half-written either


def test_a_bad_file_deleted_is_gone_and_later_files_load(
    tmp_path: Path, pg_url: str, pg_schema: str, spark
) -> None:
    project = _project(tmp_path, pg_url, pg_schema, '{ mode = "append" }')
    project.write("data/in/a.csv", "id,amount,note\n1,1.50,one\n")
    project.write("data/in/b.csv", "id,amount,note\n2,x,two\n")
    assert project.cli("apply").exit_code == 1
    (project.root / "data/in/b.csv").unlink()
    project.write("data/in/c.csv", "id,amount,note\n3,3.50,three\n")

    applied = project.cli("apply")
    assert applied.exit_code == 0, applied.stderr
    assert _ids(project) == [1, 3]
    assert "1 batch gone recorded" in applied.stdout
    status = _status(project)
    assert (status["chunks"]["gone"], status["chunks"]["failed"]) == (1, 0)
    assert project.cli("apply").exit_code == 0
    [gone] = _alerts(project, "batch_gone")  # once, not on every apply
    assert gone["severity"] == "warning" and "data/in/b.csv is gone" in gone["message"]


def test_a_path_that_never_matched_a_file_warns_every_time_and_alerts_once(
    tmp_path: Path, pg_url: str, pg_schema: str, spark
) -> None:
    project = _project(tmp_path, pg_url, pg_schema, '{ mode = "append" }')
    toml = project.root / "hakiri.toml"
    toml.write_text(toml.read_text().replace("data/in/*.csv", "data/does-not-exist/*.csv"))
    warning = "pipeline p: path 'data/does-not-exist/*.csv' has never matched a file"
    for _ in range(2):
        applied = project.cli("apply")
        assert applied.exit_code == 0
        assert warning in " ".join(applied.stderr.split()), applied.stderr
        planned = project.cli("plan")
        assert "has never matched a file" in planned.stdout
        assert f"{pg_schema}.t: waiting for its first file" in planned.stdout, planned.stdout
        assert "+ create" not in planned.stdout, planned.stdout
    [alert] = _alerts(project, "never_matched")
    assert alert["message"] == warning
    assert _status(project)["warnings"] == [warning]


def test_apply_and_plan_say_what_they_will_do_and_did(
    tmp_path: Path, pg_url: str, pg_schema: str, spark
) -> None:
    project = _project(tmp_path, pg_url, pg_schema, '{ mode = "append" }')
    project.write("data/in/a.csv", "id,amount,note\n1,1.50,one\n")
    assert project.cli("apply").exit_code == 0
    # A manifest change and no data: plan calls it a change, apply says it recorded it.
    toml = project.root / "hakiri.toml"
    toml.write_text(toml.read_text().replace('id = "p"', 'id = "p"\ndescription = "orders"'))
    [planned] = json.loads(project.cli("plan", "--json").stdout)["pipelines"]
    assert planned["action"] == "change"
    applied = project.cli("apply")
    assert applied.exit_code == 0
    assert "no changes" not in applied.stdout
    assert "1 manifest change recorded" in applied.stdout
    assert "no changes: every pipeline is up to date" in project.cli("apply").stdout
    # Data to load under an unchanged manifest: labelled `load`, never `no-op`.
    project.write("data/in/b.csv", "id,amount,note\n2,2.50,two\n")
    document = json.loads(project.cli("plan", "--json").stdout)
    assert document["pipelines"][0]["action"] == "load"
    assert (document["summary"]["no_op"], document["summary"]["pending"]) == (0, 1)
    text = project.cli("plan").stdout
    assert "> p load" in " ".join(text.split())


@pytest.mark.parametrize("destination", ["postgres", "context"])
def test_a_key_repeated_in_one_file_is_refused_naming_key_value_and_file(
    tmp_path: Path, pg_url: str, pg_schema: str, spark, destination: str
) -> None:
    upsert = '{ mode = "upsert", upsert_key = ["id"] }'
    project = _project(tmp_path, pg_url, pg_schema, upsert, destination=destination)
    project.write("data/in/a.csv", "id,amount,note\n1,1.50,one\n")
    assert project.cli("apply").exit_code == 0
    project.write("data/in/b.csv", "id,amount,note\n4,4.50,four\n5,5.00,five\n4,4.75,four again\n")
    refused = project.cli("apply")
    assert refused.exit_code == 1
    _one_line_error(refused.stderr, "upsert_key (id) = 4 appears 2 times in data/in/b.csv")
    if destination == "postgres":
        assert _ids(project) == [1]
    else:
        table = DeltaTable(project.root / ".hakiri" / "context" / "t").to_pyarrow_table()
        assert table.column("id").to_pylist() == [1]


def test_a_file_changed_while_the_run_loads_is_superseded_and_reloaded_in_the_same_run(
    tmp_path: Path, pg_url: str, pg_schema: str, spark
) -> None:
    from hakiri.services.apply import apply_project

    project = _project(tmp_path, pg_url, pg_schema, '{ mode = "append" }')
    project.write("data/in/a.csv", "id,amount,note\n1,1.50,one\n")
    project.write("data/in/b.csv", "id,amount,note\n2,2.50,two\n")

    def edit_b_after_a(pipeline: str, done: int, total: int, rows: int) -> None:
        if done == 1:  # a.csv committed; b.csv planned, not read yet
            project.write("data/in/b.csv", "id,amount,note\n2,2.75,two\n3,3.50,three\n")

    [outcome] = apply_project(project.root, on_batch=edit_b_after_a)
    assert (outcome.status, outcome.batches, outcome.superseded) == ("success", 2, 1)
    assert any("data/in/b.csv changed before it was loaded" in n for n in outcome.notes)
    assert [(r[0], str(r[1])) for r in project.rows("t")] == [(1, "1.50"), (2, "2.75"), (3, "3.50")]
    assert "no changes" in project.cli("apply").stdout
