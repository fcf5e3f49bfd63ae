"""`hakiri runs` and `hakiri status`: read the catalog; never migrate it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from hakiri.cli.render import JsonFlag, ProjectDir, emit_json, err, escape, out


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
        out.print(_run_line(run))


def status(
    ids: Annotated[
        list[str] | None, typer.Argument(metavar="[IDS]...", help="Pipelines (default: all).")
    ] = None,
    project: ProjectDir = Path("."),
    as_json: JsonFlag = False,
) -> None:
    """Phase, batches done/running/pending, rows/s and ETA, cursors and the last runs of each pipeline."""
    from hakiri.services.status import pipeline_status

    found = pipeline_status(project, ids or [])
    if as_json:
        emit_json(found[0] if ids and len(ids) == 1 else found)
        return
    for item in found:
        out.print(_status_line(item))
        pace = _pace_line(item)
        if pace:
            out.print(f"    {escape(pace)}")
        for warning in item["warnings"]:
            out.print(f"    [yellow]warning:[/yellow] {escape(warning)}")
        if item["last_error"]:
            last = item["last_error"]
            out.print(
                f"    [red]last error[/red] {escape(last['at'][:19].replace('T', ' '))}: "
                f"{escape(last['message'] or last['kind'] or 'failed')}"
            )
        for retired in item["retired"]:
            out.print(f"    {escape(retired['status'])}: {escape(retired['reason'] or '')}")
        for table, cursor in item["cursors"].items():
            out.print(f"    cursor {escape(table)}: {escape(_cursor_text(cursor))}")
        if item.get("cdc"):
            out.print(f"    cdc {escape(_cdc_text(item['cdc']))}")
        drift = item.get("drift")
        if isinstance(drift, dict):
            out.print(f"    [yellow]drift not checked:[/yellow] {escape(drift['error'])}")
        for found in drift if isinstance(drift, list) else []:
            out.print(f"    [yellow]drift:[/yellow] {escape(found['message'])}")
        for run in item["last_runs"]:
            out.print("  " + _run_line(run))


def _status_line(item: dict[str, Any]) -> str:
    c = item["chunks"]
    counts = f"{c['running']} running, {c['pending']} pending, {c['failed']} failed"
    for status in ("superseded", "gone"):
        if c[status]:
            counts += f", {c[status]} {status}"
    return (
        f"[bold]{escape(item['pipeline_id'])}[/bold]  phase {item['phase'] or 'never applied'}  "
        f"batches {c['done']}/{c['total']} done ({counts})"
    )


def _pace_line(item: dict[str, Any]) -> str:
    """`1,234.5 rows/s, eta 3m 20s, rate budget 60/min, started 2026-01-01 10:00:00`; parts known."""
    parts = []
    if item["throughput"]:
        parts.append(f"{item['throughput']['rows_per_sec']:,} rows/s")
    if item["eta_seconds"] is not None:
        parts.append(f"eta {duration_text(item['eta_seconds'])}")
    if item["rate_budget"]:
        parts.append(f"rate budget {item['rate_budget']}")
    if parts and item["started_at"]:
        parts.append(f"started {item['started_at'][:19].replace('T', ' ')}")
    return ", ".join(parts)


def _cursor_text(cursor: Any) -> str:
    if isinstance(cursor, dict) and "column" in cursor and "value" in cursor:
        text = f"{cursor['column']} = {cursor['value']}"
        if cursor.get("planned_to") not in (None, cursor["value"]):
            text += f" (planned to {cursor['planned_to']})"
        return text
    return str(cursor)


def duration_text(seconds: float) -> str:
    """`42s`, `3m 20s`, `2h 05m`: a duration for people watching a backfill."""
    total = max(0, round(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    if minutes:
        return f"{minutes}m {secs:02d}s"
    return f"{secs}s"


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


def _cdc_text(lag: dict[str, Any]) -> str:
    from hakiri.sources.cdc.lag import CdcLag

    if "error" in lag:
        return f"lag unknown: {lag['error']}"
    return CdcLag.model_validate(lag).describe()
