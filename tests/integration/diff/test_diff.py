"""`hakiri diff`: the source against its loaded target, by key, moving sums instead of rows."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.project import Project
from tests.support.tables import table_project

ROWS = 40_000
# Every kind of value the canonical text spells: integers, decimals, floats, text (with the
# separator and non-ASCII), booleans, dates, timestamps, bytes, NULLs.
COLUMNS = (
    "id bigint PRIMARY KEY, amount numeric(12,2), ratio double precision, name text, "
    "active boolean, day date, updated_at timestamptz, payload bytea"
)
VALUES = (
    "SELECT g, g * 0.25, CASE WHEN g % 7 = 0 THEN NULL ELSE g / 3.0 END, "
    "'név|' || g, g % 2 = 0, date '2024-01-01' + (g % 400), "
    "timestamptz '2024-01-01 00:00+00' + g * interval '1 second 7 microseconds', "
    "decode(md5(g::text), 'hex') FROM generate_series(1, {rows}) g"
)


def _source(project: Project, rows: int = ROWS) -> None:
    project.query(f'CREATE TABLE "{project.schema}".src ({COLUMNS})')
    project.query(f'INSERT INTO "{project.schema}".src {VALUES.format(rows=rows)}')


def _diff(project: Project, *args: str) -> tuple[int, dict]:
    result = project.cli("diff", "p", "--json", *args)
    assert result.exit_code in (0, 2), result.stderr
    assert "Traceback" not in result.stderr
    document = json.loads(result.stdout)
    [table] = document["tables"]
    return result.exit_code, table


def _counts(table: dict) -> tuple[int, int, int]:
    return table["only_in_source"], table["only_in_target"], table["changed"]


def test_a_loaded_postgres_target_is_identical_then_each_planted_difference_is_found(
    tmp_path: Path, pg_url: str, pg_schema: str, spark
) -> None:
    project = table_project(tmp_path, pg_url, pg_schema, incremental=None)
    _source(project)
    assert project.cli("apply").exit_code == 0

    code, table = _diff(project)
    assert code == 0 and table["identical"], table
    assert table["source"] == {"system": "postgres", "rows": ROWS}
    assert table["moved"]["source_rows"] == table["moved"]["target_rows"] == 0

    s = pg_schema
    project.query(f"UPDATE \"{s}\".dst SET name = 'changed' WHERE id = 17")
    code, table = _diff(project)
    assert code == 2
    assert _counts(table) == (0, 0, 1)
    [changed] = table["samples"]["changed"]
    assert changed == {
        "key": ["17"],
        "columns": {"name": {"source": "név|17", "target": "changed"}},
    }
    moved = table["moved"]["source_rows"] + table["moved"]["target_rows"]
    assert 0 < moved < ROWS / 50, table["moved"]

    # 1,000 differences of three kinds: 400 updated, 300 deleted, 300 inserted in the target
    project.query(f"UPDATE \"{s}\".dst SET name = 'név|17' WHERE id = 17")
    project.query(f'UPDATE "{s}".dst SET amount = amount + 1 WHERE id % 100 = 1')
    project.query(f'DELETE FROM "{s}".dst WHERE id % 100 = 50 AND id <= 30000')
    project.query(
        f'INSERT INTO "{s}".dst (id, amount, name) '
        f"SELECT {ROWS} + g, 1, 'new' FROM generate_series(1, 300) g"
    )
    code, table = _diff(project)
    assert code == 2
    assert _counts(table) == (300, 300, 400)
    assert table["samples"]["only_in_source"][:2] == [["50"], ["150"]]
    assert table["samples"]["only_in_target"][:2] == [["40001"], ["40002"]]
    assert table["moved"]["target_rows"] < ROWS / 3, table["moved"]


def test_the_engine_and_postgresql_spell_every_value_alike_for_a_context_store_target(
    tmp_path: Path, pg_url: str, pg_schema: str, spark
) -> None:
    """Source summed in PostgreSQL, target (Delta) in the engine: equal rows give equal sums."""
    project = table_project(
        tmp_path, pg_url, pg_schema, incremental=None, destination='{ connector = "context" }'
    )
    _source(project, 5_000)
    assert project.cli("apply").exit_code == 0

    code, table = _diff(project)
    assert code == 0, table
    assert (table["source"]["system"], table["target_rows"]["system"]) == ("postgres", "engine")

    s = pg_schema
    project.query(f'UPDATE "{s}".src SET ratio = ratio + 0.5, day = NULL WHERE id = 43')
    project.query(f'DELETE FROM "{s}".src WHERE id = 7')
    project.query(f"INSERT INTO \"{s}\".src (id, name) VALUES (9001, 'late')")
    code, table = _diff(project)
    assert code == 2
    assert _counts(table) == (1, 1, 1)
    assert table["samples"]["only_in_source"] == [["9001"]]
    assert table["samples"]["only_in_target"] == [["7"]]
    [changed] = table["samples"]["changed"]
    assert changed["key"] == ["43"]
    assert sorted(changed["columns"]) == ["day", "ratio"]
    assert changed["columns"]["day"]["source"] is None

    # --where narrows both sides alike
    code, table = _diff(project, "--where", "id < 40")
    assert code == 2 and _counts(table) == (0, 1, 0)


def test_a_source_read_through_transforms_and_rules_lists_quarantined_keys_apart(
    tmp_path: Path, pg_url: str, pg_schema: str, spark
) -> None:
    project = table_project(
        tmp_path,
        pg_url,
        pg_schema,
        incremental=None,
        body="""
        transforms = [{ op = "with_columns", columns = { label = "upper(name)" } }]

        [[pipeline.validate.rules]]
        id = "has_ratio"
        type = "not_null"
        column = "ratio"
        on_fail = "skip"
        """,
    )
    _source(project, 700)
    assert project.cli("apply").exit_code == 0

    code, table = _diff(project)
    assert code == 0, table
    assert table["source"] == {"system": "engine", "rows": 600}
    assert "label" in table["columns"]
    assert table["quarantined_count"] == 100
    assert table["quarantined"][:3] == [["7"], ["14"], ["21"]]

    project.query(f"UPDATE \"{pg_schema}\".dst SET label = 'x' WHERE id = 5")
    result = project.cli("diff", "p")
    assert result.exit_code == 2
    assert "1 changed" in result.stdout and "label" in result.stdout
    assert "quarantined by the row rules" in result.stdout


def test_a_pipeline_without_a_target_yet_fails_in_one_line(
    tmp_path: Path, pg_url: str, pg_schema: str, spark
) -> None:
    project = table_project(tmp_path, pg_url, pg_schema, incremental=None)
    _source(project, 10)
    result = project.cli("diff", "p")
    assert result.exit_code == 1
    assert "does not exist" in result.stderr and "hakiri apply p" in result.stderr
    assert "Traceback" not in result.stderr
    unknown = project.cli("diff", "p", "--table", "nope")
    assert unknown.exit_code == 1 and "has no table `nope`" in unknown.stderr


def test_postgresql_sides_of_different_types_compare_on_the_canonical_text(
    tmp_path: Path, pg_url: str, pg_schema: str, spark
) -> None:
    project = table_project(tmp_path, pg_url, pg_schema, incremental=None)
    _source(project, 2_000)
    assert project.cli("apply").exit_code == 0
    assert _diff(project)[1]["hashed"] == "native"  # the same types: each side's own text

    # Widened by hand: 0.25 is now 0.250 in the target's text, the same number.
    project.query(f'ALTER TABLE "{pg_schema}".dst ALTER COLUMN amount TYPE numeric(14,3)')
    code, table = _diff(project)
    assert (code, table["hashed"]) == (0, "canonical"), table
    project.query(f'UPDATE "{pg_schema}".dst SET amount = 0.251 WHERE id = 1')
    code, table = _diff(project)
    assert code == 2 and table["samples"]["changed"] == [
        {"key": ["1"], "columns": {"amount": {"source": "0.25", "target": "0.251"}}}
    ]


def test_a_condition_postgresql_cannot_run_fails_in_one_line(
    tmp_path: Path, pg_url: str, pg_schema: str, spark
) -> None:
    project = table_project(tmp_path, pg_url, pg_schema, incremental=None)
    _source(project, 10)
    assert project.cli("apply").exit_code == 0
    result = project.cli("diff", "p", "--where", "nope > 1")
    assert result.exit_code == 1
    assert "PostgreSQL refused to sum the rows of" in result.stderr
    assert "nope" in result.stderr and "hint:" in result.stderr
    assert "Traceback" not in result.stderr
