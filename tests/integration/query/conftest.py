"""A shop applied into its context store by `hakiri apply`: two pipelines (orders, customers) and
three views over them (a join across the two, an aggregate, a view on the join), for
`hakiri query` to answer what an independent reader of the Delta tables answers."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import Result

from tests.support.project import Project

SHOP = """
[project]
name = "shop"

[[pipeline]]
id = "orders"
source = { connector = "files", config = { path = "data/orders/*.csv", columns = { order_id = "bigint", customer_id = "bigint", status = "string", amount = "double" } } }
tables = ["orders"]

[[pipeline]]
id = "customers"
source = { connector = "files", config = { path = "data/customers/*.csv", columns = { id = "bigint", name = "string", country = "string" } } }
tables = ["customers"]
load = { mode = "truncate" }

[[view]]
name = "customer_orders"
description = "Orders with their customer's name and country."
sql = '''
SELECT o.order_id, o.status, o.amount, c.name, c.country
FROM orders o JOIN customers c ON o.customer_id = c.id
'''

[[view]]
name = "revenue_by_status"
sql = "SELECT status, count(*) AS orders, round(sum(amount), 2) AS revenue FROM orders GROUP BY status"

[[view]]
name = "revenue_by_country"
sql = '''
SELECT country, count(DISTINCT name) AS customers, round(sum(amount), 2) AS revenue
FROM customer_orders WHERE status <> 'cancelled' GROUP BY country
'''
"""

CUSTOMERS = """id,name,country
1,Ada,FR
2,Grace,US
3,Edsger,NL
4,Barbara,US
"""

STATUSES = ("paid", "shipped", "cancelled", "open")


def orders_csv(first: int, count: int) -> str:
    lines = ["order_id,customer_id,status,amount"]
    for i in range(first, first + count):
        lines.append(f"{i},{i % 4 + 1},{STATUSES[i % 3]},{i * 1.25:.2f}")
    return "\n".join(lines) + "\n"


class Shop(Project):
    """The suite's project helper, for a project with no PostgreSQL."""

    def __init__(self, root: Path) -> None:
        super().__init__(root, "", "")

    def query(self, sql: str, *args: str) -> Result:
        return self.cli("query", sql, *args)

    def table(self, name: str) -> Path:
        return self.root / ".hakiri" / "context" / name


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory, spark) -> Shop:
    """Applied twice: 40 orders, then 20 more (a new version of `orders` to time-travel from)."""
    shop = Shop(tmp_path_factory.mktemp("query") / "shop")
    shop.write("hakiri.toml", SHOP)
    shop.write("data/customers/customers.csv", CUSTOMERS)
    shop.write("data/orders/day1.csv", orders_csv(1, 40))
    first = shop.cli("apply")
    assert first.exit_code == 0, first.stderr
    shop.write("data/orders/day2.csv", orders_csv(41, 20))
    second = shop.cli("apply")
    assert second.exit_code == 0, second.stderr
    return shop
