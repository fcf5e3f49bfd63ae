"""A day with no data: files that hold no data record, through `hakiri apply` into PostgreSQL.

An export that ran and found nothing writes a header-only CSV (or `[]`, or a Parquet
file of zero rows). Such a file carries no schema evidence: with inferred types it
must not turn the columns into text, log a schema event or block the pipeline; it
loads as a batch of 0 rows, and truncate and blue_green refuse it as an empty source.
Every case runs with inferred and with declared column types and checks the target
row for row after each day.
"""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.support.project import Project, postgres_project

HEADER = "id,amount,day\n"
DAY1 = HEADER + "1,10.5,2026-01-01\n2,20.25,2026-01-01\n"
DAY3 = HEADER + "2,22.5,2026-01-03\n3,30.75,2026-01-03\n"
DECLARED = 'columns = { id = "bigint", amount = "double", day = "date" }'
ROW1 = (1, 10.5, date(2026, 1, 1))
ROW2 = (2, 20.25, date(2026, 1, 1))
ROW2_NEW = (2, 22.5, date(2026, 1, 3))
ROW3 = (3, 30.75, date(2026, 1, 3))

LOADS = {
    "append": 'load = { mode = "append" }',
    "upsert": 'load = { mode = "upsert", upsert_key = ["id"] }',
    "incremental_watermark": 'load = { mode = "incremental_watermark", watermark_column = "day" }',
    "truncate": 'load = { mode = "truncate" }',
    "blue_green": 'load = { mode = "blue_green" }',
}
# The target after day 1 and after day 3, when each day's export is a new file in data/.
AFTER_DAY3 = {
    "append": [ROW1, ROW2, ROW2_NEW, ROW3],
    "upsert": [ROW1, ROW2_NEW, ROW3],
    "incremental_watermark": [ROW1, ROW2, ROW2_NEW, ROW3],
    "truncate": [ROW1, ROW2, ROW2_NEW, ROW3],  # the snapshot is every file of data/
    "blue_green": [ROW1, ROW2, ROW2_NEW, ROW3],
}


def project_for(
    tmp_path: Path, pg_url: str, schema: str, mode: str, declared: bool, path: str, extra: str = ""
) -> Project:
    columns = f", {DECLARED}" if declared else ""
    return postgres_project(
        tmp_path,
        pg_url,
        schema,
        source=f'{{ path = "{path}"{columns}{extra} }}',
        body=LOADS[mode],
    )


def target(project: Project) -> list[tuple[Any, ...]]:
    rows = project.query(f'SELECT id, amount, day FROM "{project.schema}".t ORDER BY id, day')
    return [(int(i), float(a), d) for i, a, d in rows]


def column_types(project: Project) -> dict[str, str]:
    rows = project.query(
        "SELECT column_name, data_type FROM information_schema.columns "
        "WHERE table_schema = %s AND table_name = 't'",
        project.schema,
    )
    return dict(rows)  # type: ignore[arg-type]


