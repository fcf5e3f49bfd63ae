"""`hakiri apply` end to end, in-process (the suite's SparkSession is reused), into real PostgreSQL."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from hakiri.catalog.store import Catalog
from tests.support.project import Project


@pytest.fixture
def project(tmp_path: Path, pg_url: str, pg_schema: str, spark) -> Project:
    p = Project(tmp_path, pg_url, pg_schema)
    p.write(
        "hakiri.toml",
        f"""
        [project]
        name = "apply-test"

        [context]
        default_destination = "wh"

        [connections.wh]
        type = "postgres"
        url = "{pg_url}"

        [[pipeline]]
        id = "orders"
        source = {{ connector = "files", config = {{ path = "data/orders/*.csv", columns = {{ id = "bigint", amount = "double", note = "string" }} }} }}
        tables = ["orders"]
        destination = {{ connector = "postgres", config = {{ connection = "wh", schema = "{pg_schema}" }} }}
        load = {{ mode = "append" }}

        [[pipeline]]
        id = "people"
        source = {{ connector = "files", config = {{ path = "data/people/*.csv" }} }}
        tables = ["people"]
        destination = {{ connector = "postgres", config = {{ connection = "wh", schema = "{pg_schema}" }} }}
        load = {{ mode = "upsert", upsert_key = ["id"] }}
    """,
    )
    p.write("data/orders/a.csv", "id,amount,note\n1,9.5,first\n2,3.0,\n")
    p.write("data/orders/b.csv", "id,amount,note\n3,1.25,third\n")
    p.write("data/people/p.csv", "id,name\n1,Ada\n2,Grace\n")
    return p


def test_apply_loads_every_file_and_a_second_apply_is_a_no_op(project) -> None:
    result = project.cli("apply")
    assert result.exit_code == 0, result.stderr
    assert project.rows("orders") == [
        (1, 9.5, "first"),
        (2, 3.0, None),
        (3, 1.25, "third"),
    ]  # '' -> NULL
    assert [r[1] for r in project.rows("people")] == ["Ada", "Grace"]

    runs = json.loads(project.cli("runs", "orders", "--json").stdout)
    assert [(r["status"], r["row_count"]) for r in runs] == [("success", 3)]

    again = project.cli("apply")
    assert again.exit_code == 0
    assert "no changes: every pipeline is up to date" in again.stdout
    assert len(json.loads(project.cli("runs", "orders", "--json").stdout)) == 1
    assert project.cli("plan", "--detailed-exitcode").exit_code == 0


def test_a_three_file_directory_loads_once_and_a_fourth_file_loads_alone(project) -> None:
    project.write("data/orders/c.csv", "id,amount,note\n4,2.0,third file\n")
    first = project.cli("apply", "orders", "--json")
    assert first.exit_code == 0, first.stderr
    [outcome] = json.loads(first.stdout)
    assert (outcome["status"], outcome["rows"], outcome["batches"]) == ("success", 4, 3)
    assert json.loads(project.cli("apply", "orders", "--json").stdout)[0]["status"] == "no-op"

    project.write("data/orders/d.csv", "id,amount,note\n5,2.0,fourth\n")
    result = project.cli("apply", "orders", "--json")
    assert result.exit_code == 0, result.stderr
    [outcome] = json.loads(result.stdout)
    assert (outcome["status"], outcome["rows"], outcome["batches"]) == ("success", 1, 1)
    assert [r[0] for r in project.rows("orders")] == [1, 2, 3, 4, 5]


def test_a_failing_pipeline_is_one_line_and_the_others_still_run(project) -> None:
    with psycopg.connect(project.pg_url, autocommit=True) as conn:  # a target whose type clashes
        conn.execute(
            sql.SQL("CREATE TABLE {} (id bigint, amount date, note text)").format(
                sql.Identifier(project.schema, "orders")
            )
        )
    result = project.cli("apply", "orders", "people")
    assert result.exit_code == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith("error: orders: ")
    assert "Traceback" not in result.stderr and "at org." not in result.stderr
    assert [r[1] for r in project.rows("people")] == ["Ada", "Grace"]
    with psycopg.connect(project.pg_url) as conn:
        assert conn.execute(
            sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(project.schema, "orders"))
        ).fetchone() == (0,)
    runs = json.loads(project.cli("runs", "orders", "--json").stdout)
    assert runs[0]["status"] == "failed" and runs[0]["error_kind"]


def test_fail_fast_stops_at_the_first_failure(project) -> None:
    project.write("data/orders/a.csv", "id,amount,note\nnot-a-number,1,x\n")
    result = project.cli("apply", "orders", "people", "--fail-fast")
    assert result.exit_code == 1
    with psycopg.connect(project.pg_url) as conn:
        exists = conn.execute("SELECT to_regclass(%s)", [f'"{project.schema}".people']).fetchone()
    assert exists == (None,)


def test_a_pipeline_without_a_connection_loads_into_the_context_store(project) -> None:
    from deltalake import DeltaTable

    project.write(
        "pipelines/ctx.json",
        json.dumps(
            {
                "id": "ctx",
                "source": {"connector": "files", "config": {"path": "data/people/*.csv"}},
                "tables": ["people_copy"],
                "destination": {"connector": "context"},
            }
        ),
    )
    result = project.cli("apply", "ctx")
    assert result.exit_code == 0, result.stderr
    table = DeltaTable(project.root / ".hakiri" / "context" / "people_copy")
    assert sorted(table.to_pyarrow_table().column("name").to_pylist()) == ["Ada", "Grace"]
    assert "no changes" in project.cli("apply", "ctx").stdout


def test_a_pipeline_running_elsewhere_is_not_run_twice(project) -> None:
    url = f"sqlite:///{project.root / '.hakiri' / 'state.sqlite'}"
    with Catalog.open(url, migrate=True) as catalog:
        lease = catalog.acquire_lease("orders", "otherhost:4242:abcd", 600)
        assert lease.acquired
    result = project.cli("apply", "orders")
    assert result.exit_code == 1
    assert "already running on" in result.stderr
    assert datetime.now(UTC).strftime("%Y") in result.stderr


def test_a_run_that_loses_its_lease_stops_between_batches(project) -> None:
    from hakiri.services.apply import apply_project

    url = f"sqlite:///{project.root / '.hakiri' / 'state.sqlite'}"

    def break_the_lease(pipeline_id: str, done: int, total: int, rows: int) -> None:
        # Another replica decides this run is dead and takes the pipeline over.
        with Catalog.open(url, migrate=True) as catalog:
            ours = catalog.acquire_lease(pipeline_id, "probe", 1)  # not acquired: says who holds it
            catalog.release_lease(pipeline_id, ours.holder)
            assert catalog.acquire_lease(pipeline_id, "otherhost:1:x", 600).acquired

    [outcome] = apply_project(project.root, ["orders"], on_batch=break_the_lease)
    assert outcome.status == "failed"
    assert "lost its lease" in (outcome.error or "")
    assert outcome.batches == 1  # the first batch committed; the second never started
    assert len(project.rows("orders")) in (1, 2)  # a.csv has 2 rows, b.csv 1: one file loaded


@pytest.mark.parametrize("mode", ["append", "truncate"])
def test_provenance_columns_name_each_rows_file_and_batch(project, mode: str) -> None:
    import hashlib

    project.write(
        "pipelines/prov.json",
        json.dumps(
            {
                "id": "prov",
                "source": {
                    "connector": "files",
                    "config": {"path": "data/orders/*.csv", "provenance": True},
                },
                "tables": [{"name": "orders", "target": "orders_prov"}],
                "destination": {
                    "connector": "postgres",
                    "config": {"connection": "wh", "schema": project.schema},
                },
                "load": {"mode": mode},
            }
        ),
    )
    project.write("data/orders/c d.csv", "id,amount,note\n4,1.0,spaced\n")  # a name to URI-encode
    result = project.cli("apply", "prov")
    assert result.exit_code == 0, result.stderr
    digest = {
        name: "sha256:"
        + hashlib.sha256((project.root / "data/orders" / name).read_bytes()).hexdigest()
        for name in ("a.csv", "b.csv", "c d.csv")
    }
    rows = project.query(
        sql.SQL('SELECT id, "_source_file_hash", "_hakiri_batch_id" FROM {} ORDER BY id').format(
            sql.Identifier(project.schema, "orders_prov")
        )
    )
    assert [(r[0], r[1]) for r in rows] == [
        (1, digest["a.csv"]),
        (2, digest["a.csv"]),
        (3, digest["b.csv"]),
        (4, digest["c d.csv"]),
    ]
    batches = {r[2] for r in rows}
    if mode == "append":  # one batch per file, named by its content
        assert batches == {f"file:orders:{d.removeprefix('sha256:')}" for d in digest.values()}
    else:  # one snapshot batch for the whole table
        [batch] = batches
        assert batch.startswith("snapshot:orders:")


@pytest.mark.parametrize("on_change", ["reload", "ignore", "error"])
def test_a_loaded_file_that_changes_follows_on_change(project, on_change: str) -> None:
    project.write(
        "pipelines/chg.json",
        json.dumps(
            {
                "id": "chg",
                "source": {
                    "connector": "files",
                    "config": {
                        "path": "data/orders/a.csv",
                        "columns": {"id": "bigint", "amount": "double", "note": "string"},
                        "on_change": on_change,
                    },
                },
                "tables": [{"name": "orders", "target": "orders_chg"}],
                "destination": {
                    "connector": "postgres",
                    "config": {"connection": "wh", "schema": project.schema},
                },
                "load": {"mode": "append"},
            }
        ),
    )
    assert project.cli("apply", "chg").exit_code == 0
    project.write("data/orders/a.csv", "id,amount,note\n1,9.5,first\n2,3.0,\n7,7.0,added\n")
    result = project.cli("apply", "chg")
    ids = [r[0] for r in project.rows("orders_chg")]
    if on_change == "reload":  # the new content is a new batch: appended as a whole
        assert result.exit_code == 0, result.stderr
        assert ids == [1, 1, 2, 2, 7]
    elif on_change == "ignore":
        assert result.exit_code == 0 and "no changes" in result.stdout
        assert ids == [1, 2]
    else:
        assert result.exit_code == 1
        assert (
            "data/orders/a.csv changed after it was loaded (on_change = 'error')" in result.stderr
        )
        assert ids == [1, 2]


def test_a_pipeline_removed_from_the_manifests_is_retired_by_apply(project) -> None:
    assert project.cli("apply").exit_code == 0
    toml = (project.root / "hakiri.toml").read_text()
    project.write("hakiri.toml", toml[: toml.index('[[pipeline]]\nid = "people"')])
    assert project.cli("plan", "--detailed-exitcode").exit_code == 2  # 1 to retire

    result = project.cli("apply", "--json")
    assert result.exit_code == 0, result.stderr
    outcomes = {o["pipeline_id"]: o["status"] for o in json.loads(result.stdout)}
    assert outcomes == {"orders": "no-op", "people": "retired"}
    assert project.cli("plan", "--detailed-exitcode").exit_code == 0  # converged
    assert [r[1] for r in project.rows("people")] == ["Ada", "Grace"]  # its table is kept
    again = project.cli("apply")
    assert again.exit_code == 0 and "no changes" in again.stdout
