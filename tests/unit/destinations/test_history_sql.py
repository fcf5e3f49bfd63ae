"""The history modes' SQL (destinations/history), written once and rendered for PostgreSQL
and Spark SQL: every query parses back in its dialect, reads the tables and columns it
should, and quotes a name with a space, a quote or a backtick correctly. No JVM, no server."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import sqlglot
from sqlglot import exp

from hakiri.destinations.base import Window
from hakiri.destinations.history.deletes import (
    absent_rows,
    live_rows,
    planned_doomed,
    planned_live,
)
from hakiri.destinations.history.keys import null_keys
from hakiri.destinations.history.render import Dialect, count_rows, render, row_hash, table
from hakiri.destinations.history.scd2 import (
    HASH,
    affected_keys,
    closing,
    duplicate_versions,
    history,
    history_columns,
    new_versions,
    staged_versions,
    stale_versions,
)
from hakiri.destinations.history.window import batch_values, in_batch_values, range_predicate
from hakiri.errors import LoadError
from hakiri.spec.load import LoadSpec

DIALECTS: tuple[Dialect, ...] = ("postgres", "spark")
ODD = ("my id", 'say "hi"', "back`tick")  # a key, a tracked column, another tracked column
AT = datetime(2026, 1, 2, tzinfo=UTC)

STAGED = table("stg schema", "batch 1")
TARGET = table("wh", "dim customer")
NEW, KEYS, RESULT = table("_h_new"), table("_h_keys"), table("_h_result")


def _load(**options: object) -> LoadSpec:
    return LoadSpec.model_validate(
        {"mode": "scd2", "key": [ODD[0]], "delete_scope": "`say \"hi\"` = 'eu'", **options}
    )


def _columns(dialect: Dialect):  # type: ignore[no-untyped-def]
    names = [*ODD, "valid_from", "valid_to", "is_current"]
    types = {n: "text" for n in ODD} | {"valid_from": "timestamptz"}
    return history_columns(
        _load(), names, names, "wh.dim customer", types if dialect == "postgres" else None
    )


def _parsed(query: exp.Expr, dialect: Dialect) -> exp.Expr:
    """The rendered text, parsed back in its own dialect (it must parse)."""
    text = render(query, dialect)
    return sqlglot.parse_one(text, read=dialect)


def _tables(tree: exp.Expr) -> set[tuple[str, str]]:
    return {(t.db, t.name) for t in tree.find_all(exp.Table)}


def _columns_read(tree: exp.Expr) -> set[str]:
    return {c.name for c in tree.find_all(exp.Column)}


@pytest.mark.parametrize("dialect", DIALECTS)
def test_every_scd2_query_parses_and_reads_its_tables(dialect: Dialect) -> None:
    cols = _columns(dialect)
    queries = {
        "staged": staged_versions(cols, STAGED, dialect),
        "affected": affected_keys(cols, NEW, TARGET, dialect),
        "history": history(cols, NEW, dialect, TARGET, KEYS),
        "first history": history(cols, NEW, dialect),
        "stale": stale_versions(cols, TARGET, KEYS, RESULT, dialect),
        "new": new_versions(cols, TARGET, KEYS, RESULT, dialect),
        "duplicates": duplicate_versions(cols, STAGED),
        "nulls": null_keys(cols.key, STAGED),
    }
    trees = {name: _parsed(query, dialect) for name, query in queries.items()}
    assert _tables(trees["staged"]) == {("stg schema", "batch 1")}
    assert _tables(trees["affected"]) == {("", "_h_new"), ("wh", "dim customer")}
    # the events: the target's versions and gaps of the affected keys, and the staged ones
    assert {("wh", "dim customer"), ("", "_h_keys"), ("", "_h_new")} <= _tables(trees["history"])
    assert ("wh", "dim customer") not in _tables(trees["first history"])
    assert {("wh", "dim customer"), ("", "_h_keys"), ("", "_h_result")} <= _tables(trees["stale"])
    assert {("wh", "dim customer"), ("", "_h_result")} <= _tables(trees["new"])
    for name in ("staged", "affected", "history", "stale", "new", "duplicates", "nulls"):
        assert ODD[0] in _columns_read(trees[name]), name
    assert set(ODD) <= _columns_read(trees["history"])
    assert {"valid_from", "valid_to"} <= _columns_read(trees["stale"])
    # the history's output: its columns, the validity columns, the hash
    outputs = [s.alias_or_name for s in trees["history"].selects]
    assert outputs == [*ODD, "valid_from", "valid_to", "is_current", HASH]
    new = [s.alias_or_name for s in trees["new"].selects]
    assert new == [*ODD, "valid_from", "valid_to", "is_current"]
    # the event logic: one event per key and time, the neighbours', the end at the next
    windows = {w.this.key for w in trees["history"].find_all(exp.Window)}
    assert windows == {"rownumber", "lag", "lead"}


@pytest.mark.parametrize("dialect", DIALECTS)
def test_odd_names_are_quoted_in_each_dialect(dialect: Dialect) -> None:
    cols = _columns(dialect)
    text = render(affected_keys(cols, NEW, TARGET, dialect), dialect)
    if dialect == "postgres":
        assert '"n"."my id"' in text
        assert '"t"."say ""hi"""' in text
        assert '"t"."back`tick"' in text
        assert '"wh"."dim customer"' in text
    else:
        assert "`n`.`my id`" in text
        assert '`t`.`say "hi"`' in text
        assert "`t`.`back``tick`" in text
        assert "`wh`.`dim customer`" in text


