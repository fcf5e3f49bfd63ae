"""`hakiri backfill rewind`: a vendor corrected rows without touching the cursor; load that window again."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from hakiri.catalog.records import BatchStatus
from hakiri.catalog.store import Catalog
from hakiri.catalog.url import catalog_url
from tests.support.project import Project, postgres_project
from tests.support.tables import make_source
from tests.support.tables import table_project as _table_project

ROWS = 1_000  # updated_at 2024-01-01 00:01 .. 16:40: chunks [00:01, 06:01) [06:01, 12:01) [12:01, 16:40]
WINDOW = """
[pipeline.backfill]
window = "6h"
"""


def table_project(root: Path, pg_url: str, schema: str, **options: str | None) -> Project:
    """The shared table-source project, backfilled in 6-hour chunks unless `body` says otherwise."""
    return _table_project(root, pg_url, schema, **{"body": WINDOW, **options})  # type: ignore[arg-type]


def differences(project: Project) -> list[tuple]:
    """Rows of src and dst that differ, either way (empty when the target equals the source)."""
    s = project.schema
    return project.query(
        f'(SELECT id, amount, updated_at FROM "{s}".src EXCEPT '
        f' SELECT id, amount, updated_at FROM "{s}".dst) UNION ALL '
        f'(SELECT id, amount, updated_at FROM "{s}".dst EXCEPT '
        f' SELECT id, amount, updated_at FROM "{s}".src)'
    )


def chunk_batches(project: Project) -> list:
    url = catalog_url(project.root, None, os.environ)
    with Catalog.open(url, migrate=False) as catalog:
        return [b for b in catalog.batches("p") if b.kind == "chunk"]


def apply(project: Project) -> dict:
    result = project.cli("apply", "p", "--json")
    assert result.exit_code == 0, result.stderr
    [outcome] = json.loads(result.stdout)
    return outcome


def refused(project: Project, *args: str) -> tuple[str, str]:
    """Run a command that must fail cleanly; its `error:` and `hint:` lines."""
    result = project.cli(*args)
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 2, result.stderr
    assert lines[0].startswith("error: ") and lines[1].startswith("  hint: "), result.stderr
    return lines[0].removeprefix("error: "), lines[1].removeprefix("  hint: ")


def test_a_rewound_window_is_loaded_again_under_a_new_generation(
    tmp_path: Path, pg_url: str, pg_schema: str, spark
) -> None:
    project = table_project(tmp_path, pg_url, pg_schema)
    make_source(project)
    first = apply(project)
    assert (first["status"], first["rows"], first["batches"]) == ("success", ROWS, 3)
    assert differences(project) == []

    # The vendor corrects amounts of 05:00..06:59 (ids 300..419) and leaves updated_at alone.
    s = pg_schema
    project.query(f'UPDATE "{s}".src SET amount = amount + 1000 WHERE id BETWEEN 300 AND 419')
    assert apply(project)["status"] == "no-op"  # the cursor did not move: nothing new to read
    assert len(differences(project)) == 2 * 120

    result = project.cli(
        "backfill",
        "rewind",
        "p",
        "--from",
        "2024-01-01T05:00:00Z",
        "--to",
        "2024-01-01 07:00",
        "--reason",
        "vendor fix RT-481",
        "--json",
    )
    assert result.exit_code == 0, result.stderr
    rewound = json.loads(result.stdout)
    assert {k: rewound[k] for k in ("pipeline_id", "table", "from", "to", "generation")} == {
        "pipeline_id": "p",
        "table": "src",
        "from": "2024-01-01T05:00:00+00:00",
        "to": "2024-01-01T07:00:00+00:00",
        "generation": 1,
    }
    assert rewound["already_pending"] == 0
    assert [c["predicate"] for c in rewound["chunks"]] == [
        "(updated_at >= 2024-01-01T00:01:00+00:00 AND updated_at < 2024-01-01T06:01:00+00:00) "
        "OR updated_at IS NULL",
        "updated_at >= 2024-01-01T06:01:00+00:00 AND updated_at < 2024-01-01T12:01:00+00:00",
    ]
    assert json.loads(project.cli("status", "p", "--json").stdout)["phase"] == "backfilling"
    assert len(differences(project)) == 2 * 120  # a rewind itself moves no data

    reload = apply(project)
    assert (reload["status"], reload["batches"], reload["rows"]) == ("success", 2, 720)
    assert differences(project) == []

    batches = chunk_batches(project)
    old = [b for b in batches if b.generation == 0]
    new = [b for b in batches if b.generation == 1]
    assert len(old) == 3 and {b.status for b in old} == {BatchStatus.COMMITTED}
    assert len(new) == 2 and {b.status for b in new} == {BatchStatus.COMMITTED}
    assert {b.batch_id for b in new} == {c["batch_id"] for c in rewound["chunks"]}
    assert {b.run_id for b in new} == {reload["run_id"]}
    assert {b.run_id for b in old} == {first["run_id"]}
    assert {b.predicate for b in new} < {b.predicate for b in old}  # the same ranges again

    state = json.loads(project.cli("status", "p", "--json").stdout)
    assert state["phase"] == "streaming"
    assert state["cursors"]["src"]["value"] == state["cursors"]["src"]["planned_to"]

    history = project.cli("backfill", "history", "p", "--json")
    assert history.exit_code == 0, history.stderr
    [entry] = json.loads(history.stdout)
    assert {k: entry[k] for k in ("table", "from", "to", "reason", "generation", "chunks")} == {
        "table": "src",
        "from": "2024-01-01T05:00:00+00:00",
        "to": "2024-01-01T07:00:00+00:00",
        "reason": "vendor fix RT-481",
        "generation": 1,
        "chunks": 2,
    }
    assert entry["created_at"]
    text = project.cli("backfill", "history", "p")
    assert "vendor fix RT-481" in text.stdout

    runs = len(json.loads(project.cli("runs", "p", "--json").stdout))
    assert apply(project)["status"] == "no-op"
    assert len(json.loads(project.cli("runs", "p", "--json").stdout)) == runs


def test_rewind_refuses_windows_it_cannot_rewind(
    tmp_path: Path, pg_url: str, pg_schema: str, spark
) -> None:
    project = table_project(tmp_path, pg_url, pg_schema)
    make_source(project)
    apply(project)

    def rewind(start: str, end: str, *more: str) -> tuple[str, str]:
        return refused(project, "backfill", "rewind", "p", "--from", start, "--to", end, *more)

    reason = ("--reason", "fix")
    assert rewind("yesterday", "2024-01-02", *reason) == (
        "'yesterday' is not an ISO 8601 date or timestamp, but updated_at is a timestamp cursor",
        "write it like 2024-01-31 or 2024-01-31T12:00:00Z",
    )
    assert rewind("2024-01-02", "2024-01-01", *reason) == (
        "--from 2024-01-02T00:00:00+00:00 is after --to 2024-01-01T00:00:00+00:00",
        "give the window's start with --from and its end with --to",
    )
    message, hint = rewind("2030-01-01", "2030-02-01", *reason)
    assert message == (
        "no loaded chunk of p.src overlaps updated_at from 2030-01-01T00:00:00+00:00 to "
        "2030-02-01T00:00:00+00:00; its chunks cover 2024-01-01T00:01:00+00:00 to "
        "2024-01-01T16:40:00+00:00"
    )
    assert hint == "`hakiri status p` shows the cursor's range"
    message, _ = rewind("2024-01-01", "2024-01-02", "--reason", "   ")
    assert message == "a rewind needs a reason"
    message, hint = rewind("2024-01-01", "2024-01-02", *reason, "--table", "nope")
    assert (message, hint) == ("pipeline `p` has no table `nope`", "its tables are: src")

    # Another process holds the pipeline's lease: no chunk is added under it.
    url = catalog_url(project.root, None, os.environ)
    with Catalog.open(url, migrate=False) as catalog:
        assert catalog.acquire_lease("p", "elsewhere:1:x", 60).acquired
        try:
            message, hint = rewind("2024-01-01", "2024-01-02", *reason)
        finally:
            catalog.release_lease("p", "elsewhere:1:x")
    assert message.startswith("pipeline `p` is already running on ")
    assert hint.startswith("wait for it to finish")
    assert all(b.generation == 0 for b in chunk_batches(project))
    history = project.cli("backfill", "history", "p")
    assert (history.exit_code, history.stderr.strip()) == (0, "no rewinds of p")

    # The last chunk, in text; asked again before an apply, it is already pending.
    args = ("backfill", "rewind", "p", "--from", "2024-01-01T16:00Z", "--to", "2024-01-02")
    done = project.cli(*args, "--reason", "late fix")
    assert done.exit_code == 0, done.stderr
    assert done.stdout.startswith(
        "rewound 1 chunk(s) of p.src between 2024-01-01T16:00:00+00:00 and "
        "2024-01-02T00:00:00+00:00 (generation 1): `hakiri apply p` reloads them\n"
    )
    again = project.cli(*args, "--reason", "late fix", "--json")
    assert again.exit_code == 0, again.stderr
    assert json.loads(again.stdout)["already_pending"] == 1
    assert json.loads(again.stdout)["chunks"] == []
    assert len(json.loads(project.cli("backfill", "history", "p", "--json").stdout)) == 1


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        (
            "append",
            (
                "rewind reloads rows that are already in the target; mode 'append' of pipeline "
                "`p` would load them twice",
                "use mode = 'upsert' with an upsert_key (reloaded rows replace themselves), "
                "replace_window (the window is replaced) or scd2 (a version already there is "
                "kept)",
            ),
        ),
        (
            "files",
            (
                "pipeline `p` reads a files source; rewind re-reads cursor ranges, which only "
                "PostgreSQL table sources have",
                "a files source reloads a file when its content changes; replace the file instead",
            ),
        ),
        (
            "no cursor",
            (
                "table p.src has no incremental cursor; rewind re-reads cursor ranges, and this "
                "table is loaded whole on each apply",
                'set `incremental = "<column>"` to load it in chunks; until then a changed table '
                "is reloaded by the next apply",
            ),
        ),
        (
            "never applied",
            (
                "p.src has no cursor state yet: it was never loaded, so there is nothing to rewind",
                "`hakiri apply p` loads it first",
            ),
        ),
        (
            "several tables",
            ("pipeline `p` reads 2 tables (src, other)", "pick the one to rewind with --table"),
        ),
        ("unknown", ("no pipeline `nope`", "`hakiri validate` lists the pipelines")),
    ],
)
def test_rewind_refuses_pipelines_it_cannot_rewind(
    tmp_path: Path, pg_url: str, pg_schema: str, case: str, expected: tuple[str, str]
) -> None:
    if case == "append":
        project = table_project(tmp_path, pg_url, pg_schema, load='{ mode = "append" }')
    elif case == "files":
        project = postgres_project(
            tmp_path,
            pg_url,
            pg_schema,
            source='{ path = "data/*.csv" }',
            body='load = { mode = "upsert", upsert_key = ["id"] }',
        )
    elif case == "several tables":
        tables = '[{ name = "src", incremental = "updated_at" }, "other"]'
        project = table_project(tmp_path, pg_url, pg_schema, tables=tables)
    elif case == "no cursor":
        project = table_project(tmp_path, pg_url, pg_schema, incremental=None, body="")
    else:
        project = table_project(tmp_path, pg_url, pg_schema)
    pipeline = "nope" if case == "unknown" else "p"
    args = ("--from", "2024-01-01", "--to", "2024-01-02", "--reason", "fix")
    assert refused(project, "backfill", "rewind", pipeline, *args) == expected
    if case == "unknown":
        assert refused(project, "backfill", "history", pipeline) == expected
