"""`hakiri schema export [--check]`: keep the committed JSON Schemas equal to the models.

schemas/pipeline.json and schemas/project.json describe the manifests;
schemas/plan.json describes `hakiri plan --json`.
"""

from __future__ import annotations

from pathlib import Path

from hakiri.planner.model import PlanDocument
from hakiri.spec.schema_export import DIALECT, render, render_schemas


def rendered() -> dict[str, str]:
    """File name -> the exact text that belongs in schemas/."""
    plan = {
        "$schema": DIALECT,
        "$id": "https://hakiri.dev/schemas/v1/plan.json",
        **PlanDocument.model_json_schema(),
    }
    return {**render_schemas(), "plan.json": render(plan)}


def export(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in rendered().items():
        (directory / name).write_text(text, encoding="utf-8")
        written.append(directory / name)
    return written


def check(directory: Path) -> list[Path]:
    """Schema files that are missing or differ from the models (empty = up to date)."""
    return [
        directory / name
        for name, text in rendered().items()
        if not (directory / name).is_file()
        or (directory / name).read_text(encoding="utf-8") != text
    ]
