"""`hakiri apply`, `hakiri run` and `hakiri gc`."""

from __future__ import annotations

import os
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from hakiri.cli.load_progress import LoadDisplay, progress_seconds
from hakiri.cli.render import JsonFlag, ProjectDir, emit_json, err, escape, out
from hakiri.errors import HakiriError

FailFast = Annotated[
    bool, typer.Option("--fail-fast", help="Stop at the first pipeline that fails.")
]
LeaseTimeout = Annotated[
    float,
    typer.Option(
        "--lease-timeout", help="Seconds to wait for a pipeline another process is running."
    ),
]


def apply(
    ids: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="[IDS]... | PLAN_FILE",
            help="Pipelines (default: all enabled), or a plan file written by `hakiri plan -o`.",
        ),
    ] = None,
    project: ProjectDir = Path("."),
    fail_fast: FailFast = False,
    lease_timeout: LeaseTimeout = 0.0,
    restore_partial: Annotated[
        bool,
        typer.Option(
            "--restore-partial",
            help="A target dropped by hand is loaded again with what its source still has, "
            "even when part of it cannot come back (a file deleted since it loaded).",
        ),
    ] = False,
    as_json: JsonFlag = False,
    follow: Annotated[
        bool,
        typer.Option(
            "--follow",
            help="Keep one cdc_mirror pipeline following its source: one process, one engine "
            "session, a WAL range after another until SIGTERM or Ctrl-C.",
        ),
    ] = False,
    interval: Annotated[
        float,
        typer.Option(
            "--interval",
            min=0.05,
            help="With --follow: seconds to wait after a round that found no change.",
        ),
    ] = 0.5,
) -> None:
    """Run pipelines to convergence: load every pending batch, exactly once.

    Given a plan file, apply executes that plan, and refuses it when anything the plan
    observed (manifests, catalog, targets, sources) has changed since. With --follow, one
    cdc_mirror pipeline is applied again and again, a line per range applied."""
    if follow:
        from hakiri.cli.follow import follow_pipeline

        follow_pipeline(project, ids or [], interval, as_json)
        return
    plan_file = _plan_file(ids or [])
    _apply(project, ids or [], fail_fast, lease_timeout, as_json, plan_file, restore_partial)


def _plan_file(args: list[str]) -> Path | None:
    """A plan file among the arguments: a path (pipeline ids have no '.' or '/')."""
    files = [a for a in args if "." in a or "/" in a]
    if not files:
        return None
    if len(args) > 1:
        raise HakiriError(
            "a plan file is applied alone: it already names its pipelines",
            f"run `hakiri apply {files[0]}` without pipeline ids",
        )
    return Path(files[0])


def run(
    pipeline_id: Annotated[str, typer.Argument(metavar="ID", help="The pipeline to run now.")],
    project: ProjectDir = Path("."),
    lease_timeout: LeaseTimeout = 0.0,
    as_json: JsonFlag = False,
) -> None:
    """Run one pipeline now (also a disabled one), e.g. from cron."""
    _apply(project, [pipeline_id], False, lease_timeout, as_json)


def _apply(
    project: Path,
    ids: list[str],
    fail_fast: bool,
    lease_timeout: float,
    as_json: bool,
    plan_file: Path | None = None,
    restore_partial: bool = False,
) -> None:
    from hakiri.services.apply import ProgressWatch, apply_project, apply_saved_plan

    def progress(outcome) -> None:  # type: ignore[no-untyped-def]
        if not as_json:
            mark = {
                "success": "[green]ok[/green]",
                "no-op": "[dim]up to date[/dim]",
                "failed": "[red]failed[/red]",
                "retired": "[yellow]retired[/yellow]",
            }
            detail, recorded = "", _recorded([outcome])
            if outcome.status == "success":
                detail = f": {outcome.rows:,} rows in {outcome.batches} batch(es)"
            elif outcome.status == "no-op" and recorded:
                detail = f": no rows to load; {recorded} recorded"
            err.print(f"{mark[outcome.status]} {escape(outcome.pipeline_id)}{detail}")

    # A bar per pipeline for a person watching a terminal; elsewhere a line every few seconds.
    display = LoadDisplay(
        err, bar=err.is_terminal and not as_json, every=progress_seconds(os.environ)
    )

    def on_outcome(outcome) -> None:  # type: ignore[no-untyped-def]
        display.outcome()
        progress(outcome)

    told: list = []  # type: ignore[type-arg]  # what apply did to views, when it did
    with display:
        options = dict(
            fail_fast=fail_fast,
            lease_timeout=lease_timeout,
            on_outcome=on_outcome,
            on_views=told.append,
            on_batch=display.batch_done,
            progress=ProgressWatch(display.every, display.in_flight) if display.every else None,
        )
        if plan_file is not None:
            outcomes = apply_saved_plan(project, plan_file, **options)
        else:
            outcomes = apply_project(project, ids, restore_partial=restore_partial, **options)
    views = told[0] if told else None
    if as_json:
        # Views after the pipelines, one entry each: `view` in place of `pipeline_id`.
        emit_json([asdict(o) for o in outcomes] + (views.changes if views else []))
    else:
        _summary(outcomes, views)
    if any(o.status == "failed" for o in outcomes):
        raise typer.Exit(1)


def _views(views) -> None:  # type: ignore[no-untyped-def]
    """`view customer_orders: created (version 1)`, …, and where the definitions went."""
    if views is None:
        return
    for change in views.changes:
        version = f" (version {change['version']})" if "version" in change else ""
        status = "held back" if change["status"] == "held" else change["status"]
        out.print(f"view {escape(change['view'])}: {status}{version}")
    if views.store_version is not None:
        err.print(
            f"[dim]{views.live} live view(s) written to {escape(views.store)} "
            f"(Delta version {views.store_version})[/dim]"
        )
    for note in views.notes:
        err.print(f"[yellow]note:[/yellow] views: {escape(note)}")
    for warning in views.warnings:
        err.print(f"[yellow]warning:[/yellow] {escape(warning)}")


