"""Cross-field rules on load modes (each mode's own are in its strategy, `spec.modes`).

Two kinds: `lint_pipeline` needs only the manifest and runs at parse time (its
findings are warnings; the hard errors are enforced by the models themselves),
and `check_load_against_columns` needs the live target's columns, so `plan`
calls it once it has inspected the target.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hakiri.spec.load import LoadSpec
from hakiri.spec.pipeline import PipelineSpec


@dataclass(frozen=True)
class Finding:
    path: tuple[str | int, ...]
    message: str
    hint: str | None = None


def lint_pipeline(spec: PipelineSpec) -> list[Finding]:
    """Warnings about a pipeline that is valid but probably not what its author wants."""
    return [Finding(f.path, f.message, f.hint) for f in spec.load.strategy.findings(spec)]


def check_load_against_columns(load: LoadSpec, target_columns: Sequence[str]) -> list[Finding]:
    """Load-mode rules that need the target's column list (from the live target, or the staged schema)."""
    found = load.strategy.column_findings(load, list(target_columns))
    return [Finding(f.path, f.message, f.hint) for f in found]
