"""The specification's `shopify-orders` pipeline, against the suite's Shopify-shaped server:
it validates and plans with no network, applies into the context store and PostgreSQL
through a 429 and a bucket that fills, the targets hold every record once, and after 50
orders are edited on the server the next apply asks only for `updated_at_min` past the
last range and loads exactly those 50."""

from __future__ import annotations

import json
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import SHOPIFY_ACCESS_TOKEN
from tests.support.project import Project
from tests.support.shopify_server import ShopifyServer

pytestmark = pytest.mark.integration

# The specification's pipeline block, verbatim (shared/seeds/002).
SPEC_BLOCK = """
[[pipeline]]
id = "shopify-orders"
source = { connector = "shopify", config = { shop = "openhackers" } }
secrets = ["SHOPIFY_TOKEN"]
tables = ["orders", "customers", "products"]
schedule = "0 */2 * * *"
incremental = "updated_at"
destination = { connector = "context" }
"""


def _env(shop: ShopifyServer) -> dict[str, str]:
    return {"SHOPIFY_TOKEN": SHOPIFY_ACCESS_TOKEN, "HAKIRI_SHOPIFY_BASE_URL": shop.url}


def _context(project: Project, table: str, column: str) -> list[tuple[int, object]]:
    from deltalake import DeltaTable

    arrow = DeltaTable(str(project.root / ".hakiri" / "context" / table)).to_pyarrow_table()
    return list(zip(arrow["id"].to_pylist(), arrow[column].to_pylist(), strict=True))


def _first_pages(shop: ShopifyServer) -> list:
    return [r for r in shop.requests if r.status == 200 and "page_info" not in r.query]


@pytest.mark.engine_free
def test_the_specifications_block_validates_and_plans_with_no_network(tmp_path: Path) -> None:
    project = Project(tmp_path, "", "")
    project.write("hakiri.toml", '[project]\nname = "shop"\n' + SPEC_BLOCK)
    assert project.cli("validate").exit_code == 0
    # no token, no server: plan asks Shopify nothing
    plan = project.cli("plan", "--json", env={"HAKIRI_SHOPIFY_BASE_URL": "http://127.0.0.1:9"})
    assert plan.exit_code == 0, plan.output


def test_the_specifications_pipeline_loads_every_record_then_the_50_edited_orders(
    tmp_path: Path, pg_url: str, pg_schema: str, shopify_server: ShopifyServer, spark
) -> None:
    project = Project(tmp_path, pg_url, pg_schema)
    project.write("hakiri.toml", '[project]\nname = "shop"\n' + SPEC_BLOCK)
    shop = shopify_server
    shop.fill_bucket(38)  # another app of the shop has nearly filled the bucket
    shop.throttle(times=1)
    first = project.cli("apply", "--json", env=_env(shop))
    assert first.exit_code == 0, first.output
    assert [r.status for r in shop.requests].count(429) >= 1
    data = shop.dataset
    for table, records in (
        ("orders", data.orders),
        ("customers", data.customers),
        ("products", data.products),
    ):
        loaded = [i for i, _ in _context(project, table, "updated_at")]
        assert sorted(loaded) == sorted(r.id for r in records), table  # each once
    # where each table's range ended (its plan's second)
    planned_to = {r.path: r.query["updated_at_max"] for r in _first_pages(shop)}
    assert len(planned_to) == 3

    edited = set(shop.edit_orders(50, at=int(time.time())))
    time.sleep(2)  # a plan reads up to the second before it
    shop.clear_requests()
    again = project.cli("apply", "--json", env=_env(shop))
    assert again.exit_code == 0, again.output
    asked = _first_pages(shop)
    assert sorted(r.path for r in asked) == sorted(planned_to)
    assert all(r.query["updated_at_min"] == planned_to[r.path] for r in asked)
    [outcome] = json.loads(again.stdout)
    assert outcome["rows"] == 50
    # the context store appends (the block's load mode): the edited orders once more, newer
    loaded = _context(project, "orders", "updated_at")
    counts = Counter(i for i, _ in loaded)
    assert {i for i, n in counts.items() if n == 2} == edited
    assert set(counts.values()) == {1, 2}


def test_upserted_into_postgres_the_tables_equal_the_shop(
    tmp_path: Path, pg_url: str, pg_schema: str, shopify_server: ShopifyServer, spark
) -> None:
    """Line items too, in pages of 100 (Link headers, page_info), through a forced 429."""
    project = Project(tmp_path, pg_url, pg_schema)
    project.write(
        "hakiri.toml",
        textwrap.dedent(f"""
        [project]
        name = "shop"

        [connections.wh]
        type = "postgres"
        url = "{pg_url}"

        [[pipeline]]
        id = "shopify-orders"
        source = {{ connector = "shopify", config = {{ shop = "openhackers", base_url = "{shopify_server.url}", limit = 100 }} }}
        secrets = ["SHOPIFY_TOKEN"]
        tables = ["orders", "order_line_items", "customers", "products"]
        incremental = "updated_at"
        destination = {{ connector = "postgres", config = {{ connection = "wh", schema = "{pg_schema}" }} }}
        load = {{ mode = "upsert", upsert_key = ["id"] }}
        """),
    )
    shop = shopify_server
    shop.throttle(times=1)
    done = project.cli("apply", "--json", env={"SHOPIFY_TOKEN": SHOPIFY_ACCESS_TOKEN})
    assert done.exit_code == 0, done.output
    assert SHOPIFY_ACCESS_TOKEN not in done.output
    assert any(set(r.query) == {"page_info", "limit"} for r in shop.requests)

    data = shop.dataset
    orders = dict(project.query(f'SELECT id, total_price::text FROM "{pg_schema}".orders'))
    assert orders == {o.id: o.total for o in data.orders}
    lines = project.query(f'SELECT id, order_id, quantity FROM "{pg_schema}".order_line_items')
    assert sorted(lines) == sorted((line, o.id, q) for o in data.orders for line, _, q in o.lines)
    customers = dict(project.query(f'SELECT id, email FROM "{pg_schema}".customers'))
    assert customers == {c.id: c.email for c in data.customers}
    products = dict(project.query(f'SELECT id, title FROM "{pg_schema}".products'))
    assert products == {p.id: p.title for p in data.products}


def test_a_wrong_token_fails_in_one_line_with_the_token_masked(
    tmp_path: Path, pg_url: str, pg_schema: str, shopify_server: ShopifyServer, spark
) -> None:
    project = Project(tmp_path, pg_url, pg_schema)
    project.write("hakiri.toml", '[project]\nname = "shop"\n' + SPEC_BLOCK)
    wrong = "shpat_wrong_token_SECRET_123"
    env = {**_env(shopify_server), "SHOPIFY_TOKEN": wrong}
    done = project.cli("apply", env=env)
    assert done.exit_code == 1
    assert wrong not in done.output and "Traceback" not in done.output
    assert "401" in done.output
