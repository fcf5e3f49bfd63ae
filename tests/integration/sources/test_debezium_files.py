"""Files of Debezium change events mirrored with cdc_mirror: creates, snapshot reads,
updates (one leaving an unchanged TOASTed value as Debezium's placeholder), a key change
as a delete and a create, deletes; file after file, each equal to replaying the events."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.project import Project

pytestmark = pytest.mark.integration

UNAVAILABLE = "__debezium_unavailable_value"


def _event(op: str, lsn: int, before: dict | None, after: dict | None) -> str:
    source = {"connector": "postgresql", "db": "shop", "table": "items", "lsn": lsn}
    return json.dumps(
        {
            "before": before,
            "after": after,
            "source": source,
            "op": op,
            "ts_ms": 1_700_000_000_000 + lsn,
        }
    )


def _row(i: int, name: str, note: str) -> dict:
    return {"id": i, "name": name, "note": note}


def _project(tmp_path: Path, pg_url: str, schema: str) -> Project:
    project = Project(tmp_path, pg_url, schema)
    project.write(
        "hakiri.toml",
        f"""
        [project]
        name = "dbz"

        [connections.wh]
        type = "postgres"
        url = "{pg_url}"

        [[pipeline]]
        id = "items"
        tables = ["items"]
        load = {{ mode = "cdc_mirror", upsert_key = ["id"] }}
        destination = {{ connector = "postgres", config = {{ connection = "wh", schema = "{schema}" }} }}
        source = {{ connector = "files", config = {{ path = "changes/*.jsonl", format = "jsonl", changes = "debezium" }} }}
        """,
    )
    return project


def test_change_files_mirror_in_order(tmp_path: Path, pg_url: str, pg_schema: str, spark) -> None:
    project = _project(tmp_path, pg_url, pg_schema)
    first = [
        _event("r", 10, None, _row(1, "a", "n1")),
        _event("r", 10, None, _row(2, "b", "n2")),
        _event("r", 10, None, _row(3, "c", "n3")),
        _event("c", 20, None, _row(4, "d", "n4")),
        _event("u", 30, _row(2, "b", "n2"), _row(2, "b2", "n2")),
    ]
    project.write("changes/0001.jsonl", "\n".join(first) + "\n")
    done = project.cli("apply")
    assert done.exit_code == 0, done.output
    rows = project.query(f'SELECT id, name, note FROM "{pg_schema}".items ORDER BY id')
    assert rows == [(1, "a", "n1"), (2, "b2", "n2"), (3, "c", "n3"), (4, "d", "n4")]

    second = [
        _event("u", 50, None, _row(2, "b4", "n2")),  # out of file order: the lsn decides
        _event("u", 40, None, {"id": 1, "name": "a1", "note": UNAVAILABLE}),
        _event("u", 45, None, _row(2, "b3", "n2")),
        _event("d", 60, _row(3, "c", "n3"), None),
        _event("d", 70, {"id": 4, "name": "d", "note": "n4"}, None),  # a key change ...
        _event("c", 70, None, _row(40, "d", "n4")),  # ... is a delete and a create
    ]
    project.write("changes/0002.jsonl", "\n".join(second) + "\n")
    done = project.cli("apply")
    assert done.exit_code == 0, done.output
    rows = project.query(f'SELECT id, name, note FROM "{pg_schema}".items ORDER BY id')
    assert rows == [(1, "a1", "n1"), (2, "b4", "n2"), (40, "d", "n4")]
    columns = project.query(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = %s "
        "AND table_name = 'items' ORDER BY ordinal_position",
        pg_schema,
    )
    assert [c for (c,) in columns] == ["id", "name", "note"]


def test_a_truncate_event_fails_the_file_in_one_line(
    tmp_path: Path, pg_url: str, pg_schema: str, spark
) -> None:
    project = _project(tmp_path, pg_url, pg_schema)
    events = [_event("c", 10, None, _row(1, "a", "n")), _event("t", 20, None, None)]
    project.write("changes/0001.jsonl", "\n".join(events) + "\n")
    done = project.cli("apply")
    assert done.exit_code == 1
    assert "truncate" in done.output and "Traceback" not in done.output
    assert project.query(
        "SELECT count(*) FROM information_schema.tables WHERE table_schema = %s", pg_schema
    ) == [(0,)]


def test_change_events_need_cdc_mirror(tmp_path: Path, pg_url: str, pg_schema: str) -> None:
    project = _project(tmp_path, pg_url, pg_schema)
    text = (project.root / "hakiri.toml").read_text()
    text = text.replace('mode = "cdc_mirror"', 'mode = "upsert"')
    (project.root / "hakiri.toml").write_text(text)
    done = project.cli("validate")
    assert done.exit_code == 1 and "change events" in done.output
