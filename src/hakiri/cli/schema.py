"""`hakiri schema export [--check]`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from hakiri.cli.render import ProjectDir, err, escape
from hakiri.errors import HakiriError
from hakiri.services import schemas
from hakiri.spec.loader import display_path

app = typer.Typer(no_args_is_help=True)


@app.command("export")
def export(
    project: ProjectDir = Path("."),
    out: Annotated[
        Path | None, typer.Option(help="Directory to write to (default: <project>/schemas).")
    ] = None,
    check: Annotated[
        bool,
        typer.Option("--check", help="Write nothing; exit 1 if the files differ from the models."),
    ] = False,
) -> None:
    """Write schemas/pipeline.json and schemas/project.json from the manifest models."""
    directory = out or project / "schemas"
    if check:
        drifted = schemas.check(directory)
        if drifted:
            raise HakiriError(
                f"JSON Schema out of date: {', '.join(display_path(p) for p in drifted)}",
                "run `hakiri schema export` and commit the result",
            )
        err.print(
            f"[green]ok:[/green] schemas in {escape(display_path(directory))} match the models"
        )
        return
    for path in schemas.export(directory):
        err.print(f"wrote {escape(display_path(path))}")
