"""CSV and JSON reading options through `hakiri apply` into PostgreSQL: null and NaN markers,
quoting, escapes and comments, date and timestamp patterns, and names for header-less files.

Each test is one `hakiri apply` (a project may hold several pipelines to compare readings of
one file); `hakiri plan` afterwards must find nothing to do, so the JVM-free reading of the
headers agrees with Spark's."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from tests.support.project import Project


def _project(root: Path, pg_url: str, schema: str, pipelines: dict[str, str]) -> Project:
    """One pipeline per entry: id -> the inline config of its files source; it loads table
    `<id>` into `schema` of the suite's PostgreSQL."""
    blocks = "".join(
        f"""
        [[pipeline]]
        id = "{pipeline_id}"
        source = {{ connector = "files", config = {config} }}
        tables = ["{pipeline_id}"]
        destination = {{ connector = "postgres", config = {{ connection = "wh", schema = "{schema}" }} }}
        """
        for pipeline_id, config in pipelines.items()
    )
    project = Project(root, pg_url, schema)
    project.write(
        "hakiri.toml",
        f"""
        [project]
        name = "file-options"

        [connections.wh]
        type = "postgres"
        url = "{pg_url}"
        """
        + blocks,
    )
    return project


def _apply(project: Project) -> None:
    result = project.cli("apply")
    assert result.exit_code == 0, result.stderr
    converged = project.cli("plan", "--detailed-exitcode")
    assert converged.exit_code == 0, converged.stdout + converged.stderr


def _types(project: Project, table: str) -> dict[str, str]:
    return dict(
        project.query(
            "SELECT column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = %s AND table_name = %s ORDER BY ordinal_position",
            project.schema,
            table,
        )
    )


# nycflights13 writes NA for a missing value, in numeric and text columns alike.
FLIGHTS = """\
id,dep_delay,carrier,tailnum
1,5,UA,N14228
2,NA,AA,NA
3,-2,NA,N24211
4,,B6,
"""


def test_null_value_loads_na_as_sql_null_and_without_it_na_is_text(
    tmp_path: Path, pg_url: str, pg_schema: str, spark
) -> None:
    project = _project(
        tmp_path,
        pg_url,
        pg_schema,
        {
            "flights": '{ path = "data/flights.csv", null_value = "NA" }',
            "flights_raw": '{ path = "data/flights.csv" }',
        },
    )
    project.write("data/flights.csv", FLIGHTS)

    _apply(project)

    assert _types(project, "flights") == {
        "id": "integer",
        "dep_delay": "integer",
        "carrier": "text",
        "tailnum": "text",
    }
    assert project.rows("flights") == [
        (1, 5, "UA", "N14228"),
        (2, None, "AA", None),
        (3, -2, None, "N24211"),
        (4, None, "B6", None),  # an empty field is NULL too
    ]
    # Without the marker an NA is text, and it turns the inferred integer column into text.
    assert _types(project, "flights_raw")["dep_delay"] == "text"
    assert project.rows("flights_raw") == [
        (1, "5", "UA", "N14228"),
        (2, "NA", "AA", "NA"),
        (3, "-2", "NA", "N24211"),
        (4, None, "B6", None),
    ]


def test_nan_value_loads_the_files_nan_marker_as_nan(
    tmp_path: Path, pg_url: str, pg_schema: str, spark
) -> None:
    project = _project(
        tmp_path, pg_url, pg_schema, {"readings": '{ path = "data/*.csv", nan_value = "n/a" }'}
    )
    project.write("data/readings.csv", "id,level\n1,1.5\n2,n/a\n3,\n4,NaN\n")

    _apply(project)

    assert _types(project, "readings")["level"] == "double precision"
    assert project.query(f'SELECT id, level::text FROM "{pg_schema}".readings ORDER BY id') == [
        (1, "1.5"),
        (2, "NaN"),
        (3, None),
        (4, "NaN"),
    ]


def test_quote_escape_and_comment_read_a_non_rfc_4180_file(
    tmp_path: Path, pg_url: str, pg_schema: str, spark
) -> None:
    project = _project(
        tmp_path,
        pg_url,
        pg_schema,
        {"notes": """{ path = "data/*.csv", quote = "'", escape = "\\\\", comment = "#" }"""},
    )
    project.write(
        "data/notes.csv",
        "# exported by notes-cli 2.1\n"
        "id,author,note\n"
        "1,'Lovelace, Ada','it\\'s done'\n"
        "# page 2\n"
        "2,Hopper,'say \"hi\"'\n",
    )

    _apply(project)

    assert project.rows("notes") == [
        (1, "Lovelace, Ada", "it's done"),
        (2, "Hopper", 'say "hi"'),
    ]


def test_date_and_timestamp_formats_parse_csv_and_json_lines(
    tmp_path: Path, pg_url: str, pg_schema: str, spark
) -> None:
    formats = 'date_format = "dd/MM/yyyy", timestamp_format = "dd/MM/yyyy HH.mm.ss"'
    project = _project(
        tmp_path,
        pg_url,
        pg_schema,
        {
            # csv infers both types with the patterns
            "visits": f'{{ path = "data/visits.csv", {formats} }}',
            # JSON never infers dates: `day` is declared; timestamps are inferred with the pattern
            "events": f'{{ path = "data/events.jsonl", format = "jsonl", {formats} }}',
            "bookings": f'{{ path = "data/events.jsonl", format = "jsonl", {formats}, '
            'columns = { id = "bigint", day = "date", at = "timestamp" } }',
        },
    )
    project.write("data/visits.csv", "id,day,at\n1,02/01/2024,02/01/2024 13.05.00\n")
    project.write(
        "data/events.jsonl",
        '{"id": 1, "day": "31/12/2023", "at": "31/12/2023 23.59.58"}\n',
    )

    _apply(project)

    assert _types(project, "visits") == {
        "id": "integer",
        "day": "date",
        "at": "timestamp with time zone",
    }
    assert project.rows("visits") == [
        (1, dt.date(2024, 1, 2), dt.datetime(2024, 1, 2, 13, 5, tzinfo=dt.UTC))
    ]
    assert _types(project, "events") == {
        "id": "bigint",
        "day": "text",
        "at": "timestamp with time zone",
    }
    assert project.rows("events") == [
        (1, "31/12/2023", dt.datetime(2023, 12, 31, 23, 59, 58, tzinfo=dt.UTC))
    ]
    assert project.rows("bookings") == [
        (1, dt.date(2023, 12, 31), dt.datetime(2023, 12, 31, 23, 59, 58, tzinfo=dt.UTC))
    ]


def test_column_names_name_a_headerless_file_whose_types_are_inferred(
    tmp_path: Path, pg_url: str, pg_schema: str, spark
) -> None:
    project = _project(
        tmp_path,
        pg_url,
        pg_schema,
        {
            "orders": '{ path = "data/*.csv", header = false, '
            'column_names = ["id", "customer", "amount"] }'
        },
    )
    project.write("data/orders.csv", "1,Ada,9.5\n2,Grace,12\n")

    _apply(project)

    assert _types(project, "orders") == {
        "id": "integer",
        "customer": "text",
        "amount": "double precision",
    }
    assert project.rows("orders") == [(1, "Ada", 9.5), (2, "Grace", 12.0)]
