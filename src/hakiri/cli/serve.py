"""`hakiri serve`: the long-running reconciler with its HTTP API."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from hakiri.cli.render import ProjectDir


def serve(
    project: ProjectDir = Path("."),
    host: Annotated[
        str | None,
        typer.Option("--host", help="Address the API binds to (default: [serve] host, 127.0.0.1)."),
    ] = None,
    port: Annotated[
        int | None,
        typer.Option(
            "--port", min=0, max=65535, help="API port (default: [serve] port; 0: any free port)."
        ),
    ] = None,
) -> None:
    """Keep the pipelines converged: fire schedules, answer triggers, serve status over HTTP.

    Runs until SIGTERM or Ctrl-C, then drains: no new runs, chunks in flight finish.
    """
    from hakiri.server.process import ServeOptions
    from hakiri.server.process import serve as run_server

    raise typer.Exit(run_server(project, ServeOptions(host=host, port=port), os.environ))
