"""A run's data-quality tally, and the names replay and `hakiri errors` resolve."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hakiri.catalog.store import Catalog
from hakiri.destinations.base import LoadResult, QuarantineTable
from hakiri.errors import HakiriError, ValidationFailed
from hakiri.quality.rules import RuleReport
from hakiri.quality.verdicts import ProbeResult
from hakiri.spec.base import split_qualified
from hakiri.spec.connections import Target
from hakiri.spec.pipeline import PipelineSpec, TableSpec


@dataclass
class RunQuality:
    """A run's data-quality tally across its batches (stored on the run record)."""

    rules: dict[str, int] = field(default_factory=dict)  # rule id -> violating rows
    quarantined: int = 0
    validators: list[dict[str, Any]] = field(default_factory=list)
    alerts: list[str] = field(default_factory=list)  # validator warnings, anomalies
    replay_of: str | None = None  # `hakiri replay`: the run whose quarantined rows were reloaded

    def add(self, report: RuleReport | None, result: LoadResult) -> None:
        if report is not None and not result.already_committed:
            for rule_id, count in report.counts.items():
                self.rules[rule_id] = self.rules.get(rule_id, 0) + count
        self.quarantined += result.quarantined
        for probe in result.validations:
            self.validators.append(probe.as_dict())
            if not probe.ok:
                self.alerts.append(f"validator {probe.message}")

    @property
    def warnings(self) -> list[str]:
        broken = [f"rule {rule}: {n} rows broke it" for rule, n in self.rules.items() if n]
        return broken + self.alerts

    def as_dict(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "rules": self.rules,
            "quarantined": self.quarantined,
            "validators": self.validators,
            "warnings": self.warnings,
        }
        if self.replay_of:
            document["replay_of"] = self.replay_of
        return document


def audit_run(
    catalog: Catalog,
    spec: PipelineSpec,
    run_id: str,
    quality: RunQuality,
    audit: Callable[[], list[ProbeResult]],
) -> None:
    """`source_diff` validators, once a run's loads committed (`audit` compares). A failure
    alerts; an `abort` one also fails the run, whose rows stay published."""
    if not spec.validate_.source_diffs:
        return
    for probe in audit():
        quality.validators.append(probe.as_dict())
        if probe.ok:
            continue
        catalog.add_alert("warning", "validator", probe.message, pipeline_id=spec.id, run_id=run_id)
        if probe.on_fail == "abort":
            raise ValidationFailed(
                f"validator {probe.message}", f"`hakiri diff {spec.id}` lists the rows that differ"
            )
        quality.alerts.append(f"validator {probe.message}")


def quarantine_table(
    spec: PipelineSpec, table: TableSpec, target: Target
) -> QuarantineTable | None:
    """The quarantine table of one table entry: `[pipeline.quarantine] table`, else `<target>_quarantine`."""
    if not spec.quarantine.enabled:
        return None
    if spec.quarantine.table:
        schema, name = split_qualified(spec.quarantine.table)
        return QuarantineTable(schema or target.schema, name, table.name)
    return QuarantineTable(target.schema, f"{target.table}_quarantine", table.name)


def resolve_run_id(catalog: Catalog, pipeline_id: str, text: str) -> str:
    """A run id, or a unique prefix of one (as `hakiri runs` and `hakiri errors` print them)."""
    matches = [
        r.run_id for r in catalog.runs(pipeline_id, limit=10_000) if r.run_id.startswith(text)
    ]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise HakiriError(
            f"pipeline `{pipeline_id}` has no run `{text}`",
            f"`hakiri runs {pipeline_id}` lists its runs; `hakiri errors {pipeline_id}` shows which "
            "runs quarantined rows",
        )
    raise HakiriError(
        f"`{text}` is the start of {len(matches)} runs of pipeline `{pipeline_id}`",
        "give more characters of the run id",
    )
