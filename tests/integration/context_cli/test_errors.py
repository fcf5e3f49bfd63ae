"""Every `hakiri context` failure is one line and a hint, exit 1, never a traceback."""

from __future__ import annotations

import pytest

from tests.integration.context_cli.conftest import ContextProject, orders


@pytest.mark.parametrize(
    "command",
    [
        ("show", "nope"),
        ("history", "nope"),
        ("optimize", "nope"),
        ("vacuum", "nope", "--retain-hours", "200"),
        ("show", "_staging"),
    ],
)
def test_an_unknown_table_lists_the_tables_there_are(
    project: ContextProject, command: tuple[str, ...]
) -> None:
    project.delta("orders", orders(1))
    project.delta("people", orders(1))

    result = project.cli(*command)

    assert result.exit_code == 1
    assert f"error: no table `{command[1]}` in the context store (.hakiri/context)" in result.stderr
    assert "hint: the tables are: orders, people" in result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_an_unknown_table_in_an_empty_store(project: ContextProject) -> None:
    result = project.cli("show", "orders")
    assert result.exit_code == 1
    assert "hint: the store has no tables yet" in result.stderr


def test_a_version_that_does_not_exist_names_the_latest(project: ContextProject) -> None:
    project.delta("orders", orders(1))
    project.delta("orders", orders(2))

    result = project.cli("show", "orders", "--version", "9")

    assert result.exit_code == 1
    assert "error: table `orders` has no version 9 (the latest is 1)" in result.stderr
    assert "hakiri context history orders" in result.stderr


def test_a_damaged_log_is_one_error_and_does_not_hide_the_other_tables(
    project: ContextProject,
) -> None:
    location = project.delta("orders", orders(1))
    project.delta("orders", orders(2))
    project.delta("people", orders(1))
    (location / "_delta_log" / f"{1:020d}.json").write_text("not json{", encoding="utf-8")

    result = project.cli("history", "orders")

    assert result.exit_code == 1
    assert "error: cannot read the Delta table at" in result.stderr
    assert "hint: the context store's transaction log is damaged" in result.stderr
    assert "Traceback" not in result.stderr

    listing = project.json("tables")
    by_name = {t["name"]: t for t in listing["tables"]}
    assert by_name["orders"]["error"].startswith("cannot read the Delta table")
    assert by_name["orders"]["version"] is None
    assert by_name["people"]["error"] is None and by_name["people"]["rows"] == 1


def test_a_table_in_two_stores_needs_store(project: ContextProject) -> None:
    project.write(
        "hakiri.toml",
        """
        [project]
        name = "context-cli"

        [[pipeline]]
        id = "orders"
        source = { connector = "files", config = { path = "data/*.csv" } }
        tables = ["orders"]
        destination = { connector = "context", config = { path = "lake" } }
        """,
    )
    project.delta("orders", orders(1))
    project.delta("orders", orders(1, 2), store="lake")

    ambiguous = project.cli("show", "orders")
    assert ambiguous.exit_code == 1
    assert "is in 2 context stores" in ambiguous.stderr and "--store" in ambiguous.stderr

    picked = project.json("show", "orders", "--store", "lake")
    assert picked["rows_total"] == 2
