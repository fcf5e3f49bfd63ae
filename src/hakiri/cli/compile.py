"""`hakiri compile`: transforms/<id>.py (PySpark DataFrame code) -> pipelines/<id>.transforms.json."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from hakiri.cli.render import JsonFlag, ProjectDir, emit_json, err, escape, out


def compile_(
    files: Annotated[
        list[Path] | None,
        typer.Argument(
            help="Modules to compile (transforms/<pipeline id>.py); default: every "
            "transforms/*.py named after a pipeline.",
            show_default=False,
        ),
    ] = None,
    check: Annotated[
        bool,
        typer.Option(
            "--check",
            help="Write nothing; exit 1 when a compiled file is missing or older than its "
            "module (for CI).",
        ),
    ] = False,
    project: ProjectDir = Path("."),
    as_json: JsonFlag = False,
) -> None:
    """Compile transforms written with PySpark's DataFrame API into declarative steps."""
    from hakiri.services import compile as compile_service

    given = list(files or [])
    if check:
        outcomes = compile_service.check_compiled(project, given)
    else:
        outcomes = compile_service.compile_transforms(project, given)
    behind = [o for o in outcomes if o.status in ("stale", "missing")]
    if as_json:
        emit_json({"check": check, "ok": not behind, "modules": [o.as_dict() for o in outcomes]})
    else:
        if not outcomes:
            err.print("no transforms/<pipeline id>.py module to compile")
        for o in outcomes:
            line = f"{o.status:<9} {o.module} -> {o.compiled}"
            if o.steps is not None and o.status != "missing":
                line += f" ({o.steps} step{'s' if o.steps != 1 else ''})"
            out.print(escape(line))
    if behind:
        if not as_json:
            for o in behind:
                why = (
                    "was never compiled"
                    if o.status == "missing"
                    else "changed since it was compiled"
                )
                err.print(f"[red]error:[/red] {escape(o.module)} {why} ({escape(o.compiled)})")
            err.print("  [dim]hint:[/dim] run `hakiri compile` and commit the compiled files")
        raise typer.Exit(1)


__all__ = ["compile_"]
