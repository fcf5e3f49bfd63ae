"""The `source_diff` validator: after a run's loads, the target compared with its source by
key; past the tolerance it alerts (warn) or fails the run (abort)."""

from __future__ import annotations

import json
from pathlib import Path

from hakiri.catalog.store import Catalog
from tests.support.project import Project
from tests.support.tables import table_project


def _project(root: Path, pg_url: str, schema: str, validator: str) -> Project:
    return table_project(
        root,
        pg_url,
        schema,
        incremental='"id"',  # new ids only: an update of a loaded row is never read again
        body=f"validate = {{ dataset = [{validator}] }}",
    )


def _alerts(root: Path) -> list[str]:
    url = f"sqlite:///{root / '.hakiri' / 'state.sqlite'}"
    with Catalog.open(url, migrate=False) as catalog:
        return [a.message for a in catalog.alerts(kind="validator")]


def test_source_diff_warns_or_aborts_past_its_tolerance(
    tmp_path: Path, pg_url: str, pg_schema: str, spark
) -> None:
    s = pg_schema
    project = _project(tmp_path, pg_url, s, '{ type = "source_diff", on_fail = "warn" }')
    project.query(f'CREATE TABLE "{s}".src (id bigint PRIMARY KEY, name text)')
    project.query(f"INSERT INTO \"{s}\".src VALUES (1, 'ada'), (2, 'grace'), (3, 'edsger')")
    result = project.cli("apply", "--json")
    assert result.exit_code == 0, result.stderr
    runs = json.loads(project.cli("runs", "p", "--json").stdout)
    [check] = runs[0]["quality"]["validators"]
    assert (check["check"], check["ok"]) == ("source_diff", True)
    assert _alerts(tmp_path) == []

    # An update of a loaded row: the cursor (new ids) never reads it again, the target drifts
    # from the source, and the validator says so.
    project.query(f"UPDATE \"{s}\".src SET name = 'Ada' WHERE id = 1")
    project.query(f"INSERT INTO \"{s}\".src VALUES (4, 'barbara')")
    assert project.cli("apply").exit_code == 0  # warn: the run succeeds
    expected = (
        f"source_diff({s}.dst): 1 row differs from the source (0 only in the source, "
        "0 only in the target, 1 changed; allowed 0)"
    )
    assert _alerts(tmp_path) == [expected]

    # abort: the run fails, with the validator's message and where to look.
    project = _project(tmp_path, pg_url, s, '{ type = "source_diff", on_fail = "abort" }')
    project.query(f"INSERT INTO \"{s}\".src VALUES (5, 'kurt')")
    result = project.cli("apply")
    assert result.exit_code == 1
    said = " ".join(result.stderr.split())
    assert f"validator source_diff({s}.dst): 1 row differs from the source" in said
    assert "hakiri diff p" in said and "Traceback" not in result.stderr
    runs = json.loads(project.cli("runs", "p", "--json").stdout)
    assert runs[0]["status"] == "failed"
    # What the run committed stays: the audit runs after the loads (docs/data-quality.md).
    assert [r[0] for r in project.rows("dst")] == [1, 2, 3, 4, 5]

    # A tolerance: 2 differing rows allowed, 2 differ.
    tolerant = '{ type = "source_diff", on_fail = "abort", max_differences = 2 }'
    project = _project(tmp_path, pg_url, s, tolerant)
    project.query(f"UPDATE \"{s}\".src SET name = 'Grace' WHERE id = 2")
    project.query(f"INSERT INTO \"{s}\".src VALUES (6, 'alan')")
    assert project.cli("apply").exit_code == 0
