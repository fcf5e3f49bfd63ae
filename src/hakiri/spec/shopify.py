"""`connector = "shopify"`: a shop's orders, their line items, customers and products,
through Shopify's Admin REST API (`sources.rest.shopify` reads it as a `rest` preset).

    [[pipeline]]
    id = "shopify-orders"
    source = { connector = "shopify", config = { shop = "openhackers" } }
    secrets = ["SHOPIFY_TOKEN"]
    tables = ["orders", "customers", "products"]
    incremental = "updated_at"
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Literal

from pydantic import Field, field_validator
from pydantic_core import PydanticCustomError

from hakiri.spec.base import SpecModel

__all__ = [
    "SHOPIFY_API_VERSION",
    "SHOPIFY_BASE_URL_VARIABLE",
    "SHOPIFY_TABLES",
    "ShopifyConfig",
    "ShopifySource",
    "check_shopify_pipeline",
]

SHOPIFY_TABLES = ("orders", "order_line_items", "customers", "products")
# The Admin API version a pipeline asks for unless it pins another (Shopify keeps each
# stable version a year; pin one in the manifest to move on your own schedule).
SHOPIFY_API_VERSION = "2024-10"
# Overrides every shopify source's base_url (a test server, a proxy) without editing the
# manifest.
SHOPIFY_BASE_URL_VARIABLE = "HAKIRI_SHOPIFY_BASE_URL"
_SECRET = r"^[A-Za-z_][A-Za-z0-9_]*$"


class ShopifyConfig(SpecModel):
    """`connector = "shopify"`: one shop's Admin REST API."""

    shop: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9-]*(\.myshopify\.com)?$")] = Field(
        description="The shop's name: 'openhackers' for openhackers.myshopify.com."
    )
    api_version: Annotated[str, Field(pattern=r"^(\d{4}-\d{2}|unstable)$")] = Field(
        SHOPIFY_API_VERSION, description="The Admin API version asked for, e.g. '2024-10'."
    )
    base_url: Annotated[str, Field(pattern=r"^https?://")] | None = Field(
        None,
        description="Where the API is instead of https://{shop}.myshopify.com (a proxy, a "
        "test server); paths stay /admin/api/{api_version}/… under it. "
        f"{SHOPIFY_BASE_URL_VARIABLE} overrides it.",
    )
    token_secret: Annotated[str, Field(pattern=_SECRET)] = Field(
        "SHOPIFY_TOKEN",
        description="The environment variable that holds the Admin API access token, sent "
        "as X-Shopify-Access-Token (never printed); list it in the pipeline's `secrets`.",
    )
    limit: int = Field(250, ge=1, le=250, description="Records per request (Shopify allows 250).")

    @field_validator("shop")
    @classmethod
    def _name_only(cls, value: str) -> str:
        return value.removesuffix(".myshopify.com")

    def origin(self, override: str | None = None) -> str:
        """Where the shop's API is: the override, base_url, or the shop's own host."""
        found = override or self.base_url or f"https://{self.shop}.myshopify.com"
        return found.rstrip("/")


class ShopifySource(SpecModel):
    connector: Literal["shopify"]
    config: ShopifyConfig


def check_shopify_pipeline(
    config: ShopifyConfig, tables: Sequence[tuple[str, str | None]], secrets: Sequence[str]
) -> None:
    """A shopify pipeline reads its tables, each past `updated_at` or walked whole (no
    cursor), with the token's variable among its `secrets`. `tables`: (name, cursor column)."""
    for name, cursor in tables:
        if name not in SHOPIFY_TABLES:
            raise PydanticCustomError(
                "shopify_table",
                "the shopify connector has no table `{table}`",
                {"table": name, "hint": f"use {', '.join(SHOPIFY_TABLES)}"},
            )
        if cursor not in (None, "updated_at"):
            raise PydanticCustomError(
                "shopify_cursor",
                "the shopify connector reads `{table}` past `updated_at` (updated_at_min), "
                "not `{cursor}`",
                {"table": name, "cursor": cursor, "hint": 'set incremental = "updated_at"'},
            )
    if config.token_secret not in secrets:
        raise PydanticCustomError(
            "shopify_secret",
            "the shopify connector reads its token from {secret}, which `secrets` does not list",
            {"secret": config.token_secret, "hint": f'add secrets = ["{config.token_secret}"]'},
        )