def json_of(project: Project, *args: str) -> Any:
    result = project.cli(*args, "--json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def schema_events(project: Project) -> list[str]:
    return [event["kind"] for event in json_of(project, "schema", "log", "p")]


@pytest.mark.parametrize("declared", [False, True], ids=["inferred", "declared"])
@pytest.mark.parametrize("mode", list(LOADS))
def test_a_header_only_file_between_two_days_loads_nothing_and_changes_nothing(
    tmp_path: Path, pg_url: str, pg_schema: str, spark, mode: str, declared: bool
) -> None:
    project = project_for(tmp_path, pg_url, pg_schema, mode, declared, "data/*.csv")
    project.write("data/day1.csv", DAY1)
    assert project.cli("apply").exit_code == 0
    assert target(project) == [ROW1, ROW2]
    types = column_types(project)
    assert types["id"] == "bigint" if declared else types["id"] == "integer"

    project.write("data/day2.csv", HEADER)
    result = project.cli("apply")
    assert result.exit_code == 0, result.stderr
    assert target(project) == [ROW1, ROW2]
    assert column_types(project) == types
    assert schema_events(project) == []
    if mode not in ("truncate", "blue_green"):
        # A committed batch of 0 rows, seen in `runs`.
        latest = json_of(project, "runs", "p")[0]
        assert (latest["status"], latest["row_count"]) == ("success", 0)

    project.write("data/day3.csv", DAY3)
    result = project.cli("apply")
    assert result.exit_code == 0, result.stderr
    assert target(project) == AFTER_DAY3[mode]
    assert column_types(project) == types
    assert schema_events(project) == []


@pytest.mark.parametrize("declared", [False, True], ids=["inferred", "declared"])
@pytest.mark.parametrize("mode", ["truncate", "blue_green"])
def test_an_empty_latest_export_is_refused_by_the_empty_source_guard(
    tmp_path: Path, pg_url: str, pg_schema: str, spark, mode: str, declared: bool
) -> None:
    project = project_for(tmp_path, pg_url, pg_schema, mode, declared, "data/latest.csv")
    project.write("data/latest.csv", DAY1)
    assert project.cli("apply").exit_code == 0

    project.write("data/latest.csv", HEADER)
    result = project.cli("apply")
    assert result.exit_code == 1
    verb = "truncate" if mode == "truncate" else "replace"
    assert f"the source produced 0 rows; refusing to {verb} {pg_schema}.t" in result.stderr
    assert "fail_on_empty_source = false" in result.stderr
    assert "schema" not in result.stderr  # no type change is reported
    assert target(project) == [ROW1, ROW2]
    assert schema_events(project) == []

    project.write("data/latest.csv", DAY3)
    result = project.cli("apply")
    assert result.exit_code == 0, result.stderr
    assert target(project) == [ROW2_NEW, ROW3]


def test_a_first_file_without_data_creates_no_target_and_the_next_one_does(
    tmp_path: Path, pg_url: str, pg_schema: str, spark
) -> None:
    project = project_for(tmp_path, pg_url, pg_schema, "append", False, "data/*.csv")
    project.write("data/day0.csv", HEADER)
    result = project.cli("apply")
    assert result.exit_code == 0, result.stderr
    assert column_types(project) == {}  # nothing says what the columns would be
    project.write("data/day1.csv", DAY1)
    assert project.cli("apply").exit_code == 0
    assert column_types(project) == {"id": "integer", "amount": "double precision", "day": "date"}
    assert target(project) == [ROW1, ROW2]


def test_on_empty_alert_raises_an_alert_and_fail_fails_the_batch(
    tmp_path: Path, pg_url: str, pg_schema: str, spark
) -> None:
    project = project_for(
        tmp_path, pg_url, pg_schema, "append", False, "data/*.csv", ', on_empty = "alert"'
    )
    project.write("data/day1.csv", DAY1)
    project.write("data/day2.csv", HEADER)
    result = project.cli("apply")
    assert result.exit_code == 0, result.stderr
    [alert] = json_of(project, "alerts")
    assert (alert["kind"], alert["pipeline_id"]) == ("empty_source", "p")
    assert alert["message"] == "data/day2.csv holds no data record"

    project.write("data/day3.csv", HEADER.replace("\n", "\r\n"))
    project.write(
        "hakiri.toml",
        (project.root / "hakiri.toml").read_text().replace('"alert"', '"fail"'),
    )
    result = project.cli("apply")
    assert result.exit_code == 1
    assert "data/day3.csv holds no data record (on_empty = 'fail')" in result.stderr
    assert target(project) == [ROW1, ROW2]


@pytest.mark.parametrize(
    "fmt",
    [
        "json",
        "jsonl",
        "parquet",
    ],
)
def test_a_json_or_parquet_file_without_records_is_a_batch_of_zero_rows(
    tmp_path: Path, pg_url: str, pg_schema: str, spark, fmt: str
) -> None:
    project = project_for(
        tmp_path, pg_url, pg_schema, "upsert", False, f"data/*.{fmt}", f', format = "{fmt}"'
    )
    data = project.root / "data"
    data.mkdir()
    record = {"id": 1, "amount": 10.5, "day": "2026-01-01"}
    if fmt == "parquet":
        pq.write_table(
            pa.table(
                {"id": pa.array([1], pa.int64()), "amount": [10.5], "day": [date(2026, 1, 1)]}
            ),
            data / "day1.parquet",
        )
    else:
        text = json.dumps([record]) if fmt == "json" else json.dumps(record) + "\n"
        (data / f"day1.{fmt}").write_text(text)
    assert project.cli("apply").exit_code == 0
    types = column_types(project)

    if fmt == "parquet":
        # An export of nothing, written by a tool that typed every column as string.
        empty = pa.table({name: pa.array([], pa.string()) for name in ("id", "amount", "day")})
        pq.write_table(empty, data / "day2.parquet")
    else:
        (data / f"day2.{fmt}").write_text("[ ]\n" if fmt == "json" else "\n\n")
    result = project.cli("apply")
    assert result.exit_code == 0, result.stderr
    assert column_types(project) == types
    assert schema_events(project) == []
    latest = json_of(project, "runs", "p")[0]
    assert (latest["status"], latest["row_count"]) == ("success", 0)
    assert project.query(f'SELECT id, amount FROM "{pg_schema}".t') == [(1, 10.5)]


def test_an_all_null_inferred_column_takes_the_target_type(
    tmp_path: Path, pg_url: str, pg_schema: str, spark
) -> None:
    project = project_for(tmp_path, pg_url, pg_schema, "append", False, "data/*.csv")
    project.write("data/day1.csv", DAY1)
    assert project.cli("apply").exit_code == 0
    project.write("data/day2.csv", HEADER + "4,,2026-01-02\n5,,2026-01-02\n")
    result = project.cli("apply")
    assert result.exit_code == 0, result.stderr
    assert column_types(project)["amount"] == "double precision"
    assert schema_events(project) == []
    rows = project.query(f'SELECT id, amount FROM "{pg_schema}".t WHERE id > 3 ORDER BY id')
    assert rows == [(4, None), (5, None)]


def test_a_new_all_null_column_waits_for_a_value_before_it_is_added(
    tmp_path: Path, pg_url: str, pg_schema: str, spark
) -> None:
    project = project_for(tmp_path, pg_url, pg_schema, "append", False, "data/*.csv")
    project.write("data/day1.csv", DAY1)
    assert project.cli("apply").exit_code == 0
    project.write("data/day2.csv", "id,amount,day,discount\n4,1.5,2026-01-02,\n")
    assert project.cli("apply").exit_code == 0
    assert "discount" not in column_types(project)
    project.write("data/day3.csv", "id,amount,day,discount\n5,2.5,2026-01-03,0.25\n")
    assert project.cli("apply").exit_code == 0
    assert column_types(project)["discount"] == "double precision"
    assert schema_events(project) == ["add_column"]


def test_a_refused_inferred_type_change_says_to_declare_the_columns(
    tmp_path: Path, pg_url: str, pg_schema: str, spark
) -> None:
    project = project_for(tmp_path, pg_url, pg_schema, "append", False, "data/*.csv")
    project.write("data/day1.csv", DAY1)
    assert project.cli("apply").exit_code == 0
    # Whole numbers only: Spark infers int for a column the target holds as double precision.
    project.write("data/day2.csv", HEADER + "4,12,2026-01-02\n")
    result = project.cli("apply")
    assert result.exit_code == 1
    assert "amount: integer cannot load into double precision" in result.stderr
    assert "declare the column types in the source's `columns`" in result.stderr
    assert "schema accept" not in result.stderr
    assert target(project) == [ROW1, ROW2]


def test_a_refused_declared_type_change_still_offers_schema_accept(
    tmp_path: Path, pg_url: str, pg_schema: str, spark
) -> None:
    project = project_for(tmp_path, pg_url, pg_schema, "append", True, "data/*.csv")
    project.write("data/day1.csv", DAY1)
    assert project.cli("apply").exit_code == 0
    toml = project.root / "hakiri.toml"
    toml.write_text(toml.read_text().replace('day = "date"', 'day = "boolean"'))
    project.write("data/day2.csv", HEADER + "4,1.5,true\n")
    result = project.cli("apply")
    assert result.exit_code == 1
    assert "hakiri schema accept" in result.stderr


def test_the_context_store_takes_a_header_only_file_the_same_way(
    tmp_path: Path, pg_url: str, pg_schema: str, spark
) -> None:
    from deltalake import DeltaTable

    project = Project(tmp_path, pg_url, pg_schema)
    project.write(
        "hakiri.toml",
        """
        [project]
        name = "ctx"

        [[pipeline]]
        id = "p"
        source = { connector = "files", config = { path = "data/*.csv" } }
        tables = ["t"]
        destination = { connector = "context" }
        load = { mode = "upsert", upsert_key = ["id"] }
        """,
    )
    project.write("data/day1.csv", DAY1)
    assert project.cli("apply").exit_code == 0
    table = tmp_path / ".hakiri" / "context" / "t"
    schema = DeltaTable(table).schema().to_json()
    project.write("data/day2.csv", HEADER)
    result = project.cli("apply")
    assert result.exit_code == 0, result.stderr
    assert DeltaTable(table).schema().to_json() == schema
    assert schema_events(project) == []
    project.write("data/day3.csv", DAY3)
    assert project.cli("apply").exit_code == 0
    rows = DeltaTable(table).to_pyarrow_table().sort_by("id").to_pylist()
    assert [(r["id"], r["amount"], r["day"]) for r in rows] == [ROW1, ROW2_NEW, ROW3]
