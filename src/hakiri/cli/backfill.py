"""`hakiri backfill rewind|history`: load a window of a table source again, and why it was."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from hakiri.cli.render import JsonFlag, ProjectDir, emit_json, err, escape, out

app = typer.Typer(no_args_is_help=True)

PipelineArg = Annotated[str, typer.Argument(metavar="ID", help="The pipeline.")]


@app.command("rewind")
def rewind(
    pipeline_id: PipelineArg,
    start: Annotated[
        str,
        typer.Option(
            "--from",
            help="The window's first cursor value (an ISO date/time, or an id).",
            show_default=False,
        ),
    ],
    end: Annotated[
        str,
        typer.Option(
            "--to", help="The window's last cursor value (inclusive).", show_default=False
        ),
    ],
    reason: Annotated[
        str,
        typer.Option(
            "--reason",
            help="Why the window is loaded again; kept in `hakiri backfill history`.",
            show_default=False,
        ),
    ],
    table: Annotated[
        str | None,
        typer.Option("--table", help="The table to rewind, when the pipeline reads several."),
    ] = None,
    project: ProjectDir = Path("."),
    as_json: JsonFlag = False,
) -> None:
    """Queue the loaded chunks overlapping a cursor window to be loaded again by the next apply."""
    from hakiri.services.backfill import rewind as rewind_window

    found = rewind_window(project, pipeline_id, start, end, reason, table=table)
    if as_json:
        emit_json(found)
        return
    where = escape(f"{found['pipeline_id']}.{found['table']}")
    window = f"between {escape(str(found['from']))} and {escape(str(found['to']))}"
    apply = escape(f"`hakiri apply {found['pipeline_id']}`")
    pending = found["already_pending"]
    if found["chunks"]:
        out.print(
            f"rewound {len(found['chunks'])} chunk(s) of {where} {window} "
            f"(generation {found['generation']}): {apply} reloads them"
        )
        for chunk in found["chunks"]:
            out.print(f"  {escape(chunk['predicate'])}")
        if pending:
            out.print(f"{pending} more chunk(s) in the window are pending already")
    else:
        out.print(
            f"nothing to rewind: the {pending} chunk(s) of {where} {window} are pending already; "
            f"{apply} loads them"
        )


@app.command("history")
def history(
    pipeline_id: PipelineArg,
    project: ProjectDir = Path("."),
    as_json: JsonFlag = False,
) -> None:
    """List the pipeline's rewinds, oldest first: window, reason, chunks and generation."""
    from hakiri.services.backfill import history as rewind_history

    found = rewind_history(project, pipeline_id)
    if as_json:
        emit_json(found)
        return
    if not found:
        err.print(f"no rewinds of {escape(pipeline_id)}")
        return
    for r in found:
        when = (r["created_at"] or "")[:19].replace("T", " ")
        out.print(
            f"{escape(when)}  {escape(r['table'])} {escape(r['from'])} .. {escape(r['to'])}  "
            f"{r['chunks']} chunk(s), generation {r['generation']}: {escape(r['reason'])}"
        )
