"""A generated, deterministic shop: orders (with their line items), customers and products,
as the suite's Shopify-shaped server serves them (tests/support/shopify_server.py).

    shop = ShopDataset.generate(orders=300, customers=120, products=80, seed=7)
    shop.orders[0].name                  # "#1001"
    shop.edit_orders(50, at=now)         # 50 orders get a new updated_at and note

The same seed gives the same records. Times are whole seconds in 2023-2024, written as
Shopify writes them: in the shop's time zone, with its offset (2023-05-01T09:30:00-04:00).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Customer", "Order", "Product", "ShopDataset", "shop_time"]

_START = 1_672_531_200  # 2023-01-01T00:00:00Z
_OFFSET = -4 * 3600  # the shop's time zone
_STATUSES = ("open", "closed", "cancelled")


def shop_time(epoch: int | None) -> str | None:
    """Shopify's timestamp form: the shop's local time and its offset."""
    if epoch is None:
        return None
    local = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(epoch + _OFFSET))
    return f"{local}-04:00"


@dataclass
class Product:
    id: int
    title: str
    vendor: str
    price: str
    created_at: int
    updated_at: int

    def json(self) -> dict[str, Any]:
        handle = self.title.lower().replace(" ", "-")
        return {
            "id": self.id,
            "title": self.title,
            "body_html": f"<p>{self.title}</p>",
            "vendor": self.vendor,
            "product_type": "Shirts",
            "handle": handle,
            "status": "active",
            "tags": "cotton, summer",
            "created_at": shop_time(self.created_at),
            "updated_at": shop_time(self.updated_at),
            "published_at": shop_time(self.created_at),
            "variants": [{"id": self.id * 10 + 1, "sku": f"{handle}-m", "price": self.price}],
        }


@dataclass
class Customer:
    id: int
    email: str
    first_name: str
    last_name: str
    created_at: int
    updated_at: int
    orders_count: int = 0
    total_spent: float = 0.0

    def json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "email": self.email,
            "first_name": self.first_name,
            "last_name": self.last_name,
            "state": "enabled",
            "orders_count": self.orders_count,
            "total_spent": f"{self.total_spent:.2f}",
            "verified_email": True,
            "tags": "newsletter",
            "created_at": shop_time(self.created_at),
            "updated_at": shop_time(self.updated_at),
            "default_address": {"city": "Ottawa", "country_code": "CA"},
        }


@dataclass
class Order:
    id: int
    number: int
    customer: Customer
    status: str  # open, closed or cancelled: Shopify lists open ones unless status=any
    lines: list[tuple[int, Product, int]]  # (line item id, product, quantity)
    created_at: int
    updated_at: int
    note: str = ""

    @property
    def name(self) -> str:
        return f"#{self.number}"

    @property
    def total(self) -> str:
        return f"{sum(float(p.price) * q for _, p, q in self.lines):.2f}"

    def json(self) -> dict[str, Any]:
        closed = self.updated_at if self.status == "closed" else None
        return {
            "id": self.id,
            "name": self.name,
            "order_number": self.number,
            "email": self.customer.email,
            "note": self.note,
            "customer": {"id": self.customer.id, "email": self.customer.email},
            "financial_status": "paid",
            "fulfillment_status": "fulfilled" if self.status == "closed" else None,
            "currency": "CAD",
            "subtotal_price": self.total,
            "total_tax": "0.00",
            "total_price": self.total,
            "created_at": shop_time(self.created_at),
            "updated_at": shop_time(self.updated_at),
            "cancelled_at": shop_time(self.updated_at if self.status == "cancelled" else None),
            "closed_at": shop_time(closed),
            "line_items": [
                {
                    "id": line,
                    "product_id": product.id,
                    "variant_id": product.id * 10 + 1,
                    "title": product.title,
                    "variant_title": "M",
                    "sku": f"{product.title.lower().replace(' ', '-')}-m",
                    "quantity": quantity,
                    "price": product.price,
                }
                for line, product, quantity in self.lines
            ],
        }


@dataclass
class ShopDataset:
    products: list[Product] = field(default_factory=list)
    customers: list[Customer] = field(default_factory=list)
    orders: list[Order] = field(default_factory=list)
    version: int = 0  # bumped by every edit

    @classmethod
    def generate(
        cls, *, orders: int = 300, customers: int = 120, products: int = 80, seed: int = 7
    ) -> ShopDataset:
        rng = random.Random(seed)

        def moment() -> tuple[int, int]:
            created = _START + rng.randrange(0, 600 * 86_400)
            return created, created + rng.randrange(0, 60 * 86_400)

        shop = cls()
        for k in range(products):
            price = f"{rng.randrange(500, 9000) / 100:.2f}"
            shop.products.append(Product(632910392 + k, f"Shirt {k}", "Hakiri", price, *moment()))
        for k in range(customers):
            email = f"customer{k}@example.com"
            shop.customers.append(Customer(207119551 + k, email, f"Ann{k}", "Lee", *moment()))
        line = 466157049
        for k in range(orders):
            customer = rng.choice(shop.customers)
            lines = []
            for _ in range(rng.randint(1, 4)):
                lines.append((line, rng.choice(shop.products), rng.randint(1, 3)))
                line += 1
            order = Order(
                450789469 + k, 1001 + k, customer, rng.choice(_STATUSES), lines, *moment()
            )
            customer.orders_count += 1
            customer.total_spent += float(order.total)
            shop.orders.append(order)
        return shop

    def edit_orders(self, n: int, *, at: int) -> list[int]:
        """`n` orders (every sixth, from the first) get a note and `updated_at` = `at`."""
        edited = self.orders[::6][:n]
        for order in edited:
            order.updated_at, order.note = at, f"edited at {at}"
        self.version += 1
        return [order.id for order in edited]
