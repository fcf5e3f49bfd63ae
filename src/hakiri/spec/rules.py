"""Cross-field rules on load modes.

Two kinds: `lint_pipeline` needs only the manifest and runs at parse time (its
findings are warnings; the hard errors are enforced by the models themselves),
and `check_load_against_columns` needs the live target's columns, so `plan`
calls it once it has inspected the target.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hakiri.spec.load import LoadMode, LoadSpec
from hakiri.spec.pipeline import PipelineSpec


@dataclass(frozen=True)
class Finding:
    path: tuple[str | int, ...]
    message: str
    hint: str | None = None


def lint_pipeline(spec: PipelineSpec) -> list[Finding]:
    """Warnings about a pipeline that is valid but probably not what its author wants."""
    findings = []
    if spec.load.mode is LoadMode.TRUNCATE and len(spec.tables) == 1:
        findings.append(
            Finding(
                ("load", "mode"),
                "truncate on a one-source, one-table pipeline leaves readers an empty table while it reloads",
                'blue_green replaces the table atomically: set load.mode = "blue_green" (keep truncate if that is intended)',
            )
        )
    return findings


def check_load_against_columns(load: LoadSpec, target_columns: Sequence[str]) -> list[Finding]:
    """Load-mode rules that need the target's column list (from the live target, or the staged schema)."""
    columns = set(target_columns)
    shown = ", ".join(target_columns)
    findings = []
    if load.mode is LoadMode.UPSERT and load.upsert_key:
        missing = [k for k in load.upsert_key if k not in columns]
        if missing:
            findings.append(
                Finding(
                    ("load", "upsert_key"),
                    f"upsert key column(s) {', '.join(missing)} not in the target",
                    f"target columns: {shown}",
                )
            )
        elif columns and columns <= set(load.upsert_key):
            findings.append(
                Finding(
                    ("load", "upsert_key"),
                    "upsert key covers every target column, so there is nothing to update",
                    "use append (or add non-key columns)",
                )
            )
    if (
        load.mode is LoadMode.INCREMENTAL_WATERMARK
        and load.watermark_column
        and load.watermark_column not in columns
    ):
        findings.append(
            Finding(
                ("load", "watermark_column"),
                f"watermark column {load.watermark_column} not in the target",
                f"target columns: {shown}",
            )
        )
    return findings
