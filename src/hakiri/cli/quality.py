"""`hakiri alerts`, `hakiri errors` and `hakiri replay`."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer

from hakiri.cli.render import JsonFlag, ProjectDir, emit_json, err, escape, out


def alerts(
    project: ProjectDir = Path("."),
    since: Annotated[
        str | None,
        typer.Option(help="Only alerts newer than this: a duration (24h, 7d) or an ISO date/time."),
    ] = None,
    pipeline_id: Annotated[
        str | None, typer.Option("--pipeline", help="Only this pipeline's alerts.")
    ] = None,
    limit: Annotated[int, typer.Option(help="How many alerts, newest first.")] = 100,
    as_json: JsonFlag = False,
) -> None:
    """Warnings from anomalies, dataset validators and sources that came up empty."""
    from hakiri.services.quality import list_alerts, parse_since

    found = list_alerts(
        project,
        since=parse_since(since) if since else None,
        pipeline_id=pipeline_id,
        limit=limit,
    )
    if as_json:
        emit_json(found)
        return
    if not found:
        err.print("no alerts")
        return
    for alert in found:
        colour = {"error": "red", "warning": "yellow"}.get(alert["severity"], "dim")
        where = alert["pipeline_id"] or "-"
        run = f" run {alert['run_id'][:12]}" if alert["run_id"] else ""
        out.print(
            f"{escape(alert['created_at'][:19].replace('T', ' '))}  "
            f"[{colour}]{alert['severity']:<7}[/{colour}] {escape(alert['kind']):<12} "
            f"{escape(where)}{escape(run)}: {escape(alert['message'])}"
        )


def errors(
    pipeline_id: Annotated[str, typer.Argument(metavar="ID", help="The pipeline.")],
    project: ProjectDir = Path("."),
    run_id: Annotated[str | None, typer.Option("--run", help="Only this run's rows.")] = None,
    limit: Annotated[int, typer.Option(help="How many quarantined records, newest first.")] = 50,
    as_json: JsonFlag = False,
) -> None:
    """Rows the pipeline's warn/skip rules quarantined, with the rule each one broke."""
    from hakiri.services.quality import quarantined_rows

    found = quarantined_rows(project, pipeline_id, run_id=run_id, limit=limit)
    if as_json:
        emit_json(found)
        return
    if not found["rows"]:
        err.print(f"no quarantined rows in {escape(', '.join(found['tables']))}")
        return
    for record in found["rows"]:
        state = (
            f"replayed by {record['replayed_by'][:12]}"
            if record["replayed_by"]
            else "dropped"
            if record["dropped"]
            else "loaded (warn)"
        )
        out.print(
            f"#{record['id']}  run {escape(record['run_id'][:12])}  {escape(record['node_id'])}  "
            f"[yellow]{escape(record['rule_id'])}[/yellow] ({record['on_fail']}, {state})"
        )
        out.print("    " + escape(json.dumps(record["row"], ensure_ascii=False, default=str)))


def replay(
    pipeline_id: Annotated[str, typer.Argument(metavar="ID", help="The pipeline.")],
    run_id: Annotated[str, typer.Option("--run", help="The run whose dropped rows to replay.")],
    project: ProjectDir = Path("."),
    as_json: JsonFlag = False,
) -> None:
    """Re-check a run's quarantined (dropped) rows against the current rules; load those that pass."""
    from hakiri.services.quality import replay_run

    outcome = replay_run(project, pipeline_id, run_id)
    if as_json:
        emit_json(asdict(outcome))
    else:
        if outcome.status == "failed":
            err.print(f"[red]error:[/red] {escape(outcome.error or 'replay failed')}")
            if outcome.hint:
                err.print(f"  [dim]hint:[/dim] {escape(outcome.hint)}")
        else:
            out.print(
                f"replayed {outcome.rows:,} rows of run {escape(run_id)} into {escape(pipeline_id)}"
            )
        for note in outcome.notes:
            err.print(f"[yellow]note:[/yellow] {escape(note)}")
    if outcome.status == "failed":
        raise typer.Exit(1)
