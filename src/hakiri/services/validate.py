"""`hakiri validate`: load every manifest and report what is wrong, or what is there."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hakiri.spec.loader import Project, display_path, load_project


def validate_project(root: Path) -> Project:
    """Load and validate the project; raises ManifestError listing every problem."""
    return load_project(root)


def describe_pipelines(project: Project) -> list[dict[str, Any]]:
    """A stable, JSON-ready summary of each pipeline (the `pipelines` of `validate --json`)."""
    rows = []
    for pid, spec in sorted(project.pipelines.items()):
        origin = project.origins[pid]
        destination = (
            spec.destination.connector
            if spec.destination
            else project.settings.context.default_destination
        )
        rows.append(
            {
                "id": pid,
                "file": display_path(origin.file),
                "line": origin.line,
                "format": origin.format.value,
                "source": spec.source.connector,
                "destination": destination,
                "mode": spec.load.mode.value,
                "tables": [t.name for t in spec.table_specs()],
                "schedule": spec.schedule,
                "enabled": spec.enabled,
            }
        )
    return rows
