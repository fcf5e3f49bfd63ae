"""serve's POST /v1/query over a real context store (Delta tables written by delta-rs), a real
catalog (SQLite) and DuckDB: the bearer token, the server's row cap, the time limit, the guard."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from fastapi.testclient import TestClient

from hakiri.catalog.store import Catalog
from hakiri.server.api import create_app
from hakiri.server.state import TOKEN_ENV, ServeState
from hakiri.spec.loader import load_project

TOKEN = "query-token-0123456789"
ROWS = 3_000

MANIFEST = """
[project]
name = "served-queries"

[serve]
query_max_rows = 50
query_timeout = "1s"

[[pipeline]]
id = "orders"
source = { connector = "files", config = { path = "data/*.csv", format = "csv" } }
tables = ["orders"]

[[view]]
name = "by_status"
sql = "SELECT status, count(*) AS n, sum(amount) AS amount FROM orders GROUP BY status"
"""


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[TestClient, Path]]:
    (tmp_path / "hakiri.toml").write_text(textwrap.dedent(MANIFEST))
    table = tmp_path / ".hakiri" / "context" / "orders"
    write_deltalake(
        table,
        pa.table(
            {
                "id": pa.array(range(ROWS), pa.int64()),
                "status": pa.array([("paid", "open", "shipped")[i % 3] for i in range(ROWS)]),
                "amount": pa.array([i * 0.5 for i in range(ROWS)]),
            }
        ),
    )
    env = {TOKEN_ENV: TOKEN}
    with Catalog.open(f"sqlite:///{tmp_path / 'state.sqlite'}", migrate=True) as catalog:
        state = ServeState(load_project(tmp_path, env), catalog, env, lambda: True)
        yield TestClient(create_app(state)), table


def _ask(client: TestClient, body: dict[str, object], token: str | None = TOKEN):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return client.post("/v1/query", json=body, headers=headers)


def test_a_query_answers_what_duckdb_reading_the_table_answers(served) -> None:
    client, table = served
    answer = _ask(client, {"sql": "SELECT * FROM by_status ORDER BY status"})
    assert answer.status_code == 200, answer.text
    con = duckdb.connect()
    con.register("orders", DeltaTable(table).to_pyarrow_table())
    expected = con.sql(
        "SELECT status, count(*), sum(amount) FROM orders GROUP BY status ORDER BY status"
    ).fetchall()
    assert answer.json() == {
        "columns": [
            {"name": "status", "type": "string"},
            {"name": "n", "type": "long"},
            {"name": "amount", "type": "double"},
        ],
        "rows": [list(row) for row in expected],
        "row_count": 3,
        "truncated": False,
    }


def test_the_bearer_token_is_required(served) -> None:
    client, _ = served
    missing = _ask(client, {"sql": "SELECT 1 AS one"}, token=None)
    assert missing.status_code == 401
    assert missing.json()["error"] == "no bearer token"
    wrong = _ask(client, {"sql": "SELECT 1 AS one"}, token="nope")
    assert wrong.status_code == 401
    assert wrong.json()["error"] == "wrong bearer token"


def test_the_server_caps_the_rows_whatever_the_limit_asked(served) -> None:
    client, _ = served
    capped = _ask(client, {"sql": "SELECT id FROM orders ORDER BY id", "limit": 10_000})
    assert capped.status_code == 200
    document = capped.json()
    assert document["row_count"] == 50 and document["truncated"] is True
    assert document["rows"] == [[i] for i in range(50)]

    fewer = _ask(client, {"sql": "SELECT id FROM orders ORDER BY id", "limit": 3}).json()
    assert fewer["rows"] == [[0], [1], [2]] and fewer["truncated"] is True

    default = _ask(client, {"sql": "SELECT id FROM orders"}).json()
    assert default["row_count"] == 50 and default["truncated"] is True


def test_a_query_over_the_time_limit_is_stopped_and_answered_504(served) -> None:
    client, _ = served
    # 3,000³ rows to sum: minutes of work, stopped after [serve] query_timeout (1s).
    slow = _ask(
        client,
        {"sql": "SELECT sum(a.id * b.id + c.id) FROM orders a, orders b, orders c"},
    )
    assert slow.status_code == 504
    assert slow.json() == {
        "error": "the query ran over its time limit (1s) and was stopped",
        "hint": "narrow it (a WHERE, fewer joins), or raise [serve] query_timeout",
    }
    # The server still answers the next query.
    assert _ask(client, {"sql": "SELECT count(*) AS n FROM orders"}).json()["rows"] == [[ROWS]]


def test_the_guard_and_unknown_names_are_answered_400(served) -> None:
    client, _ = served
    refused = _ask(client, {"sql": "SELECT * FROM read_parquet('/etc/passwd')"})
    assert refused.status_code == 400
    assert refused.json()["error"] == (
        "read_parquet() reads files or makes rows outside the context store's tables "
        "(query line 1, column 15)"
    )
    unknown = _ask(client, {"sql": "SELECT * FROM customers"})
    assert unknown.status_code == 400
    assert unknown.json() == {
        "error": "`customers` is neither a table of the context store nor a view",
        "hint": "tables: orders; views: by_status",
    }