def test_the_row_hash_is_the_one_thing_that_differs_by_dialect() -> None:
    pg = render(row_hash(ODD[1:], "t", "postgres", {n: "text" for n in ODD}), "postgres")
    spark = render(row_hash(ODD[1:], "t", "spark"), "spark")
    assert (
        pg
        == 'MD5(CAST(ROW(CAST("t"."say ""hi""" AS text), CAST("t"."back`tick" AS text)) AS text))'
    )
    assert spark == 'SHA2(TO_JSON(STRUCT(`t`.`say "hi"`, `t`.`back``tick`)), 256)'


@pytest.mark.parametrize("dialect", DIALECTS)
def test_closing_counts_current_versions_in_scope_absent_from_the_snapshot(
    dialect: Dialect,
) -> None:
    cols = _columns(dialect)
    live, absent = closing(cols, _load(), STAGED, AT, dialect)
    for predicate in (live, absent):
        tree = _parsed(count_rows(TARGET, predicate), dialect)
        assert {"is_current", 'say "hi"'} <= _columns_read(tree)  # the flag and the scope
    tree = _parsed(count_rows(TARGET, absent), dialect)
    assert _tables(tree) == {("wh", "dim customer"), ("stg schema", "batch 1")}
    assert "2026-01-02 00:00:00" in render(tree, dialect)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_delete_detection_and_plans_count_share_one_predicate(dialect: Dialect) -> None:
    load = LoadSpec.model_validate(
        {
            "mode": "upsert",
            "upsert_key": ["my id"],
            "deletes": "soft",
            "deleted_at_column": "del at",
        }
    )
    live = live_rows(load)
    absent = absent_rows(live, ["my id"], STAGED)
    tree = _parsed(count_rows(TARGET, absent), dialect)
    assert {"my id", "del at"} <= _columns_read(tree)
    assert _tables(tree) == {("wh", "dim customer"), ("stg schema", "batch 1")}
    planned = planned_live(load, ["my id", "del at"])
    assert planned is not None
    assert render(planned, dialect) == render(live, dialect)
    scd2 = _load()
    assert planned_live(scd2, ["my id"]) is None  # no current flag: no history to count
    current = planned_live(scd2, ["my id", "is_current"])
    assert current is not None
    doomed = render(planned_doomed(scd2, current, AT, dialect), dialect)
    assert "valid_from" in doomed and "2026-01-02" in doomed


@pytest.mark.parametrize("dialect", DIALECTS)
def test_the_window_predicates_parse_with_their_bounds(dialect: Dialect) -> None:
    window = Window(
        "day`x", "2026-01-01", "it's", lo_inclusive=True, hi_inclusive=False, nulls=True
    )
    inside = range_predicate(window, "day`x", "date")
    tree = _parsed(count_rows(TARGET, inside), dialect)
    text = render(tree, dialect).upper()
    assert ">= CAST('2026-01-01' AS DATE)" in text and "< CAST(" in text
    assert "IS NULL" in text
    assert _columns_read(tree) == {"day`x"}
    open_below = Window("n", None, "10", hi_inclusive=True)
    assert render(range_predicate(open_below, "n", "bigint"), dialect).endswith(
        "<= CAST('10' AS bigint)"
    )
    values = _parsed(count_rows(TARGET, in_batch_values("day`x", STAGED)), dialect)
    assert _tables(values) == {("wh", "dim customer"), ("stg schema", "batch 1")}
    assert _tables(_parsed(batch_values("day`x", STAGED), dialect)) == {("stg schema", "batch 1")}


def test_one_wording_names_the_target() -> None:
    load = LoadSpec.model_validate({"mode": "scd2", "key": ["id"], "track": ["nope"]})
    with pytest.raises(LoadError, match=r"track names 'nope', which is not a column of wh\.t"):
        history_columns(
            load, ["id", "a"], ["id", "a", "valid_from", "valid_to", "is_current"], "wh.t"
        )
    with pytest.raises(LoadError, match=r"the history wh\.t has no column 'valid_to'"):
        history_columns(_load(), list(ODD), [*ODD, "valid_from"], "wh.t")
