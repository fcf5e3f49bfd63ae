"""Records that do not fit are named or set aside alike on every engine: a JSON file holding
one array with elements that do not fit its columns, and CSV records with the wrong number of
fields under on_malformed = "drop" (Sail's readers can do neither: hakiri's engine tasks split
such files there). The rows each target holds are read back by another reader: delta-rs for
the context store, psycopg for PostgreSQL."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from tests.support.project import Project

ARRAY = (
    "[\n"
    ' {"id": 1, "name": "a", "amount": 1.5, "day": "2026-01-01"},\n'
    ' {"id": "x2", "name": "b", "amount": 2, "day": "2026-01-02"},\n'  # a quoted id
    ' {"id": 3, "name": {"n": 1}, "amount": "3.25", "day": "2026-01-03"},\n'
    " 7,\n"  # not an object
    ' {"id": 5, "name": "e", "amount": 5, "day": "not a day"},\n'
    ' {"id": 6, "name": "f", "extra": true, "amount": 1.005},\n'
    ' {"id": 7.0, "name": 12.50, "amount": 123456789012, "day": ""},\n'  # 7.0 is no bigint
    ' {"id": 8, "name": true, "amount": null, "day": "2026-01-08T10:11:12"}\n'
    "]\n"
)
ARRAY_COLUMNS = (
    'columns = { id = "bigint", name = "string", amount = "decimal(10,2)", day = "date" }'
)
ARRAY_ROWS = [
    (1, "a", Decimal("1.50"), dt.date(2026, 1, 1)),
    (3, '{"n":1}', Decimal("3.25"), dt.date(2026, 1, 3)),  # any JSON value goes into a string
    (6, "f", Decimal("1.01"), None),
    (8, "true", None, dt.date(2026, 1, 8)),
]

CSV = (
    "id,name,note\n"
    "1,a,plain\n"
    "2,b\n"  # too few fields
    "3,c,x,extra\n"  # too many
    '4,"d, with comma",y\n'  # a quoted delimiter
    '5,e,"line one\n'  # a quoted newline ends the record, as Spark reads a line: 3 fields here,
    'line two"\n'  # and this line is a record of 1 field
    "6,f,z\n"
    '7,,""\n'
)
CSV_ROWS = [
    (1, "a", "plain"),
    (4, "d, with comma", "y"),
    (5, "e", "line one"),
    (6, "f", "z"),
    (7, None, None),
]


def _project(root: Path, pg_url: str, schema: str, destination: str, source: str) -> Project:
    project = Project(root, pg_url, schema)
    target = (
        f'destination = {{ connector = "postgres", config = {{ connection = "wh", schema = "{schema}" }} }}'
        if destination == "postgres"
        else ""
    )
    project.write(
        "hakiri.toml",
        f"""
        [project]
        name = "malformed"

        [connections.wh]
        type = "postgres"
        url = "{pg_url}"

        [[pipeline]]
        id = "p"
        source = {{ connector = "files", config = {{ {source} }} }}
        tables = ["t"]
        load = {{ mode = "append" }}
        {target}
        """,
    )
    return project


def _loaded(project: Project, destination: str, columns: str) -> list[tuple[Any, ...]]:
    names = columns.split(", ")
    if destination == "postgres":
        return project.query(f'SELECT {columns} FROM "{project.schema}".t ORDER BY id')
    table = DeltaTable(str(project.root / ".hakiri" / "context" / "t")).to_pyarrow_table()
    return sorted(tuple(row[n] for n in names) for row in table.to_pylist())


def _target_exists(project: Project, destination: str) -> bool:
    if destination == "postgres":
        return bool(
            project.query(
                "SELECT 1 FROM information_schema.tables WHERE table_schema = %s "
                "AND table_name = 't'",
                project.schema,
            )
        )
    return (project.root / ".hakiri" / "context" / "t").exists()


def _set_drop(project: Project) -> None:
    manifest = project.root / "hakiri.toml"
    text = manifest.read_text()
    manifest.write_text(text.replace('path = "data/', 'on_malformed = "drop", path = "data/'))


@pytest.mark.parametrize("destination", ["context", "postgres"])
def test_a_json_array_names_the_element_that_does_not_fit_and_drop_loads_the_rest(
    tmp_path: Path, pg_url: str, pg_schema: str, spark, destination: str
) -> None:
    project = _project(
        tmp_path,
        pg_url,
        pg_schema,
        destination,
        f'path = "data/*.json", format = "json", {ARRAY_COLUMNS}',
    )
    project.write("data/a.json", ARRAY)

    failed = project.cli("apply")

    assert failed.exit_code == 1
    message = " ".join(failed.stderr.split())
    assert (
        'data/a.json:3: malformed json record: element 2 of the array: id: "x2" is not bigint '
        "(4 malformed records in this batch)"
    ) in message
    assert "Traceback" not in failed.output
    assert not _target_exists(project, destination)  # nothing was written

    _set_drop(project)
    applied = project.cli("apply", "--json")

    assert applied.exit_code == 0, applied.stderr
    [outcome] = json.loads(applied.stdout)
    assert outcome["malformed"] == 4
    assert _loaded(project, destination, "id, name, amount, day") == ARRAY_ROWS


@pytest.mark.parametrize("destination", ["context", "postgres"])
def test_csv_records_of_the_wrong_width_are_dropped_and_counted(
    tmp_path: Path, pg_url: str, pg_schema: str, spark, destination: str
) -> None:
    project = _project(
        tmp_path,
        pg_url,
        pg_schema,
        destination,
        'path = "data/*.csv", on_malformed = "drop", '
        'columns = { id = "int", name = "string", note = "string" }',
    )
    project.write("data/a.csv", CSV)
    project.write("data/b.csv", "note,id,name\nq,10,j\n11,k\n")  # another header, one short record

    applied = project.cli("apply", "--json")

    assert applied.exit_code == 0, applied.stderr
    assert sum(outcome["malformed"] for outcome in json.loads(applied.stdout)) == 4
    assert _loaded(project, destination, "id, name, note") == [*CSV_ROWS, (10, "j", "q")]


def test_inferred_csv_and_json_lines_drop_alike(tmp_path: Path, spark) -> None:
    """Without declared columns: the types come from the records that fit."""
    project = _project(tmp_path, "", "", "context", 'path = "data/*.csv", on_malformed = "drop"')
    project.write("data/a.csv", CSV)
    assert project.cli("apply").exit_code == 0
    table = DeltaTable(str(tmp_path / ".hakiri" / "context" / "t")).to_pyarrow_table()
    assert [str(field.type) for field in table.schema] == ["int32", "string", "string"]
    assert sorted(tuple(r.values()) for r in table.to_pylist()) == CSV_ROWS

    lines = _project(
        tmp_path / "lines",
        "",
        "",
        "context",
        'path = "data/*.jsonl", format = "jsonl", on_malformed = "drop"',
    )
    lines.write(
        "data/e.jsonl",
        '{"id": 1, "x": "a"}\nnot json\n\n[1]\n{"id": 2.5, "y": {"k": true}}\n',
    )
    applied = lines.cli("apply", "--json")
    assert applied.exit_code == 0, applied.stderr
    assert json.loads(applied.stdout)[0]["malformed"] == 2
    table = DeltaTable(str(tmp_path / "lines" / ".hakiri" / "context" / "t")).to_pyarrow_table()
    assert [(f.name, str(f.type)) for f in table.schema] == [
        ("id", "double"),
        ("x", "string"),
        ("y", "struct<k: bool>"),
    ]
    assert sorted(table.to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1.0, "x": "a", "y": None},
        {"id": 2.5, "x": None, "y": {"k": True}},
    ]
