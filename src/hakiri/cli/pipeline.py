"""`hakiri pipeline create|convert|edit`."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from hakiri.cli.render import ProjectDir, escape, out
from hakiri.errors import EditError
from hakiri.services import pipelines

app = typer.Typer(no_args_is_help=True)


class ManifestFormatChoice(StrEnum):
    json = "json"
    toml = "toml"


def _assignment(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise EditError(
            f"not an assignment: {text!r}", "use --set key.path=value, e.g. --set load.mode=upsert"
        )
    return key.strip(), value


SetOption = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        help='key.path=value (value read as TOML: 4, true, ["a"], {k = 1}; else a string). Repeatable.',
    ),
]


@app.command("create")
def create(
    pipeline_id: Annotated[str, typer.Argument(metavar="ID", help="New pipeline id.")],
    project: ProjectDir = Path("."),
    source: Annotated[
        str,
        typer.Option(
            help="Source connector: files, postgres, rest, github, shopify, or a registered one."
        ),
    ] = "files",
    path: Annotated[str | None, typer.Option(help="files: glob of input files.")] = None,
    file_format: Annotated[
        str | None, typer.Option("--file-format", help="files: csv, json, jsonl or parquet.")
    ] = None,
    connection: Annotated[
        str | None, typer.Option(help="postgres source: named connection.")
    ] = None,
    table: Annotated[
        list[str] | None,
        typer.Option("--table", help="Table to load (repeatable; default: the id)."),
    ] = None,
    destination: Annotated[
        str | None, typer.Option(help="'context' or a connection name (default: the project's).")
    ] = None,
    mode: Annotated[str | None, typer.Option(help="Load mode.")] = None,
    upsert_key: Annotated[
        list[str] | None, typer.Option("--upsert-key", help="Key column (repeatable).")
    ] = None,
    watermark_column: Annotated[
        str | None, typer.Option(help="incremental_watermark column.")
    ] = None,
    schedule: Annotated[str | None, typer.Option(help="Cron expression or 'every 15m'.")] = None,
    fmt: Annotated[
        ManifestFormatChoice,
        typer.Option("--format", help="json: pipelines/ID.json; toml: append to hakiri.toml."),
    ] = ManifestFormatChoice.json,
    sets: SetOption = None,
) -> None:
    """Add a pipeline (validated before anything is written)."""
    document = pipelines.new_pipeline_document(
        pipeline_id,
        source=source,
        path=path,
        file_format=file_format,
        connection=connection,
        tables=table or [],
        destination=destination,
        mode=mode,
        upsert_key=upsert_key or [],
        watermark_column=watermark_column,
        schedule=schedule,
        sets=[_assignment(s) for s in sets or []],
    )
    out.print(escape(pipelines.create(project, document, fmt.value).summary))


@app.command("convert")
def convert(
    pipeline_id: Annotated[str, typer.Argument(metavar="ID")],
    to: Annotated[ManifestFormatChoice, typer.Option("--to", help="Target format.")],
    project: ProjectDir = Path("."),
) -> None:
    """Move a pipeline between TOML (hakiri.toml) and JSON (pipelines/ID.json); the old definition is removed."""
    out.print(escape(pipelines.convert(project, pipeline_id, to.value).summary))


@app.command("edit")
def edit(
    pipeline_id: Annotated[str, typer.Argument(metavar="ID")],
    project: ProjectDir = Path("."),
    sets: SetOption = None,
    unset: Annotated[
        list[str] | None, typer.Option("--unset", help="key.path to remove. Repeatable.")
    ] = None,
) -> None:
    """Change keys of a pipeline in place; TOML comments and key order are kept."""
    if not sets and not unset:
        raise EditError("nothing to edit", "pass --set key.path=value or --unset key.path")
    change = pipelines.edit(project, pipeline_id, [_assignment(s) for s in sets or []], unset or [])
    out.print(escape(change.summary))
