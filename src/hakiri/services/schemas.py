"""`hakiri schema export [--check]`: keep the committed JSON Schemas equal to the models."""

from __future__ import annotations

from pathlib import Path

from hakiri.spec.schema_export import drifted_schemas, export_schemas


def export(directory: Path) -> list[Path]:
    return export_schemas(directory)


def check(directory: Path) -> list[Path]:
    """Schema files that are missing or differ from the models (empty = up to date)."""
    return drifted_schemas(directory)
