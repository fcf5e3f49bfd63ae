"""Schema evolution through `hakiri apply`, on PostgreSQL and on the context store.

Each case loads a first file, changes the source's columns (the declared CSV columns
and a new file), applies again and checks the target's columns and rows and the
catalog's schema log. The types come from the manifest (`columns`), so every case
is exact.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.support.project import Project

DESTINATIONS = ["postgres", "context"]


class Case:
    """A project with pipeline `p`: data/*.csv with declared columns into table `t`."""

    def __init__(self, root: Path, pg_url: str, schema: str, destination: str) -> None:
        self.project = Project(root, pg_url, schema)
        self.destination, self.schema = destination, schema

    def manifest(
        self,
        columns: dict[str, str],
        *,
        policy: str = "evolve",
        renames: dict[str, str] | None = None,
        key: str = "id",
    ) -> None:
        declared = ", ".join(f'"{k}" = "{v}"' for k, v in columns.items())
        target = (
            f'{{ connector = "postgres", config = {{ connection = "wh", schema = "{self.schema}" }} }}'
            if self.destination == "postgres"
            else '{ connector = "context" }'
        )
        rename_line = (
            "renames = { " + ", ".join(f'"{a}" = "{b}"' for a, b in renames.items()) + " }"
            if renames
            else ""
        )
        self.project.write(
            "hakiri.toml",
            textwrap.dedent(f"""
            [project]
            name = "evolve"

            [connections.wh]
            type = "postgres"
            url = "{self.project.pg_url}"

            [[pipeline]]
            id = "p"
            source = {{ connector = "files", config = {{ path = "data/*.csv", columns = {{ {declared} }} }} }}
            tables = ["t"]
            destination = {target}
            load = {{ mode = "upsert", upsert_key = ["{key}"] }}
            schema_policy = "{policy}"
            {rename_line}
            """),
        )

    def file(self, name: str, text: str) -> None:
        self.project.write(f"data/{name}", text)

    def apply(self) -> Any:
        return self.project.cli("apply", "p")

    def columns(self) -> dict[str, str]:
        if self.destination == "postgres":
            rows = self.project.query(
                "SELECT column_name, data_type FROM information_schema.columns "
                "WHERE table_schema = %s AND table_name = 't' ORDER BY ordinal_position",
                self.schema,
            )
            return dict(rows)  # type: ignore[arg-type]
        from deltalake import DeltaTable

        from hakiri.destinations.context.inspect import type_name

        table = DeltaTable(self.project.root / ".hakiri" / "context" / "t")
        return {f.name: type_name(f.type) for f in table.schema().fields}

    def rows(self) -> list[tuple]:
        names = list(self.columns())
        if self.destination == "postgres":
            return [tuple(r) for r in self.project.rows("t")]
        from deltalake import DeltaTable

        table = DeltaTable(self.project.root / ".hakiri" / "context" / "t").to_pyarrow_table()
        values = [table.column(n).to_pylist() for n in names]
        return sorted(zip(*values, strict=True), key=lambda r: r[0])

    def log(self) -> list[tuple[str, dict]]:
        result = self.project.cli("schema", "log", "p", "--json")
        assert result.exit_code == 0, result.stderr
        return [(e["kind"], e["detail"]) for e in json.loads(result.stdout)]


@pytest.fixture(params=DESTINATIONS)
def case(
    request: pytest.FixtureRequest, tmp_path: Path, pg_url: str, pg_schema: str, spark
) -> Case:
    c = Case(tmp_path, pg_url, pg_schema, request.param)
    c.manifest({"id": "bigint", "n": "int"})
    c.file("1.csv", "id,n\n1,10\n2,20\n")
    assert c.apply().exit_code == 0
    return c


def test_a_new_source_column_is_added_and_older_rows_get_null(case: Case) -> None:
    case.manifest({"id": "bigint", "n": "int", "x": "double"})
    case.file("2.csv", "id,n,x\n3,30,1.5\n")
    result = case.apply()
    assert result.exit_code == 0, result.stderr
    assert list(case.columns()) == ["id", "n", "x"]
    assert case.rows() == [(1, 10, None), (2, 20, None), (3, 30, 1.5)]
    assert [k for k, _ in case.log()] == ["add_column"]


def test_a_column_dropped_from_the_source_stays_and_new_rows_get_null(case: Case) -> None:
    case.manifest({"id": "bigint"})
    case.file("2.csv", "id\n3\n")
    result = case.apply()
    assert result.exit_code == 0, result.stderr
    assert list(case.columns()) == ["id", "n"]
    assert case.rows() == [(1, 10), (2, 20), (3, None)]
    assert case.log() == [("missing_column", {"column": "n"})]


def test_a_wider_type_widens_the_target_column(case: Case) -> None:
    case.manifest({"id": "bigint", "n": "bigint"})
    case.file("2.csv", "id,n\n3,30000000000\n")
    result = case.apply()
    assert result.exit_code == 0, result.stderr
    assert case.columns()["n"] in ("bigint", "long")
    assert case.rows()[-1] == (3, 30_000_000_000)
    [(kind, detail)] = case.log()
    assert kind == "widen" and detail["column"] == "n"


def test_an_incompatible_type_fails_before_a_single_row_is_written(case: Case) -> None:
    before = case.rows()
    case.manifest({"id": "bigint", "n": "string"})
    case.file("2.csv", "id,n\n3,abc\n1,changed\n")
    result = case.apply()
    assert result.exit_code == 1
    assert (
        "n: text cannot load into integer" in result.stderr or "cannot load into" in result.stderr
    )
    assert "hakiri schema accept" in result.stderr
    assert "Traceback" not in result.stderr
    assert case.rows() == before
    assert [k for k, _ in case.log()] == ["blocked"]


def test_an_accepted_incompatible_change_converts_the_column(case: Case) -> None:
    case.manifest({"id": "bigint", "n": "string"})
    case.file("2.csv", "id,n\n3,abc\n")
    assert case.apply().exit_code == 1
    accepted = case.project.cli("schema", "accept", "p", "--reason", "codes are text now")
    assert accepted.exit_code == 0, accepted.stderr
    result = case.apply()
    assert result.exit_code == 0, result.stderr
    assert case.columns()["n"] in ("text", "string")
    assert case.rows() == [(1, "10"), (2, "20"), (3, "abc")]
    assert [k for k, _ in case.log()] == ["blocked", "accept", "retype"]
    again = case.project.cli("schema", "accept", "p")
    assert again.exit_code == 1 and "nothing to accept" in again.stderr


def test_a_declared_rename_renames_the_column_and_keeps_its_values(case: Case) -> None:
    case.manifest({"id": "bigint", "count": "int"}, renames={"n": "count"})
    case.file("2.csv", "id,count\n3,30\n")
    plan = case.project.cli("plan", "--json", "--detailed-exitcode")
    assert plan.exit_code == 2, plan.stderr
    [target] = json.loads(plan.stdout)["pipelines"][0]["targets"]
    assert (target["rename_columns"], target["add_columns"]) == (["n -> count"], [])
    result = case.apply()
    assert result.exit_code == 0, result.stderr
    assert list(case.columns()) == ["id", "count"]
    assert case.rows() == [(1, 10), (2, 20), (3, 30)]
    assert case.log() == [("rename", {"from": "n", "to": "count"})]


def test_freeze_refuses_a_new_column(case: Case) -> None:
    case.manifest({"id": "bigint", "n": "int", "x": "int"}, policy="freeze")
    case.file("2.csv", "id,n,x\n3,30,1\n")
    result = case.apply()
    assert result.exit_code == 1
    assert "schema policy 'freeze' refuses: x (" in result.stderr
    assert list(case.columns()) == ["id", "n"]
    assert [k for k, _ in case.log()] == ["blocked"]


def test_discard_columns_loads_without_the_new_column(case: Case) -> None:
    case.manifest({"id": "bigint", "n": "int", "x": "int"}, policy="discard_columns")
    case.file("2.csv", "id,n,x\n3,30,1\n")
    result = case.apply()
    assert result.exit_code == 0, result.stderr
    assert list(case.columns()) == ["id", "n"]
    assert case.rows()[-1] == (3, 30)
    assert case.log() == [("discard_column", {"column": "x"})]


def test_an_upsert_key_change_is_refused(case: Case) -> None:
    case.manifest({"id": "bigint", "n": "int"}, key="n")
    case.file("2.csv", "id,n\n3,30\n")
    result = case.apply()
    assert result.exit_code == 1
    assert "upsert_key changed from (id) to (n)" in result.stderr
    assert len(case.rows()) == 2
