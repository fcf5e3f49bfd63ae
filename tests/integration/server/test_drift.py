"""Drift: a managed target changed by hand (a column added, a type changed, rows deleted) is
reported by `plan` (text and --json) and `status`, and by a running `serve` (its API and
one alert per change); a load marks the target again; under schema_policy = 'freeze' apply
refuses a target whose columns changed by hand."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.support.project import Project
from tests.support.serve import ServeProcess, files_manifest


def _project(root: Path, pg_url: str, schema: str, policy: str = "evolve") -> Project:
    project = Project(root, pg_url, schema)
    manifest = files_manifest(pg_url, schema) + f'schema_policy = "{policy}"\n'
    project.write("hakiri.toml", manifest + '\n[serve]\ndrift_interval = "1s"\n')
    project.write("data/a.csv", "id,name\n1,ada\n2,grace\n3,edsger\n")
    return project


def _hakiri(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`hakiri ARGS` as its own process, as CI runs it."""
    env = {k: v for k, v in os.environ.items() if k != "HAKIRI_CRASH_AT"}
    return subprocess.run(
        [sys.executable, "-m", "hakiri.cli.main", *args, "--project", str(root)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def _plan_drift(root: Path) -> list[dict[str, Any]]:
    done = _hakiri(root, "plan", "--json")
    assert done.returncode == 0, done.stderr
    [pipeline] = json.loads(done.stdout)["pipelines"]
    return pipeline["drift"]


def _drift_alerts(serve: ServeProcess) -> list[str]:
    alerts = serve.get("/v1/alerts", pipeline_id="p").json()
    return [a["message"] for a in alerts if a["kind"] == "drift"]


def test_changes_by_hand_are_reported_by_plan_status_and_once_each_by_serve(
    tmp_path: Path, pg_url: str, pg_schema: str, spark: object
) -> None:
    project = _project(tmp_path, pg_url, pg_schema)
    assert project.cli("apply").exit_code == 0
    assert _plan_drift(tmp_path) == []
    target = f"{pg_schema}.t"

    project.query(f'ALTER TABLE "{pg_schema}".t ADD COLUMN note text')
    done = _hakiri(tmp_path, "plan")
    assert done.returncode == 0, done.stderr
    assert (
        f"drift: {target} changed by hand since hakiri last loaded it: column note added (text)"
    ) in " ".join((done.stdout + done.stderr).split())
    [drift] = _plan_drift(tmp_path)
    assert drift["columns_added"] == [{"name": "note", "type": "text"}]
    assert (drift["rows"], drift["columns_retyped"]) == (None, [])

    with ServeProcess(tmp_path) as serve:
        serve.wait_ready()
        serve.wait_for(lambda: _drift_alerts(serve), 60, "the drift alert")
        [added] = _drift_alerts(serve)
        assert added.endswith("column note added (text)")
        [status] = [p for p in serve.get("/v1/pipelines").json() if p["pipeline_id"] == "p"]
        assert [d["columns_added"] for d in status["drift"]] == [[{"name": "note", "type": "text"}]]

        project.query(f'ALTER TABLE "{pg_schema}".t ALTER COLUMN name TYPE varchar(40)')
        serve.wait_for(lambda: len(_drift_alerts(serve)) == 2, 60, "the type change's alert")
        assert (
            "column name changed type from text to character varying(40)"
            in (_drift_alerts(serve)[0])
        )

        project.query(f'DELETE FROM "{pg_schema}".t WHERE id = 1')
        serve.wait_for(lambda: len(_drift_alerts(serve)) == 3, 60, "the deleted rows' alert")
        assert _drift_alerts(serve)[0].endswith("1 row deleted")
        # Checked every second: each change was alerted once, not once per check.
        serve.wait_for(lambda: "p: drift:" in serve.log, 10, "the log line")
        before = serve.log.count("p: drift:")
        time.sleep(3)
        assert len(_drift_alerts(serve)) == 3
        assert serve.log.count("p: drift:") == before
        assert serve.terminate() == 0

    status = _hakiri(tmp_path, "status", "p", "--json")
    assert status.returncode == 0, status.stderr
    [drift] = json.loads(status.stdout)["drift"]
    assert drift["rows"] == {"was": 3, "now": 2}
    assert drift["columns_retyped"] == [
        {"name": "name", "was": "text", "now": "character varying(40)"}
    ]

    # evolve: apply loads the target as it is now, and marks it again: no drift after.
    project.write("data/b.csv", "id,name\n4,barbara\n")
    assert project.cli("apply").exit_code == 0
    assert _plan_drift(tmp_path) == []
    assert [r[:2] for r in project.rows("t")] == [(2, "grace"), (3, "edsger"), (4, "barbara")]


def test_freeze_refuses_to_load_a_target_whose_columns_changed_by_hand(
    tmp_path: Path, pg_url: str, pg_schema: str, spark: object
) -> None:
    project = _project(tmp_path, pg_url, pg_schema, policy="freeze")
    assert project.cli("apply").exit_code == 0
    project.query(f'ALTER TABLE "{pg_schema}".t DROP COLUMN name')
    project.write("data/b.csv", "id,name\n4,barbara\n")

    done = _hakiri(tmp_path, "apply")
    assert done.returncode == 1
    said = " ".join(done.stderr.split())
    assert f"{pg_schema}.t changed by hand since hakiri last loaded it: column name dropped" in said
    assert "schema_policy = 'freeze'" in said and "Traceback" not in done.stderr
    assert project.rows("t") == [(1,), (2,), (3,)]  # nothing loaded
