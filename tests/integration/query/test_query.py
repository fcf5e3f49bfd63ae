"""`hakiri query` over an applied project's context store: what it answers equals what DuckDB
answers reading the Delta tables itself; the formats, --limit, time travel, and the guard."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

import hakiri
from tests.integration.query.conftest import Shop

# The views' SQL as DuckDB's, written by hand: the reader hakiri is checked against.
DIRECT = """
CREATE VIEW customer_orders AS
  SELECT o.order_id, o.status, o.amount, c.name, c.country
  FROM orders o JOIN customers c ON o.customer_id = c.id;
CREATE VIEW revenue_by_status AS
  SELECT status, count(*) AS orders, round(sum(amount), 2) AS revenue FROM orders GROUP BY status;
CREATE VIEW revenue_by_country AS
  SELECT country, count(DISTINCT name) AS customers, round(sum(amount), 2) AS revenue
  FROM customer_orders WHERE status <> 'cancelled' GROUP BY country;
"""


def direct(shop: Shop, sql: str, version: int | None = None) -> list[list[Any]]:
    """`sql` run by DuckDB over the Delta tables as deltalake reads them (no hakiri code)."""
    con = duckdb.connect()
    orders = DeltaTable(shop.table("orders"), version=version).to_pyarrow_table()
    customers = DeltaTable(shop.table("customers")).to_pyarrow_table()
    con.register("orders", orders)
    con.register("customers", customers)
    con.execute(DIRECT)
    return [list(row) for row in con.sql(sql).fetchall()]


def answer(shop: Shop, sql: str, *args: str) -> dict[str, Any]:
    result = shop.query(sql, "--format", "json", *args)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM revenue_by_country ORDER BY country",
        "SELECT * FROM revenue_by_status ORDER BY status",
        "SELECT name, count(*) AS n, max(amount) AS top FROM customer_orders "
        "WHERE amount > 10 GROUP BY name ORDER BY name",
    ],
)
def test_a_query_over_views_answers_what_duckdb_reading_the_delta_tables_answers(
    shop: Shop, sql: str
) -> None:
    got = answer(shop, sql)
    expected = direct(shop, sql)
    assert got["rows"] == expected
    assert got["row_count"] == len(expected) and got["truncated"] is False
    assert len(expected) > 1


UNION = (
    "SELECT country, revenue, customers FROM revenue_by_country "
    "UNION ALL SELECT status, revenue, orders FROM revenue_by_status ORDER BY 1"
)


def test_spark_sql_as_written_on_spark_gives_the_rows_duckdb_gives_transpiled(shop: Shop) -> None:
    on_duckdb = answer(shop, UNION)
    on_spark = answer(shop, UNION, "--engine", "spark")  # the suite's Spark session
    assert on_spark["rows"] == on_duckdb["rows"]
    assert [c["name"] for c in on_spark["columns"]] == ["country", "revenue", "customers"]


def test_sail_in_the_command_gives_the_rows_duckdb_gives(shop: Shop) -> None:
    # A process of its own, as a user runs it: Sail starts inside the command.
    src = str(Path(hakiri.__file__).parents[1])
    command = [sys.executable, "-m", "hakiri.cli.main", "query", UNION, "-f", "json"]
    done = subprocess.run(
        [*command, "--engine", "sail", "--project", str(shop.root)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["rows"] == answer(shop, UNION)["rows"]


def test_the_json_document_has_columns_rows_and_counts(shop: Shop) -> None:
    got = answer(shop, "SELECT order_id, status, amount FROM orders WHERE order_id <= 2 ORDER BY 1")
    assert got == {
        "columns": [
            {"name": "order_id", "type": "long"},
            {"name": "status", "type": "string"},
            {"name": "amount", "type": "double"},
        ],
        "rows": [[1, "shipped", 1.25], [2, "cancelled", 2.5]],
        "row_count": 2,
        "truncated": False,
    }


def test_csv_on_stdout_has_a_header_and_every_row(shop: Shop) -> None:
    result = shop.query("SELECT order_id, name FROM customer_orders ORDER BY order_id", "-f", "csv")
    assert result.exit_code == 0, result.stderr
    rows = list(csv.reader(io.StringIO(result.stdout)))
    assert rows[0] == ["order_id", "name"]
    assert rows[1:] == [
        [str(i), n]
        for i, n in direct(shop, "SELECT order_id, name FROM customer_orders ORDER BY order_id")
    ]
    assert len(rows) == 61


def test_parquet_to_a_file_and_to_a_pipe(shop: Shop, tmp_path) -> None:
    sql = "SELECT * FROM revenue_by_status ORDER BY status"
    target = tmp_path / "revenue.parquet"
    to_file = shop.query(sql, "--out", str(target))  # the format from the file's suffix
    assert to_file.exit_code == 0, to_file.stderr
    assert "wrote 3 rows to" in to_file.stderr and to_file.stdout == ""
    assert [list(r.values()) for r in pq.read_table(target).to_pylist()] == direct(shop, sql)

    piped = shop.query(sql, "--format", "parquet")
    assert piped.exit_code == 0, piped.stderr
    assert pq.read_table(io.BytesIO(piped.stdout_bytes)).equals(pq.read_table(target))


def test_a_table_on_stdout_ends_with_the_row_count(shop: Shop) -> None:
    result = shop.query("SELECT * FROM revenue_by_status ORDER BY status")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["status", "orders", "revenue"]
    assert lines[1].split()[0] == "cancelled"
    assert lines[-1] == "(3 rows)"


def test_limit_caps_the_rows_and_says_the_result_was_cut(shop: Shop) -> None:
    sql = "SELECT order_id FROM orders ORDER BY order_id"
    cut = answer(shop, sql, "--limit", "5")
    assert cut["rows"] == [[1], [2], [3], [4], [5]]
    assert cut["row_count"] == 5 and cut["truncated"] is True

    whole = answer(shop, sql, "--limit", "60")  # exactly every row: nothing was cut
    assert whole["row_count"] == 60 and whole["truncated"] is False

    table = shop.query(sql, "--limit", "2")
    assert (
        table.stdout.splitlines()[-1]
        == "(2 rows; cut at --limit 2: pass a larger --limit for more)"
    )

    as_csv = shop.query(sql, "--limit", "3", "-f", "csv")
    assert list(csv.reader(io.StringIO(as_csv.stdout))) == [["order_id"], ["1"], ["2"], ["3"]]
    assert "the result was cut at --limit 3 rows" in as_csv.stderr


def test_time_travel_reads_the_version_before_the_second_load(shop: Shop) -> None:
    history = DeltaTable(shop.table("orders")).history()
    first_load = min(h["version"] for h in history if h["operation"] != "CREATE TABLE")
    latest = DeltaTable(shop.table("orders")).version()
    assert first_load < latest
    sql = "SELECT count(*) AS n, max(order_id) AS last FROM orders@v{v}"
    then = answer(shop, sql.format(v=first_load))
    assert then["rows"] == [[40, 40]]
    assert then["rows"] == direct(shop, "SELECT count(*), max(order_id) FROM orders", first_load)
    assert answer(shop, sql.format(v=latest))["rows"] == [[60, 60]]

    # The same table at two versions in one query: what the second load added.
    added = answer(
        shop,
        f"SELECT count(*) FROM orders n LEFT ANTI JOIN orders@v{first_load} o "
        "ON n.order_id = o.order_id",
    )
    assert added["rows"] == [[20]]
    both = answer(
        shop,
        f"SELECT (SELECT count(*) FROM orders@v{first_load}) AS first_load, "
        f"(SELECT count(*) FROM orders@v{latest}) AS latest",
    )
    assert both["rows"] == [[40, 60]]


def test_a_version_that_does_not_exist_names_the_latest(shop: Shop) -> None:
    latest = DeltaTable(shop.table("orders")).version()
    result = shop.query("SELECT * FROM orders@v99")
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        f"error: table `orders` has no version 99 (the latest is {latest})",
        "  hint: `hakiri context history orders` lists its versions",
    ]
    assert result.stdout == ""


def test_the_guard_refuses_a_file_read_with_its_line_and_column(shop: Shop) -> None:
    result = shop.query("SELECT *\nFROM read_csv('/etc/passwd')")
    assert result.exit_code == 1
    first = result.stderr.splitlines()[0]
    assert first.startswith("error: read_csv() reads files")
    assert first.endswith("(query line 2, column 6)")
    assert "Traceback" not in result.output

    as_json = shop.query("SELECT * FROM orders; DROP TABLE orders", "-f", "json")
    assert as_json.exit_code == 1
    assert "one query is allowed" in json.loads(as_json.stdout)["error"]["message"]


def test_an_unknown_name_is_one_error_naming_the_tables_and_views(shop: Shop) -> None:
    result = shop.query("SELECT * FROM orderz")
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        "error: `orderz` is neither a table of the context store nor a view",
        "  hint: tables: customers, orders; views: customer_orders, revenue_by_status, "
        "revenue_by_country",
    ]


def test_a_view_cannot_be_time_travelled(shop: Shop) -> None:
    result = shop.query("SELECT * FROM revenue_by_status@v1")
    assert result.exit_code == 1
    assert "`revenue_by_status` is a view: time travel reads a version of a table" in result.stderr
