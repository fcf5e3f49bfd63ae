"""`hakiri runs` and `hakiri status`: read the catalog; never migrate it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from hakiri.cli.render import JsonFlag, ProjectDir, emit_json, err, escape


def runs(
    pipeline_id: Annotated[
        str | None, typer.Argument(metavar="[ID]", help="One pipeline (default: all).")
    ] = None,
    project: ProjectDir = Path("."),
    limit: Annotated[int, typer.Option(help="How many runs, newest first.")] = 20,
    as_json: JsonFlag = False,
) -> None:
    """List recent runs with status, rows and duration."""
    from hakiri.services.status import list_runs

    found = list_runs(project, pipeline_id, limit)
    if as_json:
        emit_json(found)
        return
    if not found:
        err.print("no runs recorded yet")
        return
    for run in found:
        err.print(_run_line(run))


def status(
    ids: Annotated[
        list[str] | None, typer.Argument(metavar="[IDS]...", help="Pipelines (default: all).")
    ] = None,
    project: ProjectDir = Path("."),
    as_json: JsonFlag = False,
) -> None:
    """Phase, batches done/running/pending, cursors and the last runs of each pipeline."""
    from hakiri.services.status import pipeline_status

    found = pipeline_status(project, ids or [])
    if as_json:
        emit_json(found[0] if ids and len(ids) == 1 else found)
        return
    for item in found:
        c = item["chunks"]
        err.print(
            f"[bold]{escape(item['pipeline_id'])}[/bold]  phase {item['phase'] or 'never applied'}  "
            f"batches {c['done']}/{c['total']} done, {c['running']} running, {c['pending']} pending, {c['failed']} failed"
        )
        if item["throughput"]:
            eta = f", eta {item['eta_seconds']}s" if item["eta_seconds"] is not None else ""
            err.print(f"    {item['throughput']['rows_per_sec']:,} rows/s{eta}")
        for table, cursor in item["cursors"].items():
            err.print(f"    cursor {escape(table)}: {escape(str(cursor))}")
        for run in item["last_runs"]:
            err.print("  " + _run_line(run))


def _run_line(run: dict[str, Any]) -> str:
    duration = (
        f"{run['duration_seconds']:.1f}s" if run["duration_seconds"] is not None else "running"
    )
    rows = f"{run['row_count']:,} rows" if run["row_count"] is not None else "- rows"
    error = f"  {run['error_kind'] or 'error'}: {run['error_msg']}" if run["error_msg"] else ""
    return escape(
        f"{run['started_at'][:19].replace('T', ' ')}  {run['run_id'][:12]}  {run['pipeline_id']:<20} "
        f"{run['status']:<8} {rows:>12}  {duration}{error}"
    )
