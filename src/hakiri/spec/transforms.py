"""Declarative transform steps. Expressions are Spark SQL expression strings, checked
against an allowlist before any run (see `hakiri.spark.transforms`)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from hakiri.spec.base import Name, SpecModel

NonEmptyNames = Annotated[list[Name], Field(min_length=1)]


class SelectStep(SpecModel):
    op: Literal["select"]
    columns: NonEmptyNames


class RenameStep(SpecModel):
    op: Literal["rename"]
    columns: dict[Name, Name] = Field(min_length=1, description="old name -> new name")


class CastStep(SpecModel):
    op: Literal["cast"]
    columns: dict[Name, str] = Field(
        min_length=1, description="column -> Spark SQL type, e.g. 'bigint', 'decimal(12,2)'"
    )


class FilterStep(SpecModel):
    op: Literal["filter"]
    expr: str = Field(
        min_length=1, description="Spark SQL boolean expression; rows where it is true are kept."
    )


class WithColumnsStep(SpecModel):
    op: Literal["with_columns"]
    columns: dict[Name, str] = Field(
        min_length=1, description="new or replaced column -> Spark SQL expression"
    )


class DropStep(SpecModel):
    op: Literal["drop"]
    columns: NonEmptyNames


class DedupeStep(SpecModel):
    op: Literal["dedupe"]
    keys: NonEmptyNames
    order_by: list[str] = Field(
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
