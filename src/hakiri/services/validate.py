"""`hakiri validate`: load every manifest and report what is wrong, or what is there."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hakiri.engine.run_context import RunContext
from hakiri.errors import Diagnostic, ManifestError
from hakiri.spec.connections import destination_kind
from hakiri.spec.loader import Project, display_path, load_project


def validate_project(root: Path, env: Mapping[str, str] = os.environ) -> Project:
    """Load and validate the project; raises ManifestError listing every problem, including
    what the project's engine (`[spark] engine`, HAKIRI_SPARK_ENGINE) cannot run."""
    project = load_project(root, every_variable=True)
    run = RunContext.of(project, env)
    problems = [
        Diagnostic(reason, origin.file, origin.line, f"pipeline {pid}", hint)
        for pid, spec in sorted(project.pipelines.items())
        for origin in [project.origins[pid]]
        for reason, hint in run.refusals(spec, [destination_kind(project.settings, spec)])
    ]
    if problems:
        raise ManifestError([*problems, *project.warnings])
    return project


def _destination(project: Project, spec: Any) -> str:
    return (
        spec.destination.connector
        if spec.destination
        else project.settings.context.default_destination
    )


def describe_pipelines(project: Project) -> list[dict[str, Any]]:
    """A stable, JSON-ready summary of each pipeline (the `pipelines` of `validate --json`)."""
    rows = []
    for pid, spec in sorted(project.pipelines.items()):
        origin = project.origins[pid]
        destination = _destination(project, spec)
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


def describe_views(project: Project) -> list[dict[str, Any]]:
    """Each view, in the order a reader defines them (`views` of `validate --json`)."""
    from hakiri.spec.view_checks import view_reads

    return [
        {
            "name": name,
            "file": display_path(project.view_origins[name].file),
            "line": project.view_origins[name].line,
            "reads": list(view_reads(view)),
            "description": view.description,
        }
        for name, view in project.views.items()
    ]
