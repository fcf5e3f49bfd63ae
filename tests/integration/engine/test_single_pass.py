"""One read of the source per batch: counting malformed records, row rules, the quarantine
and the staged rows all come from the same pass over the file (Spark's SQL metrics, read from
its UI, say so)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.project import postgres_project
from tests.support.spark_scans import scans

ROWS = 3000
DECLARED = 'columns = { id = "bigint", email = "string", amount = "double" }'
RULES = """
[[pipeline.validate.rules]]
type = "not_null"
column = "email"
on_fail = "skip"

[[pipeline.validate.rules]]
type = "range"
column = "amount"
min = 0
on_fail = "warn"

[[pipeline.validate.rules]]
type = "regex"
column = "email"
pattern = "^[a-z0-9]+@example[.]com$"
on_fail = "skip"

[pipeline.quarantine]
enabled = true
"""


def _csv(malformed: int = 0) -> str:
    lines = ["id,email,amount"]
    for i in range(ROWS):
        email = "" if i % 100 == 0 else f"user{i}@example.com"
        lines.append(f"{i},{email},{(i % 50) - 1}")
    lines += ["oops,no,number,extra"] * malformed
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("rules", "writer"),
    [(False, "copy"), (True, "copy"), (True, "jdbc")],
    ids=["no-rules", "rules", "rules-jdbc"],
)
@pytest.mark.spark_only("reads what Spark ran from Spark's UI, which Sail does not have")
def test_a_batch_is_read_once(
    tmp_path: Path, pg_url: str, pg_schema: str, spark_ui: str, rules: bool, writer: str
) -> None:
    project = postgres_project(
        tmp_path,
        pg_url,
        pg_schema,
        source=f'{{ path = "data/*.csv", {DECLARED}, on_malformed = "drop" }}',
        body=f'load = {{ mode = "append", writer = "{writer}" }}' + (RULES if rules else ""),
    )
    project.write("data/a.csv", _csv(malformed=2))
    outcome: dict = {}

    def apply() -> None:
        result = project.cli("apply", "--json")
        assert result.exit_code == 0, result.stderr
        outcome.update(json.loads(result.stdout)[0])

    scanned, scan_nodes = scans(spark_ui, apply)

    assert scanned == ROWS + 2  # every record of the file, once; the 2 malformed ones too
    if writer == "copy":
        # Rows, rule counts, the quarantine and the malformed count: one scan, no cache.
        assert scan_nodes == 1
    assert outcome["malformed"] == 2
    loaded = project.query(f'SELECT count(*) FROM "{pg_schema}".t')[0][0]
    nameless = len(range(0, ROWS, 100))  # broke both skip rules
    assert loaded == (ROWS - nameless if rules else ROWS)
    if rules:
        negative = len(range(0, ROWS, 50))  # amount -1: broke the warn rule
        records = project.query(
            f'SELECT rule_id, on_fail, dropped, count(*) FROM "{pg_schema}".t_quarantine '
            "GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"
        )
        assert records == [
            ("not_null:email", "skip", True, nameless),
            ("range:amount", "warn", False, negative - nameless),
            ("range:amount", "warn", True, nameless),
        ]
        assert outcome["quarantined"] == nameless + negative
