"""Declarative transform steps. Expressions are Spark SQL expression strings.

Every expression is checked by the transform sandbox (`hakiri.guards.expressions`)
when the manifest is loaded, so `hakiri validate` names a refused function with
its file and line; `hakiri.spark.transforms` checks again before it compiles.
Cast types must be types Spark knows.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

from hakiri.errors import HakiriError
from hakiri.spec.base import Name, SpecModel

NonEmptyNames = Annotated[list[Name], Field(min_length=1)]


def _refused(exc: HakiriError) -> PydanticCustomError:
    # `hint` rides along in the context for the diagnostics to show.
    return PydanticCustomError(
        "unsafe_expression", "{reason}", {"reason": exc.reason, "hint": exc.hint}
    )


# sqlglot is imported only when a manifest has transforms.
def _expression(text: str) -> str:
    from hakiri.guards.expressions import UnsafeExpression, check_expression

    try:
        check_expression(text)
    except UnsafeExpression as exc:
        raise _refused(exc) from None
    return text


def _condition(text: str) -> str:
    from hakiri.guards.expressions import UnsafeExpression, check_expression

    try:
        check_expression(text, boolean=True)
    except UnsafeExpression as exc:
        raise _refused(exc) from None
    return text


def _sort_key(text: str) -> str:
    from hakiri.guards.expressions import UnsafeExpression, parse_sort_key

    try:
        parse_sort_key(text)
    except UnsafeExpression as exc:
        raise _refused(exc) from None
    return text


def _type(text: str) -> str:
    from hakiri.guards.expressions import UnsafeExpression
    from hakiri.guards.spark_types import spark_type

    try:
        spark_type(text)
    except UnsafeExpression as exc:
        raise _refused(exc) from None
    return text


Expression = Annotated[str, Field(min_length=1), AfterValidator(_expression)]
Condition = Annotated[str, Field(min_length=1), AfterValidator(_condition)]
SortKeyText = Annotated[str, Field(min_length=1), AfterValidator(_sort_key)]
SparkType = Annotated[str, Field(min_length=1), AfterValidator(_type)]


class SelectStep(SpecModel):
    op: Literal["select"]
    columns: NonEmptyNames


class RenameStep(SpecModel):
    op: Literal["rename"]
    columns: dict[Name, Name] = Field(min_length=1, description="old name -> new name")


class CastStep(SpecModel):
    op: Literal["cast"]
    columns: dict[Name, SparkType] = Field(
        min_length=1, description="column -> Spark SQL type, e.g. 'bigint', 'decimal(12,2)'"
    )


class FilterStep(SpecModel):
    op: Literal["filter"]
    expr: Condition = Field(
        description="Spark SQL boolean expression; rows where it is true are kept. Checked by "
        "the transform sandbox (docs/transforms.md)."
    )


class WithColumnsStep(SpecModel):
    op: Literal["with_columns"]
    columns: dict[Name, Expression] = Field(
        min_length=1,
        description="new or replaced column -> Spark SQL expression, checked by the transform "
        "sandbox (docs/transforms.md)",
    )


class DropStep(SpecModel):
    op: Literal["drop"]
    columns: NonEmptyNames


class DedupeStep(SpecModel):
    op: Literal["dedupe"]
    keys: NonEmptyNames
    order_by: list[SortKeyText] = Field(
        default_factory=list,
        description="Which duplicate wins: the first row in this order, e.g. ['updated_at desc'].",
    )


class FlattenStep(SpecModel):
    op: Literal["flatten"]
    column: Name = Field(description="Struct column whose fields become top-level columns.")
    separator: str = "_"


class ExplodeStep(SpecModel):
    op: Literal["explode"]
    column: Name = Field(description="Array column; one output row per element.")
    alias: Name | None = None
    keep_empty: bool = Field(
        False, description="Keep rows whose array is empty or null (explode_outer)."
    )


TransformStep = Annotated[
    SelectStep
    | RenameStep
    | CastStep
    | FilterStep
    | WithColumnsStep
    | DropStep
    | DedupeStep
    | FlattenStep
    | ExplodeStep,
    Field(discriminator="op"),
]
