"""The `shopify` connector as a preset of `rest`: the RestConfig it builds from its keys, the
walks a range of it reads, its rate budget and bucket, and its pages walked against the
suite's Shopify-shaped server (the token, page_info's rule, the bucket, a 429)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from hakiri.sources.cursors.ranges import CursorRange
from hakiri.sources.rest.budget import LeakyBucket
from hakiri.sources.rest.client import ApiKey, RestClient, RetryPolicy
from hakiri.sources.rest.paginate import LinkHeader, walk_pages
from hakiri.sources.rest.select import JsonPath
from hakiri.sources.rest.shopify import ShopifyTableSource, loaded_columns, rest_config
from hakiri.spec.pipeline import PipelineSpec
from hakiri.spec.shopify import ShopifyConfig
from tests.conftest import SHOPIFY_ACCESS_TOKEN
from tests.support.shopify_dataset import ShopDataset
from tests.support.shopify_server import ShopifyServer

# The specification's pipeline, as written (shared/seeds/002).
SPEC = {
    "id": "shopify-orders",
    "source": {"connector": "shopify", "config": {"shop": "openhackers"}},
    "secrets": ["SHOPIFY_TOKEN"],
    "tables": ["orders", "customers", "products"],
    "schedule": "0 */2 * * *",
    "incremental": "updated_at",
    "destination": {"connector": "context"},
}
QUICK = RetryPolicy(attempts=4, backoff=0.01, backoff_max=0.05, max_wait=5)


def _chunk(lo: str, hi: str | None) -> CursorRange:
    return CursorRange("updated_at", "timestamp", "timestamp with time zone", lo, hi, True, False)


def test_the_specifications_pipeline_validates() -> None:
    spec = PipelineSpec.model_validate(SPEC)
    assert isinstance(spec.source.config, ShopifyConfig)
    assert spec.source.config.api_version == "2024-10"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"tables": ["refunds"]}, "the shopify connector has no table `refunds`"),
        ({"incremental": "created_at"}, "past `updated_at` (updated_at_min), not `created_at`"),
        ({"secrets": []}, "reads its token from SHOPIFY_TOKEN, which `secrets` does not list"),
    ],
)
def test_what_a_shopify_pipeline_may_not_say(change: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        PipelineSpec.model_validate({**SPEC, **change})


def test_the_shopify_preset_is_a_rest_config() -> None:
    shop = ShopifyConfig(shop="openhackers.myshopify.com", limit=100)
    config = rest_config(shop, {})
    assert config.base_url == "https://openhackers.myshopify.com/admin/api/2024-10"
    assert config.auth is not None and config.auth.type == "api_key"
    assert (config.auth.secret, config.auth.name) == ("SHOPIFY_TOKEN", "X-Shopify-Access-Token")
    assert config.paginator.type == "link_header"
    orders = config.endpoints["orders"]
    assert (orders.path, orders.records) == ("orders.json", "$.orders")
    assert orders.params == {
        "limit": "100",
        "order": "updated_at asc",
        "status": "any",
        "updated_at_min": "{cursor}",
        "updated_at_max": "{cursor_end}",
    }
    assert config.endpoints["order_line_items"].path == "orders.json"
    assert "status" not in config.endpoints["customers"].params
    # base_url moves the host (a proxy, a test server); the variable wins over it
    moved = ShopifyConfig(shop="s", api_version="2025-01", base_url="http://proxy:8080/")
    assert rest_config(moved, {}).base_url == "http://proxy:8080/admin/api/2025-01"
    env = {"HAKIRI_SHOPIFY_BASE_URL": "http://127.0.0.1:9"}
    assert rest_config(moved, env).base_url == "http://127.0.0.1:9/admin/api/2025-01"


def test_a_shopify_range_asks_updated_at_min_and_stops_past_its_end(tmp_path: Path) -> None:
    spec = PipelineSpec.model_validate(SPEC)
    source = ShopifyTableSource.from_spec(tmp_path, None, spec, {})  # type: ignore[arg-type]
    endpoint = source.config.endpoints["orders"]
    # the first range asks for everything
    [first] = source._walks(endpoint, None, _chunk("1970-01-01T00:00:00+00:00", None), "updated_at")  # type: ignore[arg-type]
    assert "updated_at_min" not in first.params and "updated_at_max" not in first.params
    chunk = _chunk("2024-01-01T00:00:00+00:00", "2024-02-01T00:00:00+00:00")
    [walk] = source._walks(endpoint, None, chunk, "updated_at")  # type: ignore[arg-type]
    assert walk.path == "orders.json"
    assert dict(walk.params)["updated_at_min"] == "2024-01-01T00:00:00Z"
    assert dict(walk.params)["updated_at_max"] == "2024-02-01T00:00:00Z"
    assert walk.until == ("updated_at", "2024-02-01T00:00:00Z")
    assert [n for n, _ in loaded_columns("order_line_items")][:3] == [
        "id",
        "order_id",
        "product_id",
    ]


def test_the_rate_budget_is_shopifys_bucket_unless_the_pipeline_says_otherwise(
    tmp_path: Path,
) -> None:
    standard = ShopifyTableSource.from_spec(tmp_path, None, PipelineSpec.model_validate(SPEC), {})  # type: ignore[arg-type]
    assert standard.budget is not None
    assert (standard.budget.rate.requests, standard.budget.rate.seconds) == (40, 20.0)
    assert standard.api_bucket == LeakyBucket("X-Shopify-Shop-Api-Call-Limit", leak=2.0)
    assert not (tmp_path / ".hakiri").exists()  # opening a source (plan) writes nothing
    standard.budget.take()
    assert standard.budget.path.is_file()  # the first request makes it
    plus = PipelineSpec.model_validate({**SPEC, "backfill": {"rate_budget": "20/s"}})
    faster = ShopifyTableSource.from_spec(tmp_path, None, plus, {})  # type: ignore[arg-type]
    assert faster.api_bucket is not None and faster.api_bucket.leak == 20.0


def test_a_bucket_says_how_long_to_wait_by_the_header() -> None:
    bucket = LeakyBucket("X-Call-Limit", leak=2.0, headroom=4)
    assert bucket.pause({"X-Call-Limit": "10/40"}) == 0.0
    assert bucket.pause({"X-Call-Limit": "36/40"}) == 0.0
    assert bucket.pause({"X-Call-Limit": "39/40"}) == 1.5
    assert bucket.pause({}) == 0.0
    assert bucket.pause({"X-Call-Limit": "full"}) == 0.0


def _client(
    shop: ShopifyServer, bucket: LeakyBucket | None = None, token: str = SHOPIFY_ACCESS_TOKEN
):
    config = rest_config(ShopifyConfig(shop="openhackers", base_url=shop.url), {})
    return RestClient(
        config.base_url,
        auth=ApiKey("SHOPIFY_TOKEN", "X-Shopify-Access-Token"),
        secrets={"SHOPIFY_TOKEN": token},
        retry=QUICK,
        bucket=bucket,
    )


def _walk(client: RestClient, resource: str = "orders", **params: str) -> list[dict]:
    pages = walk_pages(
        client,
        f"{resource}.json",
        {"limit": "50", "order": "updated_at asc", **params},
        LinkHeader(),
        JsonPath.parse(f"$.{resource}"),
    )
    return [record for page in pages for record in page.records]


def test_every_order_once_across_pages_that_carry_only_page_info_and_limit(
    shopify_server: ShopifyServer,
) -> None:
    with _client(shopify_server) as client:
        orders = _walk(client, status="any")
    assert sorted(o["id"] for o in orders) == sorted(o.id for o in shopify_server.dataset.orders)
    first, *following = shopify_server.requests
    assert first.query["status"] == "any"
    assert len(following) == 5
    assert all(set(r.query) == {"page_info", "limit"} for r in following)
    # without status=any, Shopify lists the open orders only
    with _client(shopify_server) as client:
        assert len(_walk(client)) < len(orders)


def test_the_server_holds_clients_to_shopifys_rules(shopify_server: ShopifyServer) -> None:
    from hakiri.errors import SourceRefused

    with (
        _client(shopify_server, token="shpat_wrong") as client,
        pytest.raises(SourceRefused, match="401"),
    ):
        client.get("orders.json")
    with _client(shopify_server) as client:
        link = client.get("orders.json", {"limit": "50"}).headers["Link"]
        url = link.split(">")[0].lstrip("<")
        with pytest.raises(SourceRefused, match="400"):
            client.get(url, {"status": "any"})  # anything beside page_info and limit


def test_a_429_is_waited_out_and_a_nearly_full_bucket_slows_the_client() -> None:
    """A shop of 10 requests leaking 5 a second, nearly full of another app's requests:
    the client waits for it to leak before each request, and a forced 429 is retried; no
    record is lost or read twice."""
    with ShopifyServer(
        ShopDataset.generate(), token=SHOPIFY_ACCESS_TOKEN, bucket=10, leak=5
    ) as shop:
        shop.fill_bucket(9)
        shop.throttle(times=1)
        bucket = LeakyBucket("X-Shopify-Shop-Api-Call-Limit", leak=5.0, headroom=2)
        with _client(shop, bucket) as client:
            products = _walk(client, "products", limit="10")
            assert client.paced > 0
        assert sorted(p["id"] for p in products) == sorted(p.id for p in shop.dataset.products)
        assert [r.status for r in shop.requests].count(429) == 1  # the forced one only
        assert max(r.used for r in shop.requests) >= 8  # the bucket did fill