def _summary(outcomes, views=None) -> None:  # type: ignore[no-untyped-def]
    for o in outcomes:
        for warning in o.warnings:
            err.print(
                f"[yellow]warning:[/yellow] pipeline {escape(o.pipeline_id)}: {escape(warning)}"
            )
    recorded = _recorded(outcomes)
    changed_views = views is not None and (views.changes or views.store_version is not None)
    if all(o.status == "no-op" for o in outcomes):  # no pipeline, or none had work
        if not recorded and not changed_views:
            noun = "pipeline and view" if views is not None and views.live else "pipeline"
            out.print(f"no changes: every {noun} is up to date")
            return
        if recorded:
            out.print(f"no rows to load; {recorded} recorded")
        for o in outcomes:
            for note in o.notes:
                err.print(f"[yellow]note:[/yellow] {escape(o.pipeline_id)}: {escape(note)}")
        if changed_views:
            _views(views)
        return
    table = summary_table(outcomes, out.width)
    out.print(table)
    if recorded:
        out.print(f"{recorded} recorded")
    if changed_views:
        _views(views)
    for o in outcomes:
        for note in o.notes:
            err.print(f"[yellow]note:[/yellow] {escape(o.pipeline_id)}: {escape(note)}")
        if o.error:
            err.print(f"[red]error:[/red] {escape(o.pipeline_id)}: {escape(o.error)}")
            if o.hint:
                err.print(f"  [dim]hint:[/dim] {escape(o.hint)}")


# The summary's columns. A table wider than the console loses columns in this order: first
# the counts that are 0 for every pipeline (recovered, quarantined, deleted, batches), then
# `mode`, then those counts even when not 0; a long pipeline id wraps onto more lines. No
# cell is ever cut short with `…`.
SUMMARY_COLUMNS = (
    "pipeline",
    "mode",
    "status",
    "rows",
    "deleted",
    "quarantined",
    "batches",
    "recovered",
    "duration",
)
DROPPABLE = ("recovered", "quarantined", "deleted", "batches")


def summary_table(outcomes, width: int) -> Table:  # type: ignore[no-untyped-def]
    """The summary of an apply, one row per pipeline, fitted to `width` columns."""
    rows = [
        {
            "pipeline": o.pipeline_id,
            "mode": o.mode,
            "status": o.status,
            "rows": f"{o.rows:,}",
            "deleted": f"{o.deleted:,}",
            "quarantined": f"{o.quarantined:,}",
            "batches": str(o.batches),
            "recovered": str(o.recovered),
            "duration": f"{o.seconds:.1f}s",
        }
        for o in outcomes
    ]
    widths = {c: max(len(c), *(len(r[c]) for r in rows)) for c in SUMMARY_COLUMNS}
    shown = list(SUMMARY_COLUMNS)

    def fits() -> bool:  # the pipeline column may wrap down to its header's width
        least = sum(widths[c] for c in shown if c != "pipeline") + len("pipeline")
        return least + 2 * len(shown) <= width

    zero = [c for c in DROPPABLE if all(r[c] == "0" for r in rows)]
    for column in [*zero, "mode", *(c for c in DROPPABLE if c not in zero)]:
        if fits():
            break
        shown.remove(column)
    table = Table(box=None)
    for column in shown:
        if column == "pipeline":
            table.add_column(column, overflow="fold", min_width=len(column))
        else:
            table.add_column(column, no_wrap=True, min_width=widths[column])
    for r in rows:
        table.add_row(*(r[c] for c in shown))
    return table


def _recorded(outcomes) -> str:  # type: ignore[no-untyped-def]
    """`1 manifest change, 2 batches superseded`: what apply recorded besides rows."""
    counts = (
        (sum(o.spec_recorded for o in outcomes), "manifest change", "manifest changes"),
        (sum(o.superseded for o in outcomes), "batch superseded", "batches superseded"),
        (sum(o.gone for o in outcomes), "batch gone", "batches gone"),
    )
    return ", ".join(f"{n} {one if n == 1 else many}" for n, one, many in counts if n)


def gc(
    project: ProjectDir = Path("."),
    older_than: Annotated[
        float, typer.Option(help="Only tables older than this many seconds.")
    ] = 3600.0,
    as_json: JsonFlag = False,
) -> None:
    """Drop what crashed runs left: staging and `_new` tables, context-store staging areas."""
    from hakiri.services.gc import collect_garbage

    found = collect_garbage(project, older_than)
    if as_json:
        emit_json(found.dropped)  # the names dropped, as before; what was kept is on stderr
    else:
        for name in found.dropped:
            out.print(f"dropped {escape(name)}")
        out.print(f"gc: {len(found.dropped)} leftover(s) removed")
    for kept in found.kept:
        err.print(f"kept {escape(kept.name)} ({_kept_why(kept.why, older_than)})")


def _kept_why(why: str, older_than: float) -> str:
    if why == "running":
        return "its run is still running"
    if why == "locked":
        return "in use right now: locked by another session"
    age = next(
        (
            f"{older_than / n:g}{unit}"
            for n, unit in ((3600, "h"), (60, "m"))
            if older_than % n == 0
        ),
        f"{older_than:g}s",
    )
    return f"younger than {age}: a run may still be using it; --older-than 0 drops it now"
