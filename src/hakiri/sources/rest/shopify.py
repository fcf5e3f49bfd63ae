"""The `shopify` connector, a preset of `rest`: a shop's orders, their line items, customers
and products, read past their `updated_at` cursor through Shopify's Admin REST API.

The manifest's `ShopifyConfig` becomes a `RestConfig` (`rest_config`): the API root
`https://{shop}.myshopify.com/admin/api/{api_version}` (base_url, or the variable
HAKIRI_SHOPIFY_BASE_URL, replaces the host), the access token from the variable
`token_secret` names sent as `X-Shopify-Access-Token`, Link-header pages, and one endpoint
per table, `{table}.json`, whose records are under the table's name (`{"orders": [...]}`).
The first page asks for `updated_at_min` / `updated_at_max` = the range, sorted by
`updated_at` ascending, `limit` records; the next pages are the Link header's URLs as
given (Shopify refuses any parameter beside `page_info` and `limit` there).

What is Shopify's own: orders are asked with `status=any` (Shopify lists only open ones
otherwise); `order_line_items` reads the orders endpoint and spreads each order's
`line_items` into rows of their own (its cursor is the order's `updated_at`); the rate is
Shopify's leaky bucket (40 requests, leaking 2 a second, on the standard plans): the
pipeline's rate budget defaults to that rate, the client slows down when an answer's
`X-Shopify-Shop-Api-Call-Limit` says the bucket is nearly full (other apps of the shop
share it), and a 429 waits out its `Retry-After` (`rest.client`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hakiri.sources.base import SourceColumn, SourceObservation
from hakiri.sources.rest.budget import LeakyBucket, Rate, pipeline_budget
from hakiri.sources.rest.source import RestTableSource
from hakiri.spec.pipeline import PipelineSpec, TableSpec
from hakiri.spec.project import ProjectFile
from hakiri.spec.rest import ApiKeyAuth, LinkHeaderPages, RestColumn, RestConfig, RestEndpoint
from hakiri.spec.shopify import SHOPIFY_BASE_URL_VARIABLE, SHOPIFY_TABLES, ShopifyConfig

__all__ = ["ShopifyTableSource", "api_root", "loaded_columns", "rest_config"]

# Shopify's standard plans: a bucket of 40 requests that leaks 2 a second.
STANDARD_RATE = "40/20s"
CALL_LIMIT = "X-Shopify-Shop-Api-Call-Limit"
_MONEY = "decimal(12,2)"

_ORDER: dict[str, str | RestColumn] = {
    "id": "bigint",
    "name": "string",
    "email": "string",
    "customer_id": RestColumn(path="customer.id", type="bigint"),
    "financial_status": "string",
    "fulfillment_status": "string",
    "currency": "string",
    "subtotal_price": _MONEY,
    "total_tax": _MONEY,
    "total_price": _MONEY,
    "created_at": "timestamp",
    "updated_at": "timestamp",
    "cancelled_at": "timestamp",
    "closed_at": "timestamp",
}
_CUSTOMER: dict[str, str | RestColumn] = {
    "id": "bigint",
    "email": "string",
    "first_name": "string",
    "last_name": "string",
    "state": "string",
    "orders_count": "int",
    "total_spent": _MONEY,
    "tags": "string",
    "created_at": "timestamp",
    "updated_at": "timestamp",
}
_PRODUCT: dict[str, str | RestColumn] = {
    "id": "bigint",
    "title": "string",
    "handle": "string",
    "vendor": "string",
    "product_type": "string",
    "status": "string",
    "tags": "string",
    "created_at": "timestamp",
    "updated_at": "timestamp",
}
# What the orders endpoint gives order_line_items, before its rows are spread (`_shaped`).
_ORDER_LINES: dict[str, str | RestColumn] = {
    "id": "bigint",
    "updated_at": "timestamp",
    "line_items": "string",  # JSON text, parsed with _LINE_ITEMS
}
_LINE_ITEMS = (
    "array<struct<id:bigint,product_id:bigint,variant_id:bigint,title:string,"
    "variant_title:string,sku:string,quantity:int,price:string>>"
)
_LINE_ITEM_COLUMNS = [
    ("id", "bigint"),
    ("order_id", "bigint"),
    ("product_id", "bigint"),
    ("variant_id", "bigint"),
    ("title", "string"),
    ("variant_title", "string"),
    ("sku", "string"),
    ("quantity", "int"),
    ("price", _MONEY),
    ("updated_at", "timestamp"),
]
# table -> (the endpoint it reads, its columns)
_TABLES: dict[str, tuple[str, dict[str, str | RestColumn]]] = {
    "orders": ("orders", _ORDER),
    "order_line_items": ("orders", _ORDER_LINES),
    "customers": ("customers", _CUSTOMER),
    "products": ("products", _PRODUCT),
}
assert set(_TABLES) == set(SHOPIFY_TABLES)


def loaded_columns(table: str) -> list[tuple[str, str]]:
    """(name, Spark type) of the rows a table loads, in order."""
    if table == "order_line_items":
        return list(_LINE_ITEM_COLUMNS)
    _, columns = _TABLES[table]
    return [(name, c if isinstance(c, str) else c.type) for name, c in columns.items()]


def api_root(config: ShopifyConfig, env: Mapping[str, str]) -> str:
    """The Admin API's root: https://{shop}.myshopify.com/admin/api/{api_version}."""
    return f"{config.origin(env.get(SHOPIFY_BASE_URL_VARIABLE))}/admin/api/{config.api_version}"


