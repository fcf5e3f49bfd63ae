"""`hakiri schema export [--check]`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from hakiri.cli.render import JsonFlag, ProjectDir, emit_json, err, escape, out
from hakiri.errors import HakiriError
from hakiri.services import schemas
from hakiri.spec.loader import display_path

app = typer.Typer(no_args_is_help=True)
PipelineArg = Annotated[str, typer.Argument(metavar="ID", help="The pipeline.")]


@app.command("export")
def export(
    project: ProjectDir = Path("."),
    out_dir: Annotated[
        Path | None,
        typer.Option("--out", help="Directory to write to (default: <project>/schemas)."),
    ] = None,
    check: Annotated[
        bool,
        typer.Option("--check", help="Write nothing; exit 1 if the files differ from the models."),
    ] = False,
) -> None:
    """Write schemas/*.json (manifests, plan, serve's OpenAPI) from the models."""
    directory = out_dir or project / "schemas"
    extra = server_schemas()
    if check:
        drifted = schemas.check(directory, extra)
        if drifted:
            raise HakiriError(
                f"JSON Schema out of date: {', '.join(display_path(p) for p in drifted)}",
                "run `hakiri schema export` and commit the result",
            )
        out.print(
            f"[green]ok:[/green] schemas in {escape(display_path(directory))} match the models"
        )
        return
    for path in schemas.export(directory, extra):
        out.print(f"wrote {escape(display_path(path))}")


def server_schemas() -> dict[str, str]:
    """schemas/openapi.json: the document of serve's HTTP API (imported here, not at start-up:
    FastAPI is not needed for `--help`)."""
    from hakiri.server.api import openapi_document
    from hakiri.spec.schema_export import render

    return {"openapi.json": render(openapi_document())}


@app.command("log")
def log(
    pipeline_id: PipelineArg,
    project: ProjectDir = Path("."),
    as_json: JsonFlag = False,
) -> None:
    """List the pipeline's schema-evolution events, oldest first."""
    from hakiri.services.schema_log import schema_log

    events = schema_log(project, pipeline_id)
    if as_json:
        emit_json(events)
        return
    if not events:
        err.print(f"no schema events for {escape(pipeline_id)}")
        return
    for e in events:
        when = (e["created_at"] or "")[:19].replace("T", " ")
        out.print(
            f"{escape(when)}  {escape(e['table'])}  {escape(e['kind'])}  {escape(_detail(e))}"
        )


def _detail(event: dict) -> str:  # type: ignore[type-arg]
    d = event["detail"]
    if event["kind"] in ("blocked", "accept"):
        text = "; ".join(d.get("describe") or [])
        return f"{text} (reason: {d['reason']})" if d.get("reason") else text
    if event["kind"] == "rename":
        return f"{d['from']} -> {d['to']}"
    if event["kind"] in ("widen", "retype"):
        return f"{d['column']}: {d['from']} -> {d['to']}"
    return f"{d.get('column')}" + (f" {d['type']}" if d.get("type") else "")


@app.command("accept")
def accept(
    pipeline_id: PipelineArg,
    table: Annotated[str | None, typer.Option(help="Only this table of the pipeline.")] = None,
    reason: Annotated[
        str | None, typer.Option(help="Why the change is accepted (kept in the log).")
    ] = None,
    project: ProjectDir = Path("."),
    as_json: JsonFlag = False,
) -> None:
    """Accept the schema change the last refused run named; the next apply applies it."""
    from hakiri.services.schema_log import accept as accept_changes

    accepted = accept_changes(project, pipeline_id, table=table, reason=reason)
    if as_json:
        emit_json(accepted)
        return
    for e in accepted:
        out.print(
            f"accepted for {escape(e['table'])}: {escape('; '.join(e['detail']['describe']))}; "
            f"`hakiri apply {escape(pipeline_id)}` applies it"
        )
