"""Views in the plan, decided without I/O: the manifests' definitions against the catalog's
live ones (create / replace with the SQL diff / drop / no-op, versions), and the columns a
view names that the tables and views it reads will not have after the plan."""

from __future__ import annotations

from datetime import UTC, datetime

from hakiri.catalog.records import ViewDefinition, ViewRecord
from hakiri.planner.model import ViewAction
from hakiri.planner.views import TableColumns, ViewsObservation, broken_columns, view_changes
from hakiri.spec.views import view_sql_hash

AT = datetime(2026, 11, 29, tzinfo=UTC)
TOTALS_SQL = "SELECT customer_id, sum(total) AS spent\nFROM orders\nGROUP BY customer_id"


def _view(name: str, sql: str, description: str | None = None) -> ViewDefinition:
    from hakiri.guards.context_sql import check_context_sql

    return ViewDefinition(name, sql, description, check_context_sql(sql).reads)


def _record(view: ViewDefinition, version: int = 1) -> ViewRecord:
    return ViewRecord(
        view.name, version, view.sql, view.description, view_sql_hash(view.sql), view.reads, AT
    )


def _actions(seen: ViewsObservation) -> list[tuple[str, str, int | None]]:
    return [(v.name, v.action.value, v.version) for v in view_changes(seen)]


def test_new_views_are_created_at_version_1_in_definition_order_with_their_reads() -> None:
    totals = _view("totals", TOTALS_SQL)
    big = _view("big", "SELECT * FROM totals WHERE spent > 100")
    plans = view_changes(ViewsObservation((totals, big)))
    assert [(v.name, v.action, v.version, v.reads) for v in plans] == [
        ("totals", ViewAction.CREATE, 1, ["orders"]),
        ("big", ViewAction.CREATE, 1, ["totals"]),
    ]
    assert plans[0].sql == TOTALS_SQL and plans[0].sql_diff == []


def test_as_recorded_is_a_no_op_whatever_whitespace_and_semicolon_surround_the_sql() -> None:
    totals = _view("totals", TOTALS_SQL)
    padded = ViewDefinition("totals", f"\n  {TOTALS_SQL};\n", None, totals.reads)
    seen = ViewsObservation((padded,), {"totals": _record(totals, 3)}, {"totals": 3})
    assert _actions(seen) == [("totals", "no-op", 3)]


def test_other_sql_is_a_replace_at_the_next_version_with_a_unified_diff() -> None:
    totals = _view("totals", TOTALS_SQL)
    edited = _view("totals", TOTALS_SQL.replace("FROM orders", "FROM orders\nWHERE total > 0"))
    seen = ViewsObservation((edited,), {"totals": _record(totals, 2)}, {"totals": 2})
    [plan] = view_changes(seen)
    assert (plan.action, plan.version, plan.before_sql) == (ViewAction.REPLACE, 3, TOTALS_SQL)
    assert plan.sql_diff == [
        "--- totals (version 2, applied)",
        "+++ totals (manifests)",
        "@@ -1,3 +1,4 @@",
        " SELECT customer_id, sum(total) AS spent",
        " FROM orders",
        "+WHERE total > 0",
        " GROUP BY customer_id",
    ]


def test_another_description_alone_is_a_replace_without_a_sql_diff() -> None:
    totals = _view("totals", TOTALS_SQL, "Spend.")
    described = _view("totals", TOTALS_SQL, "Spend per customer.")
    [plan] = view_changes(ViewsObservation((described,), {"totals": _record(totals)}))
    assert (plan.action, plan.sql_diff) == (ViewAction.REPLACE, [])
    assert (plan.before_description, plan.description) == ("Spend.", "Spend per customer.")


def test_a_live_view_in_no_manifest_is_dropped_and_a_dropped_name_goes_on_numbering() -> None:
    totals, old = _view("totals", TOTALS_SQL), _view("old", "SELECT id FROM orders")
    seen = ViewsObservation((totals,), {"old": _record(old, 4)}, {"old": 4, "totals": 2})
    assert _actions(seen) == [("totals", "create", 3), ("old", "drop", 4)]
    [_, drop] = view_changes(seen)
    assert (drop.sql, drop.before_sql, drop.reads) == (None, old.sql, ["orders"])


# ---------------------------------------------------------------- columns

ORDERS_NOW = ("id", "customer_id", "total")


def _orders(planned: tuple[str, ...] | None, **gone: str) -> dict[str, TableColumns]:
    return {
        "orders": TableColumns("orders", ORDERS_NOW, planned, gone),
        "customers": TableColumns("customers", ("id", "email"), ("id", "email")),
    }


def _messages(views: list[ViewDefinition], tables: dict[str, TableColumns]) -> list[str]:
    return [b.message for found in broken_columns(views, tables).values() for b in found]


def test_a_column_a_pipeline_stops_loading_is_named_with_the_pipeline() -> None:
    join = _view(
        "customer_orders",
        "SELECT o.id, o.total, c.email FROM orders o JOIN customers c ON o.customer_id = c.id",
    )
    found = broken_columns([join], _orders(("id", "customer_id"), total="drops"))
    [broken] = found["customer_orders"]
    assert (broken.table, broken.column, broken.pipeline, broken.change) == (
        "orders",
        "total",
        "orders",
        "drops",
    )
    assert broken.message == (
        "view customer_orders reads column orders.total, which pipeline orders drops (it no "
        "longer loads it: the column stays, NULL in new rows)"
    )


def test_a_rename_names_the_new_name_and_an_unqualified_column_finds_its_table() -> None:
    join = _view(
        "spend",
        "SELECT customer_id, email, sum(total) AS spent FROM orders JOIN customers "
        "ON orders.customer_id = customers.id GROUP BY customer_id, email ORDER BY spent",
    )
    tables = _orders(("id", "customer_id", "amount"), total="renames to amount")
    assert _messages([join], tables) == [
        "view spend reads column orders.total, which pipeline orders renames to amount"
    ]


def test_a_view_on_a_view_is_checked_against_the_output_columns_of_the_view_it_reads() -> None:
    totals = _view("totals", "SELECT customer_id, sum(total) AS spent FROM orders GROUP BY 1")
    big = _view("big", "SELECT customer_id, spent, tier FROM totals")
    assert _messages([totals, big], _orders(ORDERS_NOW)) == [
        "view big reads column totals.tier, which view totals does not return"
    ]
    renamed = _view(
        "totals", "SELECT customer_id, sum(total) AS total_spent FROM orders GROUP BY 1"
    )
    assert _messages([renamed, big], _orders(ORDERS_NOW)) == [
        "view big reads column totals.spent, which view totals does not return",
        "view big reads column totals.tier, which view totals does not return",
    ]


def test_nothing_is_said_without_a_change_or_when_the_columns_are_not_known() -> None:
    join = _view("j", "SELECT o.id, o.total, c.email FROM orders o JOIN customers c ON o.id = c.id")
    assert _messages([join], _orders(ORDERS_NOW)) == []
    unknown = {"orders": TableColumns("orders", None, None)}
    assert _messages([_view("t", "SELECT id, whatever FROM orders")], unknown) == []


def test_a_column_a_table_never_had_is_said_on_the_view() -> None:
    view = _view("t", "SELECT id, discount FROM orders")
    [broken] = broken_columns([view], _orders(ORDERS_NOW))["t"]
    assert (broken.pipeline, broken.change) == (None, "missing")
    assert broken.message == (
        "view t reads column orders.discount, which table orders (pipeline orders) does not have"
    )
