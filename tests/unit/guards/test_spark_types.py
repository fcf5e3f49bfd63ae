"""Spark SQL type names read without Spark: what a cast may name, and what the planner can tell."""

from __future__ import annotations

import pytest

from hakiri.guards.expressions import UnsafeExpression
from hakiri.guards.spark_types import array_element_type, spark_type, static_type, struct_fields


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("bigint", "bigint"),
        ("LONG", "bigint"),
        ("integer", "int"),
        ("string", "string"),
        ("varchar(10)", "string"),
        ("decimal(12,2)", "decimal(12,2)"),
        ("DECIMAL(12, 2)", "decimal(12,2)"),
        ("decimal", "decimal(10,0)"),
        ("numeric(5,2)", "decimal(5,2)"),
        ("timestamp", "timestamp"),
        ("timestamp_ntz", "timestamp_ntz"),
        ("boolean", "boolean"),
        ("array<bigint>", "array<bigint>"),
        ("map<string, int>", "map<string,int>"),
        ("struct<a: int, `b c`: string>", "struct<a:int,`b c`:string>"),
        ("interval day to second", "interval day to second"),
    ],
)
def test_spark_types_are_read_and_named_canonically(text: str, canonical: str) -> None:
    assert spark_type(text) == canonical


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("text", "'text'"),
        ("bool", "'bool'"),
        ("int8", "'int8'"),
        ("jsonb", "'jsonb'"),
        ("uuid", "'uuid'"),
        ("datetime", "'datetime'"),
        ("array<foo>", "'foo'"),
        ("int; drop table x", "';'"),
        ("int)", "unbalanced"),
        ("", "not a Spark SQL type"),
    ],
)
def test_types_spark_does_not_know_are_refused(text: str, named: str) -> None:
    with pytest.raises(UnsafeExpression) as caught:
        spark_type(text)
    assert named in caught.value.reason
    assert "decimal(p,s)" in (caught.value.hint or "")


def test_struct_and_array_types_are_read_for_the_planner() -> None:
    assert struct_fields("struct<a: int, `b c`: struct<d: string>>") == [
        ("a", "int"),
        ("b c", "struct<d:string>"),
    ]
    assert struct_fields("string") is None
    assert struct_fields(None) is None
    assert array_element_type("array<struct<a:int>>") == "struct<a:int>"
    assert array_element_type("map<string,int>") is None


def test_static_types_are_known_for_references_casts_and_literals() -> None:
    types = {"Amount": "decimal(12,2)"}
    assert static_type("amount", types) == "decimal(12,2)"
    assert static_type("cast(x AS long)", types) == "bigint"
    assert static_type("try_cast(x AS date)", types) == "date"
    assert static_type("'x'", types) == "string"
    assert static_type("true", types) == "boolean"
    assert static_type("upper(x)", types) is None
