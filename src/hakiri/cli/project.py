"""`hakiri init` and `hakiri validate`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from hakiri.cli.render import JsonFlag, ProjectDir, diagnostic, emit_json, err, escape, out
from hakiri.cli.schema import server_schemas
from hakiri.errors import ManifestError
from hakiri.services import init as init_service
from hakiri.services import validate as validate_service
from hakiri.spec.loader import display_path


def init(
    directory: Annotated[
        Path, typer.Argument(help="Where to create the project.", file_okay=False)
    ] = Path("."),
    name: Annotated[
        str | None, typer.Option(help="Project name (default: the directory's name).")
    ] = None,
) -> None:
    """Scaffold a working project: hakiri.toml, a sample pipeline and data, .gitignore."""
    written = init_service.init_project(directory, name, server_schemas())
    for path in written:
        out.print(f"created {escape(display_path(path))}")
    err.print(f"next: cd {escape(display_path(directory))} && hakiri validate")


def validate(project: ProjectDir = Path("."), as_json: JsonFlag = False) -> None:
    """Check every manifest: syntax, schema, types and cross-field rules."""
    try:
        loaded = validate_service.validate_project(project)
    except ManifestError as exc:
        if as_json:
            emit_json(
                {
                    "valid": False,
                    "pipelines": [],
                    "views": [],
                    "diagnostics": [d.to_json() for d in exc.diagnostics],
                }
            )
            raise typer.Exit(1) from None
        raise
    pipelines = validate_service.describe_pipelines(loaded)
    views = validate_service.describe_views(loaded)
    if as_json:
        emit_json(
            {
                "valid": True,
                "pipelines": pipelines,
                "views": views,
                "diagnostics": [d.to_json() for d in loaded.warnings],
            }
        )
        return
    for warning in loaded.warnings:
        diagnostic(warning)
    for row in pipelines:
        out.print(
            f"  {row['id']:<24} {row['source']} -> {row['destination']} ({row['mode']})  {row['file']}:{row['line']}"
        )
    for view in views:
        reads = ", ".join(view["reads"])
        out.print(f"  {view['name']:<24} view over {reads}  {view['file']}:{view['line']}")
    noun = "pipeline" if len(pipelines) == 1 else "pipelines"
    more = f" and {len(views)} view{'' if len(views) == 1 else 's'}" if views else ""
    out.print(
        f"[green]ok:[/green] {len(pipelines)} {noun}{more} valid in {escape(display_path(loaded.root / 'hakiri.toml'))}"
    )
