"""Transforms through `hakiri apply`: after the read, before row rules; unsafe ones never run."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.project import postgres_project

SOURCE = '{ path = "data/*.csv", columns = { id = "bigint", first = "string", last = "string", cents = "string" } }'


@pytest.mark.spark_only(
    "Sail types `int / 100.0` as decimal(…,4) where Spark gives decimal(17,6): SQL in transforms follows the engine's typing"
)
def test_transforms_shape_the_rows_before_rules_and_the_load(
    tmp_path: Path, pg_url: str, pg_schema: str, spark
) -> None:
    project = postgres_project(
        tmp_path,
        pg_url,
        pg_schema,
        source=SOURCE,
        body="""
        load = { mode = "upsert", upsert_key = ["id"] }
        transforms = [
          { op = "filter", expr = "id > 0" },
          { op = "with_columns", columns = { name = "concat_ws(' ', initcap(first), initcap(last))", amount = "try_cast(cents AS int) / 100.0" } },
          { op = "dedupe", keys = ["id"], order_by = ["amount desc nulls last"] },
          { op = "drop", columns = ["first", "last", "cents"] },
        ]

        [[pipeline.validate.rules]]
        id = "amount_known"
        type = "not_null"
        column = "amount"
        on_fail = "skip"
        """,
    )
    project.write(
        "data/a.csv",
        "id,first,last,cents\n1,ada,lovelace,1050\n1,ada,lovelace,99\n2,grace,hopper,x\n-3,no,body,1\n",
    )
    result = project.cli("apply")
    assert result.exit_code == 0, result.stderr
    # id -3 filtered out; id 1 deduplicated to its largest amount; id 2's amount is not a
    # number, so the rule (which sees the transformed column) keeps it out of the target.
    assert project.query(f'SELECT id, name, amount::text FROM "{pg_schema}".t ORDER BY id') == [
        (1, "Ada Lovelace", "10.500000")  # int / 100.0 is decimal(17,6) in Spark
    ]
    columns = project.query(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = %s "
        "AND table_name = 't' ORDER BY ordinal_position",
        pg_schema,
    )
    assert [c[0] for c in columns] == ["id", "name", "amount"]


def test_an_unsafe_expression_is_refused_by_validate_and_apply_before_any_read(
    tmp_path: Path, pg_url: str, pg_schema: str
) -> None:
    project = postgres_project(
        tmp_path,
        pg_url,
        pg_schema,
        source=SOURCE,
        body="""
        transforms = [{ op = "with_columns", columns = { x = "reflect('java.lang.Runtime', 'getRuntime')" } }]
        """,
    )
    project.write("data/a.csv", "id,first,last,cents\n1,a,b,1\n")
    for command in ("validate", "apply"):
        result = project.cli(command)
        assert result.exit_code == 1, command
        assert "reflect" in result.stderr and "hakiri.toml:" in result.stderr
        assert "Traceback" not in result.stderr
    assert project.query(f"SELECT to_regclass('\"{pg_schema}\".t')") == [(None,)]
