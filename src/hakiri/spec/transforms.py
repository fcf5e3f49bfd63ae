"""Declarative transform steps. Expressions are Spark SQL expression strings.

Every expression is checked by the transform sandbox (`hakiri.guards.expressions`)
when the manifest is loaded, so `hakiri validate` names a refused function with
its file and line; `hakiri.spark.transforms` checks again before it compiles.
Cast types must be types Spark knows.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, model_validator
from pydantic_core import PydanticCustomError

from hakiri.errors import HakiriError, UnsafeExpression
from hakiri.spec.base import Name, SpecModel

NonEmptyNames = Annotated[list[Name], Field(min_length=1)]


def _refused(exc: HakiriError) -> PydanticCustomError:
    # `hint` rides along in the context for the diagnostics to show.
    return PydanticCustomError(
        "unsafe_expression", "{reason}", {"reason": exc.reason, "hint": exc.hint}
    )


def _guard(module: str, check: str, **options: Any) -> Callable[[str], str]:
    """A validator running `hakiri.guards.<module>.<check>(text, **options)`; the guard (and
    sqlglot with it) is imported only when a manifest has transforms."""

    def validate(text: str) -> str:
        guard = getattr(importlib.import_module(f"hakiri.guards.{module}"), check)
        try:
            guard(text, **options)
        except UnsafeExpression as exc:
            raise _refused(exc) from None
        return text

    return validate


Expression = Annotated[
    str, Field(min_length=1), AfterValidator(_guard("expressions", "check_expression"))
]
Condition = Annotated[
    str,
    Field(min_length=1),
    AfterValidator(_guard("expressions", "check_expression", boolean=True)),
]
SortKeyText = Annotated[
    str, Field(min_length=1), AfterValidator(_guard("expressions", "parse_sort_key"))
]
SparkType = Annotated[str, Field(min_length=1), AfterValidator(_guard("spark_types", "spark_type"))]


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


class JoinStep(SpecModel):
    """The batch joined with a table of the project's context store, matched on columns both
    have (a USING join: each `on` column once, first). Compiled transforms make it from
    `df.join(context_table(name), on, how)`; it reads nothing but that one table."""

    op: Literal["join"]
    table: Name = Field(description="A table of the project's context store (`[context] path`).")
    on: NonEmptyNames = Field(
        description="Columns of both the batch and the table, matched by equality; each is one "
        "column of the result, placed first."
    )
    how: Literal["inner", "left", "left_semi", "left_anti"] = Field(
        "left",
        description="inner: matched rows only; left: every batch row, the table's columns NULL "
        "where nothing matches; left_semi / left_anti: the batch rows that match / do not "
        "match, with the batch's columns only.",
    )
    columns: list[Name] | None = Field(
        None,
        description="The table's columns to take, `on` among them (default: all of them).",
    )

    @model_validator(mode="after")
    def _on_among_columns(self) -> JoinStep:
        if self.columns is not None:
            missing = [c for c in self.on if c not in self.columns]
            if missing:
                raise PydanticCustomError(
                    "join_columns",
                    "the join's `on` columns must be among its `columns` (missing: {missing})",
                    {"missing": ", ".join(missing)},
                )
        return self


TransformStep = Annotated[
    SelectStep
    | RenameStep
    | CastStep
    | FilterStep
    | WithColumnsStep
    | DropStep
    | DedupeStep
    | FlattenStep
    | ExplodeStep
    | JoinStep,
    Field(discriminator="op"),
]
