"""`hakiri plan` against real targets and both catalog backends, through the CLI."""

from __future__ import annotations

import json
import subprocess
import sys

import psycopg
from typer.testing import CliRunner

from hakiri.cli.main import app


def plan(project, *args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(
        app, ["plan", *args], env={**project.env, **(env or {})}, catch_exceptions=False
    )


def plan_json(project, *args: str) -> dict:
    result = plan(project, "--json", *args)
    assert result.exit_code in (0, 2), result.stderr
    return json.loads(result.stdout)


def actions(document: dict) -> dict[str, str]:
    return {p["id"]: p["action"] for p in document["pipelines"]}


def test_empty_catalog_means_every_pipeline_is_added(plan_project) -> None:
    document = plan_json(plan_project)
    assert actions(document) == {"events": "add", "orders": "add"}
    assert document["catalog"]["initialized"] is False
    orders = next(p for p in document["pipelines"] if p["id"] == "orders")
    [target] = orders["targets"]
    assert target["create"] is True and target["target"] == f"{plan_project.schema}.orders"
    assert [c["name"] for c in target["columns"]] == ["id", "amount"]
    assert orders["pending"][0]["new_files"] == ["data/orders/2026-01-01.csv"]

    result = plan(plan_project, "--detailed-exitcode")
    assert result.exit_code == 2
    assert "Plan: 2 to add, 0 to change, 0 to retire." in result.stdout
    # plan wrote nothing: no catalog file, no context table, no PostgreSQL table
    assert not (plan_project.root / ".hakiri").exists()
    with psycopg.connect(plan_project.pg_url) as conn:
        tables = conn.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = %s", [plan_project.schema]
        ).fetchone()
    assert tables == (0,)


def test_after_an_apply_everything_is_a_no_op(plan_project) -> None:
    plan_project.create_orders_target()
    plan_project.record_apply()
    document = plan_json(plan_project)
    assert actions(document) == {"events": "no-op", "orders": "no-op"}
    assert document["summary"]["pending"] == 0
    result = plan(plan_project, "--detailed-exitcode")
    assert result.exit_code == 0, result.stderr
    assert "Plan: 0 to add, 0 to change, 0 to retire. 2 unchanged." in result.stdout


def test_an_edited_manifest_shows_the_field_diff(plan_project) -> None:
    plan_project.create_orders_target()
    plan_project.record_apply()
    edit = CliRunner().invoke(
        app,
        [
            "pipeline",
            "edit",
            "orders",
            "--set",
            "schedule=every 1h",
            "--set",
            "load.backup_before_load=true",
        ],
        env=plan_project.env,
    )
    assert edit.exit_code == 0, edit.stderr
    document = plan_json(plan_project, "orders")
    [orders] = document["pipelines"]
    assert orders["action"] == "change"
    assert [(d["path"], d["before"], d["after"]) for d in orders["diff"]] == [
        ("schedule", None, "every 1h"),
        ("load.backup_before_load", False, True),
    ]
    result = plan(plan_project, "orders", "--detailed-exitcode")
    assert result.exit_code == 2
    assert '~ schedule: null -> "every 1h"' in result.stdout


def test_a_new_source_column_and_new_data_are_reported(plan_project) -> None:
    plan_project.create_orders_target()
    plan_project.record_apply()
    plan_project.write("data/orders/2026-01-01.csv", "id,amount,coupon\n1,10.5,X\n")
    plan_project.write("data/orders/2026-01-02.csv", "id,amount,coupon\n3,1.0,\n")
    [orders] = plan_json(plan_project, "orders")["pipelines"]
    assert orders["action"] == "change"
    assert [c["name"] for c in orders["targets"][0]["add_columns"]] == ["coupon"]
    work = orders["pending"][0]
    assert work["new_files"] == ["data/orders/2026-01-02.csv"]
    assert work["changed_files"] == ["data/orders/2026-01-01.csv"]


def test_a_missing_target_is_reported_for_creation(plan_project) -> None:
    plan_project.record_apply()  # applied, but the target table is gone
    [orders] = plan_json(plan_project, "orders")["pipelines"]
    assert orders["action"] == "change"
    assert orders["targets"][0]["create"] is True
    assert plan(plan_project, "orders", "--detailed-exitcode").exit_code == 2


def test_an_unreachable_target_is_one_error_line_for_that_pipeline(plan_project) -> None:
    bad = "postgresql://loader:hunter2@127.0.0.1:1/nowhere"
    result = plan(plan_project, "--detailed-exitcode", env={"WH_URL": bad})
    assert result.exit_code == 1
    errors = [
        line.strip() for line in result.output.splitlines() if line.strip().startswith("error:")
    ]
    # the pipeline's error (in the plan, on stdout), then the summary (on stderr)
    assert len(errors) == 2, result.output
    assert "cannot connect to PostgreSQL" in errors[0] and "hunter2" not in result.output
    assert "+ events" in result.stdout  # the other pipeline is still planned
    assert "Traceback" not in result.stderr
    document = json.loads(plan(plan_project, "--json", env={"WH_URL": bad}).stdout)
    orders = next(p for p in document["pipelines"] if p["id"] == "orders")
    assert len(orders["errors"]) == 1 and document["summary"]["errors"] == 1


def test_a_pipeline_removed_from_the_manifests_is_retired(plan_project) -> None:
    plan_project.create_orders_target()
    plan_project.record_apply()
    text = (plan_project.root / "hakiri.toml").read_text()
    (plan_project.root / "hakiri.toml").write_text(
        text[: text.index('[[pipeline]]\nid = "events"')]
    )
    document = plan_json(plan_project)
    assert actions(document) == {"events": "retire", "orders": "no-op"}
    assert plan(plan_project, "--detailed-exitcode").exit_code == 2


def test_plan_never_imports_spark(plan_project) -> None:
    script = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from hakiri.cli.main import app\n"
        f"result = CliRunner().invoke(app, ['plan', '--json', '--project', {str(plan_project.root)!r}], env={plan_project.env!r})\n"
        "assert result.exit_code == 0, result.output\n"
        "jvm = sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'py4j'))\n"
        "print(jvm)\n"
        "sys.exit(1 if jvm else 0)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr
