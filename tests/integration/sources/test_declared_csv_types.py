"""A declared CSV with a column of every type, through `hakiri apply`, into PostgreSQL and the
context store: the same rows on every engine (on Sail the integer and floating-point columns
are typed by Sail's own CSV parser, the others converted by hakiri; on Apache Spark all of
them converted), and a value that does not fit refused under on_malformed = "fail" with its
file and line, left out and counted under "drop"."""

from __future__ import annotations

import math
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from tests.support.project import Project

pytestmark = pytest.mark.integration

COLUMNS = {
    "id": "bigint",
    "t": "tinyint",
    "s": "smallint",
    "i": "int",
    "f": "float",
    "d": "double",
    "m": "decimal(10,2)",
    "b": "boolean",
    "day": "date",
    "at": "timestamp",
    "txt": "string",
}
HEADER = ",".join(COLUMNS)
GOOD = [
    '1,-128,32767,+7, 1.5 ,1e3,2.555,true,2024-01-05,2024-01-05 10:00:00," a "',
    "2,127,-32768,007,NaN,-Infinity,-0.5,False,2024-1-5,2024-01-05T10:00:00,",
    "3,,,,,,,,,,",
]
EXPECTED = [
    (1, -128, 32767, 7, 1.5, 1000.0, Decimal("2.56"), True, date(2024, 1, 5),
     datetime(2024, 1, 5, 10, 0), " a "),
    (2, 127, -32768, 7, "NaN", -math.inf, Decimal("-0.50"), False, date(2024, 1, 5),
     datetime(2024, 1, 5, 10, 0), None),
    (3, None, None, None, None, None, None, None, None, None, None),
]  # fmt: skip
# One bad value per type the parser types, and one it does not, each on a line of its own.
BAD = ["4,128,0,0,0,0,0,true,2024-01-05,2024-01-05 10:00:00,x", "5,0,0,0,0,0,x1,true,,,y"]


def _project(root: Path, pg_url: str, schema: str, destination: str, policy: str) -> Project:
    project = Project(root, pg_url, schema)
    project.write("data/a.csv", "\n".join([HEADER, *GOOD, *(BAD if policy else [])]) + "\n")
    columns = ", ".join(f'{name} = "{kind}"' for name, kind in COLUMNS.items())
    target = (
        f'destination = {{ connector = "postgres", config = {{ connection = "wh", schema = "{schema}" }} }}'
        if destination == "postgres"
        else ""
    )
    malformed = f', on_malformed = "{policy}"' if policy else ""
    project.write(
        "hakiri.toml",
        f"""
        [project]
        name = "types"

        [connections.wh]
        type = "postgres"
        url = "{pg_url}"

        [[pipeline]]
        id = "p"
        source = {{ connector = "files", config = {{ path = "data/a.csv", columns = {{ {columns} }}{malformed} }} }}
        tables = ["t"]
        load = {{ mode = "truncate" }}
        {target}
        """,
    )
    return project


def _loaded(project: Project, destination: str) -> list[tuple[Any, ...]]:
    if destination == "postgres":
        rows = project.query(f'SELECT {HEADER} FROM "{project.schema}".t ORDER BY id')
        rows = [(*r[:9], r[9].replace(tzinfo=None) if r[9] else None, r[10]) for r in rows]
    else:
        table = DeltaTable(str(project.root / ".hakiri" / "context" / "t")).to_pyarrow_table()
        rows = sorted(tuple(r[c] for c in COLUMNS) for r in table.to_pylist())
        rows = [(*r[:9], r[9].replace(tzinfo=None) if r[9] else None, r[10]) for r in rows]
    return [
        tuple("NaN" if isinstance(v, float) and math.isnan(v) else v for v in row) for row in rows
    ]


@pytest.mark.parametrize("destination", ["postgres", "context"])
def test_every_declared_type_loads_the_same_on_every_engine(
    spark: SparkSession, tmp_path: Path, pg_url: str, pg_schema: str, destination: str
) -> None:
    project = _project(tmp_path / "ok", pg_url, pg_schema, destination, "")

    result = project.cli("apply")

    assert result.exit_code == 0, result.output
    assert _loaded(project, destination) == EXPECTED


@pytest.mark.parametrize("destination", ["postgres", "context"])
def test_a_value_that_does_not_fit_is_named_or_dropped(
    spark: SparkSession, tmp_path: Path, pg_url: str, pg_schema: str, destination: str
) -> None:
    refused = _project(tmp_path / "fail", pg_url, pg_schema, destination, "fail")
    result = refused.cli("apply")
    assert result.exit_code == 1, result.output
    assert (
        "data/a.csv:5: malformed csv record: t: '128' is not tinyint "
        "(2 malformed records in this batch)"
    ) in " ".join(result.output.split())

    dropped = _project(tmp_path / "drop", pg_url, pg_schema, destination, "drop")
    result = dropped.cli("apply")
    assert result.exit_code == 0, result.output
    assert _loaded(dropped, destination) == EXPECTED
