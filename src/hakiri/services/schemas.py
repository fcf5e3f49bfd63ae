"""`hakiri schema export [--check]`: keep the committed JSON Schemas equal to the models.

schemas/pipeline.json and schemas/project.json describe the manifests;
schemas/plan.json describes `hakiri plan --json`, schemas/saved-plan.json the file
`hakiri plan -o FILE` writes. The CLI adds schemas/openapi.json (serve's
HTTP API) through `extra`: services may not import the server layer.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from hakiri.planner.model import PlanDocument
from hakiri.planner.saved import SavedPlan
from hakiri.spec.schema_export import DIALECT, render, render_schemas


def rendered(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """File name -> the exact text that belongs in schemas/; `extra` adds files."""
    plan = {
        "$schema": DIALECT,
        "$id": "https://hakiri.dev/schemas/v1/plan.json",
        **PlanDocument.model_json_schema(),
    }
    saved = {
        "$schema": DIALECT,
        "$id": "https://hakiri.dev/schemas/v1/saved-plan.json",
        **SavedPlan.model_json_schema(),
    }
    return {
        **render_schemas(),
        "plan.json": render(plan),
        "saved-plan.json": render(saved),
        **(extra or {}),
    }


def export(directory: Path, extra: Mapping[str, str] | None = None) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in rendered(extra).items():
        (directory / name).write_text(text, encoding="utf-8")
        written.append(directory / name)
    return written


def check(directory: Path, extra: Mapping[str, str] | None = None) -> list[Path]:
    """Schema files that are missing or differ from the models (empty = up to date)."""
    return [
        directory / name
        for name, text in rendered(extra).items()
        if not (directory / name).is_file()
        or (directory / name).read_text(encoding="utf-8") != text
    ]
