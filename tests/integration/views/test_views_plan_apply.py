"""Views through plan and apply, on the worked example of docs/views.md (two pipelines into
the context store, three views: a join across them, an aggregate, a view on a view), with
the real engine and catalog: what plan shows, what apply records in the catalog and in the
store's `_views`, and what each edit of a view does next."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from typer.testing import CliRunner, Result

from hakiri.catalog.store import Catalog
from hakiri.cli.main import app
from tests.support.views_example import write_example

STORE = Path(".hakiri") / "context"


class Shop:
    def __init__(self, root: Path) -> None:
        self.root = root
        write_example(root)

    def cli(self, *args: str) -> Result:
        return CliRunner().invoke(app, [*args, "--project", str(self.root)], catch_exceptions=False)

    def json(self, *args: str) -> Any:
        result = self.cli(*args, "--json")
        assert result.exit_code == 0, result.stderr
        return json.loads(result.stdout)

    def catalog(self) -> Catalog:
        return Catalog.open(f"sqlite:///{self.root / '.hakiri' / 'state.sqlite'}", migrate=False)

    def views_table(self) -> list[dict[str, Any]]:
        rows = DeltaTable(str(self.root / STORE / "_views")).to_pyarrow_table().to_pylist()
        return [{k: v for k, v in r.items() if k != "applied_at"} for r in rows]

    def edit(self, relative: str, old: str, new: str) -> None:
        path = self.root / relative
        text = path.read_text()
        assert old in text
        path.write_text(text.replace(old, new))


@pytest.fixture
def shop(tmp_path: Path) -> Shop:
    return Shop(tmp_path)


JOIN = (
    "SELECT o.id, o.customer_id, o.total, c.email\n"
    "FROM orders o JOIN customers c ON o.customer_id = c.id"
)
SPEND = (
    "SELECT customer_id, email, sum(total) AS spent, count(*) AS orders\n"
    "FROM customer_orders\n"
    "GROUP BY customer_id, email"
)
BIG = "SELECT customer_id, email, spent FROM customer_spend WHERE spent > 100"


def test_views_are_planned_applied_versioned_and_dropped(shop: Shop, spark) -> None:
    assert shop.cli("validate").exit_code == 0

    # plan: three views to create, each with what it reads; changes exit 2
    planned = shop.cli("plan", "--detailed-exitcode")
    assert planned.exit_code == 2, planned.stderr
    assert "+ view customer_orders create (version 1)  reads orders, customers" in planned.stdout
    assert "+ view customer_spend create (version 1)  reads customer_orders" in planned.stdout
    assert "+ view big_spenders create (version 1)  reads customer_spend" in planned.stdout
    assert "Views: 3 to create, 0 to replace, 0 to drop." in planned.stdout
    document = shop.json("plan")
    assert [(v["name"], v["action"], v["reads"]) for v in document["views"]] == [
        ("customer_orders", "create", ["orders", "customers"]),
        ("customer_spend", "create", ["customer_orders"]),
        ("big_spenders", "create", ["customer_spend"]),
    ]
    assert document["summary"]["view_create"] == 3

    # apply: the pipelines load, then the views are recorded in the catalog and in _views
    applied = shop.cli("apply")
    assert applied.exit_code == 0, applied.stderr
    for name in ("customer_orders", "customer_spend", "big_spenders"):
        assert f"view {name}: created (version 1)" in applied.stdout
    definitions = [
        {
            "name": "big_spenders",
            "version": 1,
            "sql": BIG,
            "description": "Customers who spent more than 100.",
            "reads": ["customer_spend"],
        },
        {
            "name": "customer_orders",
            "version": 1,
            "sql": JOIN,
            "description": "Each order with its customer's email.",
            "reads": ["orders", "customers"],
        },
        {
            "name": "customer_spend",
            "version": 1,
            "sql": SPEND,
            "description": "What each customer spent, over how many orders.",
            "reads": ["customer_orders"],
        },
    ]
    with shop.catalog() as catalog:
        live = catalog.live_views()
    assert [
        {
            "name": r.name,
            "version": r.version,
            "sql": r.sql,
            "description": r.description,
            "reads": list(r.reads),
        }
        for r in live.values()
    ] == definitions
    assert shop.views_table() == definitions
    assert [t["name"] for t in shop.json("context", "tables")["tables"]] == [
        "customers",
        "orders",
    ]

    # as applied: nothing to do
    again = shop.cli("plan", "--detailed-exitcode")
    assert again.exit_code == 0, again.stdout
    assert "Views: 0 to create, 0 to replace, 0 to drop, 3 unchanged." in again.stdout
    assert "view customer" not in again.stdout
    assert shop.cli("apply").stdout == "no changes: every pipeline and view is up to date\n"
    delta_version = DeltaTable(str(shop.root / STORE / "_views")).version()

    # a view's SQL edited: ~ replace with the diff, then version 2
    shop.edit(
        "views/customer_spend.toml",
        "FROM customer_orders\n",
        "FROM customer_orders\nWHERE total > 0\n",
    )
    replaced = shop.cli("plan", "--detailed-exitcode")
    assert replaced.exit_code == 2
    assert (
        "~ view customer_spend replace (version 1 -> 2)  reads customer_orders" in replaced.stdout
    )
    assert "    +WHERE total > 0\n" in replaced.stdout
    assert "     FROM customer_orders\n" in replaced.stdout  # context line of the diff
    [spend] = [v for v in shop.json("plan")["views"] if v["name"] == "customer_spend"]
    assert (spend["before_sql"], spend["sql"]) == (
        SPEND,
        SPEND.replace("\nGROUP", "\nWHERE total > 0\nGROUP"),
    )
    applied = shop.cli("apply")
    assert applied.stdout.strip() == "view customer_spend: replaced (version 2)"
    with shop.catalog() as catalog:
        first, second = catalog.view_versions("customer_spend")
    assert (first.version, first.dropped_at is not None) == (1, True)
    assert (second.version, second.dropped_at, second.sql) == (2, None, spend["sql"])
    assert [(r["name"], r["version"]) for r in shop.views_table()] == [
        ("big_spenders", 1),
        ("customer_orders", 1),
        ("customer_spend", 2),
    ]
    assert DeltaTable(str(shop.root / STORE / "_views")).version() == delta_version + 1

    # a view removed from the manifests: - drop, then dropped
    (shop.root / "views" / "big_spenders.json").unlink()
    dropped = shop.cli("plan")
    assert (
        "- view big_spenders drop (version 1; in no manifest)  reads customer_spend"
        in dropped.stdout
    )
    applied = shop.cli("apply", "--json")
    assert applied.exit_code == 0
    assert json.loads(applied.stdout)[-1] == {
        "view": "big_spenders",
        "status": "dropped",
        "version": 1,
        "reads": ["customer_spend"],
    }
    with shop.catalog() as catalog:
        assert list(catalog.live_views()) == ["customer_orders", "customer_spend"]
        assert catalog.view_versions("big_spenders")[0].dropped_at is not None
    assert [r["name"] for r in shop.views_table()] == ["customer_orders", "customer_spend"]

    # a pipeline change that drops a column a view reads is named in plan
    shop.edit(
        "hakiri.toml",
        'tables = ["orders"]\n',
        'tables = ["orders"]\ntransforms = [{ op = "drop", columns = ["total"] }]\n',
    )
    broken = shop.cli("plan")
    warning = (
        "warning: view customer_orders reads column orders.total, which pipeline orders drops "
        "(it no longer loads it: the column stays, NULL in new rows)"
    )
    orders_section = broken.stdout.split("~ orders change", 1)[1].split("\n= ", 1)[0]
    assert warning in orders_section
    [orders] = [p for p in shop.json("plan", "orders")["pipelines"] if p["id"] == "orders"]
    assert warning.removeprefix("warning: ") in orders["warnings"]