def rest_config(config: ShopifyConfig, env: Mapping[str, str]) -> RestConfig:
    """The `rest` configuration that reads a shop's tables."""
    return RestConfig(
        base_url=api_root(config, env),
        auth=ApiKeyAuth(type="api_key", secret=config.token_secret, name="X-Shopify-Access-Token"),
        paginator=LinkHeaderPages(type="link_header"),
        endpoints={table: _endpoint(table, config) for table in SHOPIFY_TABLES},
    )


def _endpoint(table: str, config: ShopifyConfig) -> RestEndpoint:
    resource, columns = _TABLES[table]
    params = {"limit": str(config.limit), "order": "updated_at asc"}
    if resource == "orders":
        params["status"] = "any"  # Shopify lists open orders only, otherwise
    return RestEndpoint(
        path=f"{resource}.json",
        params={**params, "updated_at_min": "{cursor}", "updated_at_max": "{cursor_end}"},
        records=f"$.{resource}",
        columns=columns,
    )


class ShopifyTableSource(RestTableSource):
    connector = "shopify"
    sorted_by_cursor = True  # order=updated_at asc

    @classmethod
    def from_spec(
        cls, root: Path, settings: ProjectFile, spec: PipelineSpec, env: Mapping[str, str]
    ) -> ShopifyTableSource:
        assert isinstance(spec.source.config, ShopifyConfig)
        rate = (spec.backfill.rate_budget if spec.backfill else None) or STANDARD_RATE
        source = cls(
            root,
            spec,
            rest_config(spec.source.config, env),
            env,
            pipeline_budget(root, spec.id, rate),
        )
        # The bucket leaks at the budget's rate: 2 a second, or a plan's own ("20/s": Plus).
        parsed = Rate.parse(rate)
        source.api_bucket = LeakyBucket(CALL_LIMIT, leak=parsed.requests / parsed.seconds)
        return source

    def observe(self, table: TableSpec, cursor: dict[str, Any] | None = None) -> SourceObservation:
        """The columns the table loads; nothing is requested."""
        columns = tuple(SourceColumn(n, t) for n, t in loaded_columns(table.name))
        return SourceObservation(table.name, columns=columns)

    def _shaped(self, table: str, frame: Any) -> Any:
        from pyspark.sql import functions as F

        if table == "order_line_items":
            item = F.explode(F.from_json(F.col("line_items"), _LINE_ITEMS)).alias("item")
            frame = frame.select(F.col("id").alias("order_id"), "updated_at", item)
            return frame.select(
                *[
                    F.col(name if name in ("order_id", "updated_at") else f"item.{name}")
                    .cast(kind)
                    .alias(name)
                    for name, kind in _LINE_ITEM_COLUMNS
                ]
            )
        return frame.select(*[name for name, _ in loaded_columns(table)])
