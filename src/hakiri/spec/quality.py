"""Data-quality declarations: row rules, dataset validators and the quarantine table."""

from __future__ import annotations

from typing import Annotated, Literal, Self

from pydantic import Field, model_validator
from pydantic_core import PydanticCustomError

from hakiri.spec.base import Name, SpecModel

RuleOnFail = Literal["abort", "warn", "skip"]
ValidatorOnFail = Literal["abort", "warn"]
FieldTypeName = Literal[
    "string", "integer", "float", "boolean", "date", "timestamp", "json", "uuid"
]


class _RowRule(SpecModel):
    id: str | None = Field(
        None, description="Rule id recorded with quarantined rows; defaults to '<type>:<column>'."
    )
    column: Name = Field(description="Column the rule checks.")
    on_fail: RuleOnFail = Field(
        "abort", description="abort the run, warn and keep the row, or skip (drop) it."
    )

    @property
    def rule_id(self) -> str:
        return self.id or f"{self.type}:{self.column}"  # type: ignore[attr-defined]


class NotNullRule(_RowRule):
    type: Literal["not_null"]


class RegexRule(_RowRule):
    type: Literal["regex"]
    pattern: str = Field(
        description="Java regular expression the value must match (searched, not anchored)."
    )


class RangeRule(_RowRule):
    type: Literal["range"]
    min: float | None = None
    max: float | None = None

    @model_validator(mode="after")
    def _has_a_bound(self) -> Self:
        if self.min is None and self.max is None:
            raise ValueError("a range rule needs `min`, `max` or both")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"range rule has min {self.min} greater than max {self.max}")
        return self


class MaxLengthRule(_RowRule):
    type: Literal["max_length"]
    max: int = Field(ge=0)


class FieldTypeRule(_RowRule):
    type: Literal["field_type"]
    expected: FieldTypeName


RowRule = Annotated[
    NotNullRule | RegexRule | RangeRule | MaxLengthRule | FieldTypeRule,
    Field(discriminator="type"),
]


class _Validator(SpecModel):
    on_fail: ValidatorOnFail = Field(
        "abort", description="abort rolls the load back; warn records a warning."
    )


class RowCountValidator(_Validator):
    type: Literal["row_count"]
    min: int | None = Field(None, ge=0)
    max: int | None = Field(None, ge=0)

    @model_validator(mode="after")
    def _has_a_bound(self) -> Self:
        if self.min is None and self.max is None:
            raise ValueError("a row_count validator needs `min`, `max` or both")
        return self


class FreshnessValidator(_Validator):
    type: Literal["freshness"]
    column: Name
    within_hours: float = Field(gt=0)


class FkIntegrityValidator(_Validator):
    type: Literal["fk_integrity"]
    column: Name
    ref_table: Name = Field(
        description="Referenced table, optionally schema-qualified ('schema.table')."
    )
    ref_column: Name


class CardinalityValidator(_Validator):
    type: Literal["cardinality"]
    column: Name
    min_distinct: int = Field(ge=1)


class DuplicateKeyValidator(_Validator):
    type: Literal["duplicate_key"]
    columns: Annotated[list[Name], Field(min_length=1)]


class SourceDiffValidator(_Validator):
    """After the run's loads: the target compared with its source by key, as `hakiri diff`
    compares them; fails when more rows differ than the tolerance allows."""

    type: Literal["source_diff"]
    max_differences: int = Field(
        0, ge=0, description="Rows that may differ (only in source + only in target + changed)."
    )
    max_fraction: float | None = Field(
        None,
        ge=0,
        le=1,
        description="Or this fraction of the source's rows, when that allows more.",
    )

    def allowed(self, source_rows: int) -> int:
        """The differences tolerated for a source of `source_rows` rows."""
        by_fraction = int(self.max_fraction * source_rows) if self.max_fraction else 0
        return max(self.max_differences, by_fraction)


DatasetValidator = Annotated[
    RowCountValidator
    | FreshnessValidator
    | FkIntegrityValidator
    | CardinalityValidator
    | DuplicateKeyValidator
    | SourceDiffValidator,
    Field(discriminator="type"),
]


class ValidateSpec(SpecModel):
    """`[pipeline.validate]`: row rules (per row, in Spark) and dataset validators (SQL probes).

    Dataset validators run against the staged rows inside the load transaction, so an
    `abort` failure publishes nothing (write-audit-publish). `source_diff` is the exception:
    it compares the whole target with the whole source, so it runs once the run's loads
    have committed; an `abort` failure fails the run (no post hooks, an alert).
    """

    rules: list[RowRule] = Field(default_factory=list)
    dataset: list[DatasetValidator] = Field(default_factory=list)

    @property
    def staged(self) -> list[DatasetValidator]:
        """The validators probed on each batch's staged rows, before it publishes."""
        return [v for v in self.dataset if not isinstance(v, SourceDiffValidator)]

    @property
    def source_diffs(self) -> list[SourceDiffValidator]:
        """The validators run after the run's loads (`source_diff`)."""
        return [v for v in self.dataset if isinstance(v, SourceDiffValidator)]

    @model_validator(mode="after")
    def _rule_ids_are_unique(self) -> Self:
        seen: set[str] = set()
        for rule in self.rules:
            if rule.rule_id in seen:
                raise PydanticCustomError(
                    "duplicate_rule_id",
                    "two row rules have the id {rule_id}: their counts and quarantined rows "
                    "could not be told apart",
                    {"rule_id": repr(rule.rule_id), "hint": "give one of them an `id`"},
                )
            seen.add(rule.rule_id)
        return self


class QuarantineSpec(SpecModel):
    """Where rows that fail a skip/warn rule are kept (the dead-letter queue)."""

    enabled: bool = False
    table: Name | None = Field(
        None,
        description="Quarantine table (optionally 'schema.table'); defaults to '<target>_quarantine'.",
    )
