"""Dates and timestamps read with `date_format`/`timestamp_format` load the same rows on every
engine: hakiri parses its own pattern language (day names, month names, two-digit years,
1-or-2-digit fields, optional fractions, AM/PM), so Apache Spark and Sail cannot differ. Run on
both (HAKIRI_TEST_ENGINE=sail): the same expected rows on each is the comparison. A value that
does not read (Feb 30, a day name that is not the date's, another layout) is a malformed record:
named under on_malformed = "fail", set aside under "drop"."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from deltalake import DeltaTable

from tests.support.project import Project

DATE = "EEE, d MMM yy"
TIMESTAMP = "d/M/yyyy h:mm:ss[.SSS] a"
UTC = dt.UTC

CSV = """\
id,day,at
1,"Tue, 2 Jan 24",02/01/2024 1:05:00.5 PM
2,"friday, 29 MAR 24",9/3/2024 12:00:00 am
3,"Sun, 31 Dec 23",31/12/2023 11:59:59.999 pm
"""
JSONL = """\
{"id": 1, "day": "Tue, 2 Jan 24", "at": "02/01/2024 1:05:00.5 PM"}
{"id": 2, "day": "Fri, 29 Mar 24", "at": "9/3/2024 12:00:00 am"}
{"id": 3, "day": "Sun, 31 Dec 23", "at": "31/12/2023 11:59:59.999 pm"}
"""
# The weekday above is read as a name and checked: "friday" is not EEE (three letters).
EXPECTED = [
    (1, dt.date(2024, 1, 2), dt.datetime(2024, 1, 2, 13, 5, 0, 500000, tzinfo=UTC)),
    (2, None, dt.datetime(2024, 3, 9, 0, 0, tzinfo=UTC)),
    (3, dt.date(2023, 12, 31), dt.datetime(2023, 12, 31, 23, 59, 59, 999000, tzinfo=UTC)),
]


def _project(root: Path, pg_url: str, schema: str, pipelines: dict[str, str]) -> Project:
    """One pipeline per entry: id -> (its files source's inline config, its destination or
    "" for the context store); each loads table `<id>`."""
    project = Project(root, pg_url, schema)
    postgres = f'destination = {{ connector = "postgres", config = {{ connection = "wh", schema = "{schema}" }} }}'
    blocks = "".join(
        f"""
        [[pipeline]]
        id = "{pipeline_id}"
        source = {{ connector = "files", config = {config} }}
        tables = ["{pipeline_id}"]
        {postgres if pipeline_id.endswith("_pg") else ""}
        """
        for pipeline_id, config in pipelines.items()
    )
    project.write(
        "hakiri.toml",
        f"""
        [project]
        name = "datetime-patterns"

        [connections.wh]
        type = "postgres"
        url = "{pg_url}"
        """
        + blocks,
    )
    return project


def _context_rows(project: Project, table: str) -> list[tuple[Any, ...]]:
    found = DeltaTable(str(project.root / ".hakiri" / "context" / table)).to_pyarrow_table()
    return sorted(tuple(row.values()) for row in found.to_pylist())


def _one_line(text: str) -> str:
    return " ".join(text.split())


def test_custom_patterns_load_the_same_rows_into_postgres_and_the_context_store(
    tmp_path: Path, pg_url: str, pg_schema: str, spark
) -> None:
    formats = f'date_format = "{DATE}", timestamp_format = "{TIMESTAMP}"'
    declared = 'columns = { id = "bigint", day = "date", at = "timestamp" }'
    csv = f'{{ path = "data/visits.csv", {formats} }}'
    jsonl = f'{{ path = "data/visits.jsonl", format = "jsonl", {formats}, {declared} }}'
    project = _project(
        tmp_path,
        pg_url,
        pg_schema,
        {"csv_pg": csv, "csv_ctx": csv, "jsonl_pg": jsonl, "jsonl_ctx": jsonl},
    )
    project.write("data/visits.csv", CSV)
    project.write("data/visits.jsonl", JSONL)

    result = project.cli("apply")

    assert result.exit_code == 0, result.output
    # CSV infers: `day` is a date only if every value reads, and "friday" does not (EEE) —
    # so `day` is text there, and each engine says so the same way.
    csv_rows = [
        (1, "Tue, 2 Jan 24", EXPECTED[0][2]),
        (2, "friday, 29 MAR 24", EXPECTED[1][2]),
        (3, "Sun, 31 Dec 23", EXPECTED[2][2]),
    ]
    assert project.rows("csv_pg") == csv_rows
    assert _context_rows(project, "csv_ctx") == csv_rows
    jsonl_rows = [(1, EXPECTED[0][1], EXPECTED[0][2]), (2, dt.date(2024, 3, 29), EXPECTED[1][2])]
    jsonl_rows.append((3, EXPECTED[2][1], EXPECTED[2][2]))
    assert project.rows("jsonl_pg") == jsonl_rows
    assert _context_rows(project, "jsonl_ctx") == jsonl_rows


def test_declared_csv_and_inferred_json_timestamps_read_with_the_patterns(
    tmp_path: Path, pg_url: str, pg_schema: str, spark
) -> None:
    formats = 'date_format = "yyyyMMdd", timestamp_format = "MMMM d, yy HH:mm:ss.SSSSSSXXX"'
    project = _project(
        tmp_path,
        pg_url,
        pg_schema,
        {
            "csv_pg": f'{{ path = "data/a.csv", {formats}, '
            'columns = { id = "int", day = "date", at = "timestamp" } }',
            # JSON never infers dates (as on Spark); timestamps are inferred with the pattern.
            "json_pg": f'{{ path = "data/a.jsonl", format = "jsonl", {formats} }}',
        },
    )
    project.write(
        "data/a.csv",
        'id,day,at\n1,20240229,"february 29, 24 23:30:00.000001+05:30"\n2,,\n',
    )
    project.write(
        "data/a.jsonl",
        '{"id": 1, "day": "20240229", "at": "January 2, 24 10:00:00.1Z"}\n'
        '{"id": 2, "day": "x", "at": "March 1, 99 00:00:00.25-01:00"}\n',
    )

    result = project.cli("apply")

    assert result.exit_code == 0, result.output
    assert project.rows("csv_pg") == [
        (1, dt.date(2024, 2, 29), dt.datetime(2024, 2, 29, 18, 0, 0, 1, tzinfo=UTC)),
        (2, None, None),
    ]
    assert project.rows("json_pg") == [
        (1, "20240229", dt.datetime(2024, 1, 2, 10, 0, 0, 100000, tzinfo=UTC)),
        (2, "x", dt.datetime(2099, 3, 1, 1, 0, 0, 250000, tzinfo=UTC)),  # yy: 2000-2099
    ]


MALFORMED_CSV = """\
id,day
1,02/01/2024
2,30/02/2024
3,2024-01-03
4,4/01/2024
"""
MALFORMED_JSONL = """\
{"id": 1, "day": "Tue 02/01/2024"}
{"id": 2, "day": "Wed 03/01/2024"}
{"id": 3, "day": "Wed 04/01/2024"}
"""


def test_values_that_do_not_read_are_named_or_set_aside(
    tmp_path: Path, pg_url: str, pg_schema: str, spark
) -> None:
    def project_with(policy: str) -> Project:
        root = tmp_path / policy
        project = _project(
            root,
            pg_url,
            pg_schema,
            {
                f"csv_{policy}_pg": '{ path = "data/a.csv", date_format = "d/MM/yyyy", '
                f'columns = {{ id = "int", day = "date" }}, on_malformed = "{policy}" }}',
                f"json_{policy}_pg": '{ path = "data/a.jsonl", format = "jsonl", '
                'date_format = "EEE dd/MM/yyyy", '
                f'columns = {{ id = "int", day = "date" }}, on_malformed = "{policy}" }}',
            },
        )
        project.write("data/a.csv", MALFORMED_CSV)
        project.write("data/a.jsonl", MALFORMED_JSONL)
        return project

    failing = project_with("fail")
    csv = failing.cli("apply", "csv_fail_pg")
    assert csv.exit_code == 1
    assert "data/a.csv:3: malformed csv record: day: '30/02/2024' is not date" in _one_line(
        csv.output
    )
    assert "(2 malformed records in this batch)" in _one_line(csv.output)
    assert "Traceback" not in csv.output
    json = failing.cli("apply", "json_fail_pg")
    assert json.exit_code == 1
    assert "data/a.jsonl:3: malformed jsonl record: day: 'Wed 04/01/2024' is not date" in (
        _one_line(json.output)
    )

    dropping = project_with("drop")
    result = dropping.cli("apply")
    assert result.exit_code == 0, result.output
    # 4/01/2024: d takes 1 or 2 digits (MM exactly 2); 2024-01-03 and Feb 30 are left out.
    assert dropping.rows("csv_drop_pg") == [(1, dt.date(2024, 1, 2)), (4, dt.date(2024, 1, 4))]
    assert dropping.rows("json_drop_pg") == [(1, dt.date(2024, 1, 2)), (2, dt.date(2024, 1, 3))]


def test_a_pattern_outside_hakiris_language_fails_validate_on_every_engine(
    tmp_path: Path,
) -> None:
    project = _project(
        tmp_path,
        "postgresql://unused",
        "s",
        {"p": '{ path = "data/*.csv", date_format = "dd.MM.YYYY" }'},
    )
    result = project.cli("validate")
    assert result.exit_code == 1
    text = _one_line(result.output)
    assert "the pattern letter 'Y' (week-based year) in 'dd.MM.YYYY'" in text
    assert "hint: use y" in text
    assert "Traceback" not in result.output
