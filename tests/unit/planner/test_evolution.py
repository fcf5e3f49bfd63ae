"""Schema evolution decisions: the source's columns against an existing target, per policy."""

from __future__ import annotations

import pytest

from hakiri.catalog.records import SchemaEvent
from hakiri.destinations.base import ColumnRetype, TargetColumn
from hakiri.planner.evolution import SchemaRefused, accepted_changes, decide

PG_TARGET = (TargetColumn("id", "bigint"), TargetColumn("n", "integer"), TargetColumn("s", "text"))


def _decide(
    source, target=PG_TARGET, policy="evolve", renames=None, accepted=None, kind="postgres"
):  # type: ignore[no-untyped-def]
    return decide(
        source,
        target,
        destination_kind=kind,
        policy=policy,
        renames=renames or {},
        accepted=accepted or set(),
        where="pipeline `p`, table t -> t",
    )


def test_the_same_columns_change_nothing() -> None:
    decision = _decide([("id", "bigint"), ("n", "int"), ("s", "string")])
    assert decision.change.empty and not decision.missing and not decision.events()


def test_a_new_column_is_added_with_the_destinations_type() -> None:
    decision = _decide([("id", "bigint"), ("n", "int"), ("s", "string"), ("x", "double")])
    assert decision.change.add == (TargetColumn("x", "double precision"),)
    assert decision.events() == [("add_column", {"column": "x", "type": "double precision"})]


def test_a_column_gone_from_the_source_is_kept_and_logged() -> None:
    decision = _decide([("id", "bigint"), ("s", "string")])
    assert decision.change.empty and decision.missing == ["n"]
    assert ("missing_column", {"column": "n"}) in decision.events()


@pytest.mark.parametrize(
    ("source_type", "target_type", "wanted"),
    [
        ("bigint", "integer", "bigint"),
        ("double", "real", "double precision"),
        ("timestamp", "date", "timestamp with time zone"),
    ],
)
def test_a_wider_type_widens_the_target(source_type: str, target_type: str, wanted: str) -> None:
    decision = _decide([("c", source_type)], target=(TargetColumn("c", target_type),))
    assert decision.change.widen == (ColumnRetype("c", target_type, wanted),)


def test_int_widens_to_long_in_the_context_stores_spelling() -> None:
    target = (TargetColumn("c", "int"),)
    decision = _decide([("c", "bigint")], target=target, kind="context")
    assert decision.change.widen == (ColumnRetype("c", "int", "long"),)  # Delta's spelling


def test_a_narrower_type_loads_as_it_is() -> None:
    decision = _decide([("id", "int"), ("n", "smallint"), ("s", "string")])
    assert decision.change.empty


def test_an_incompatible_type_is_refused_before_anything_with_guidance() -> None:
    target = (TargetColumn("id", "bigint"), TargetColumn("s", "integer"))
    with pytest.raises(SchemaRefused) as refused:
        _decide([("id", "bigint"), ("s", "string")], target=target)
    assert "s: text cannot load into integer" in refused.value.reason
    assert "hakiri schema accept" in (refused.value.hint or "")
    assert [(b.kind, b.column) for b in refused.value.blocked] == [("incompatible", "s")]


def test_an_accepted_incompatible_type_is_converted_in_place() -> None:
    target = (TargetColumn("c", "integer"),)
    decision = _decide([("c", "string")], target=target, accepted={("incompatible", "c")})
    assert decision.change.retype == (ColumnRetype("c", "integer", "text"),)


def test_a_declared_rename_renames_the_target_column() -> None:
    decision = _decide(
        [("id", "bigint"), ("count", "int"), ("s", "string")], renames={"n": "count"}
    )
    assert decision.change.rename == (("n", "count"),)
    assert decision.change.add == () and decision.missing == []


def test_an_undeclared_rename_is_a_drop_and_an_add() -> None:
    decision = _decide([("id", "bigint"), ("count", "int"), ("s", "string")])
    assert decision.change.add == (TargetColumn("count", "integer"),)
    assert decision.missing == ["n"]


def test_discard_columns_leaves_new_columns_out_and_still_widens() -> None:
    decision = _decide(
        [("id", "bigint"), ("n", "bigint"), ("s", "string"), ("x", "int")],
        policy="discard_columns",
    )
    assert decision.discard == ["x"] and decision.change.add == ()
    assert decision.change.widen == (ColumnRetype("n", "integer", "bigint"),)


@pytest.mark.parametrize(
    ("source", "renames", "named"),
    [
        ([("id", "bigint"), ("n", "int"), ("s", "string"), ("x", "int")], {}, "x (integer) is new"),
        ([("id", "bigint"), ("s", "string")], {}, "n is no longer in the source"),
        ([("id", "bigint"), ("n", "bigint"), ("s", "string")], {}, "n: integer would widen"),
        ([("id", "bigint"), ("m", "int"), ("s", "string")], {"n": "m"}, "n would be renamed to m"),
    ],
)
def test_freeze_refuses_any_change(source, renames, named) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SchemaRefused) as refused:
        _decide(source, policy="freeze", renames=renames)
    assert named in refused.value.reason
    assert "'freeze'" in refused.value.reason


def test_freeze_applies_a_change_once_it_is_accepted() -> None:
    source = [("id", "bigint"), ("n", "int"), ("s", "string"), ("x", "int")]
    decision = _decide(source, policy="freeze", accepted={("add_column", "x")})
    assert decision.change.add == (TargetColumn("x", "integer"),)


def test_an_accept_is_used_up_by_the_change_it_allowed() -> None:
    def event(kind: str, **detail: object) -> SchemaEvent:
        return SchemaEvent("p", "t", kind, dict(detail))

    events = [
        event("blocked", changes=[["incompatible", "c"], ["add_column", "x"]]),
        event("accept", changes=[["incompatible", "c"], ["add_column", "x"]]),
    ]
    assert accepted_changes(events, "t") == {("incompatible", "c"), ("add_column", "x")}
    assert accepted_changes(events, "other") == set()
    events.append(event("retype", column="c", **{"from": "integer", "to": "text"}))
    assert accepted_changes(events, "t") == {("add_column", "x")}


def test_a_refused_change_of_an_inferred_type_says_to_declare_never_to_accept() -> None:
    target = (TargetColumn("id", "bigint"), TargetColumn("amount", "double precision"))
    with pytest.raises(SchemaRefused) as refused:
        decide(
            [("id", "bigint"), ("amount", "int")],
            target,
            destination_kind="postgres",
            policy="evolve",
            renames={},
            accepted=set(),
            where="pipeline `p`, table t -> t",
            guessed=frozenset({"id", "amount"}),
        )
    hint = refused.value.hint or ""
    assert "type of amount is inferred" in hint
    assert "declare the column types in the source's `columns`" in hint
    assert "accept" not in hint
