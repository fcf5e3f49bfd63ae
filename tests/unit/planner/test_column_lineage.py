"""Column lineage of the declarative transforms: each output column -> the source columns its
values derive from (what OpenLineage's ColumnLineageDatasetFacet carries)."""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from hakiri.planner.transforms import column_lineage
from hakiri.spec.transforms import TransformStep

STEPS = TypeAdapter(list[TransformStep])
SOURCE = [
    ("id", "bigint"),
    ("a", "int"),
    ("d", "int"),
    ("customer", "struct<id:int,city:string>"),
    ("tags", "array<string>"),
]


def steps(*documents: dict[str, Any]) -> list[Any]:
    return STEPS.validate_python(list(documents))


def test_without_steps_each_column_is_its_own_input() -> None:
    assert column_lineage(SOURCE[:3], []) == {"id": ("id",), "a": ("a",), "d": ("d",)}


def test_a_chain_of_rename_with_columns_drop_and_cast() -> None:
    chain = steps(
        {"op": "rename", "columns": {"a": "b"}},
        {"op": "with_columns", "columns": {"c": "b * 2 + d", "k": "'fixed'"}},
        {"op": "drop", "columns": ["d"]},
        {"op": "cast", "columns": {"c": "bigint"}},
        {"op": "filter", "expr": "id > 0"},
        {"op": "dedupe", "keys": ["id"], "order_by": ["b desc"]},
    )
    assert column_lineage(SOURCE[:3], chain) == {
        "id": ("id",),
        "b": ("a",),
        "c": ("a", "d"),  # in the source's order, whatever the expression's
        "k": (),  # a literal reads no column
    }


def test_an_expression_sees_the_columns_before_its_step_and_replaces_in_place() -> None:
    chain = steps({"op": "with_columns", "columns": {"a": "a + d", "e": "coalesce(A, id)"}})
    lineage = column_lineage(SOURCE[:3], chain)
    assert list(lineage) == ["id", "a", "d", "e"]
    assert lineage["a"] == ("a", "d")
    assert lineage["e"] == ("id", "a")  # `A` is `a` before the step, as Spark resolves it


def test_struct_fields_and_lambdas_read_only_their_column() -> None:
    chain = steps(
        {
            "op": "with_columns",
            "columns": {"city": "upper(customer.city)", "n": "size(transform(tags, x -> x))"},
        },
        {"op": "flatten", "column": "customer"},
        {"op": "explode", "column": "tags", "alias": "tag"},
        {"op": "select", "columns": ["customer_id", "city", "tag", "n"]},
    )
    assert column_lineage(SOURCE, chain) == {
        "customer_id": ("customer",),
        "city": ("customer",),
        "tag": ("tags",),
        "n": ("tags",),
    }


def test_a_struct_without_known_fields_is_left_out() -> None:
    chain = steps({"op": "flatten", "column": "payload"})
    assert column_lineage([("id", "bigint"), ("payload", None)], chain) == {"id": ("id",)}
