"""`hakiri plan`: what apply would change, Terraform-style, or as JSON for CI."""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from hakiri.cli.plan_markdown import plan_markdown
from hakiri.cli.render import JsonFlag, ProjectDir, emit_json, err, escape, out, remember_json
from hakiri.planner.model import (
    Action,
    ChangePreview,
    EnqueueStep,
    LoadStep,
    PendingWork,
    PipelinePlan,
    PlanDocument,
    RestoreStep,
    Summary,
    SyncPreview,
    ViewAction,
    ViewPlan,
)
from hakiri.spec.sizes import byte_size

_MARK = {
    Action.ADD: ("+", "green"),
    Action.CHANGE: ("~", "yellow"),
    Action.LOAD: (">", "cyan"),
    Action.RETIRE: ("-", "red"),
    Action.NO_OP: ("=", "dim"),
}


class PlanFormat(StrEnum):
    TEXT = "text"
    JSON = "json"
    MARKDOWN = "markdown"


def plan(
    ids: Annotated[
        list[str] | None,
        typer.Argument(metavar="[IDS]...", help="Pipelines to plan (default: all)."),
    ] = None,
    project: ProjectDir = Path("."),
    as_json: JsonFlag = False,
    output_format: Annotated[
        PlanFormat,
        typer.Option(
            "--format",
            help="text (default), json (the same as --json) or markdown: a pull-request "
            "comment on stdout (`> plan.md`; see docs/ci.md).",
        ),
    ] = PlanFormat.TEXT,
    detailed_exitcode: Annotated[
        bool,
        typer.Option("--detailed-exitcode", help="Exit 0 = no changes, 2 = changes, 1 = error."),
    ] = False,
    saved_to: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="Also save the plan to this file; `hakiri apply FILE` executes exactly it.",
        ),
    ] = None,
    count_deletes: Annotated[
        bool,
        typer.Option(
            "--count-deletes",
            help="Count the target rows the next snapshot of each delete-detecting pipeline "
            "(upsert deletes, scd2 close) would delete, and whether the guard refuses it. "
            "Starts Spark to read the snapshot.",
        ),
    ] = False,
    count_changes: Annotated[
        bool,
        typer.Option(
            "--count-changes",
            help="Count the rows the next batch of each upsert or scd2 pipeline would insert, "
            "update, leave unchanged and (when the mode detects deletes) delete, matched on "
            "the mode's key; includes --count-deletes. Starts Spark to read the batch.",
        ),
    ] = False,
) -> None:
    """Show what `apply` would change: specs, target tables, pending data. Reads only; starts no
    JVM (unless --count-deletes or --count-changes)."""
    # catalog and database drivers: loaded only when planning
    from hakiri.services.plan import plan_project, save_plan

    if as_json and output_format is PlanFormat.MARKDOWN:
        err.print("[red]error:[/red] --json and --format markdown ask for two formats")
        err.print("  [dim]hint:[/dim] keep one: --json is --format json")
        raise typer.Exit(1)
    if output_format is PlanFormat.JSON:
        as_json = remember_json(True)  # an error then prints a JSON document too
    counting = {"count_deletes": count_deletes, "count_changes": count_changes}
    document = (
        save_plan(project, ids or [], saved_to, **counting)
        if saved_to
        else plan_project(project, ids or [], **counting)
    )
    if as_json:
        emit_json(document.model_dump(mode="json"))
    elif output_format is PlanFormat.MARKDOWN:
        typer.echo(plan_markdown(document), nl=False)
    else:
        render(document)
    if document.summary.errors:
        if saved_to:
            err.print(
                "[red]error:[/red] the plan has errors, so no plan was saved to "
                f"{escape(str(saved_to))}"
            )
        raise typer.Exit(1)
    if saved_to and not as_json:
        err.print(
            f"Saved the plan to {escape(str(saved_to))}; "
            f"`hakiri apply {escape(str(saved_to))}` executes it."
        )
    if detailed_exitcode and document.summary.changes:
        raise typer.Exit(2)


def render(document: PlanDocument) -> None:
    if not document.catalog.initialized:
        err.print(
            f"[dim]catalog {escape(document.catalog.url)} does not exist yet: every pipeline is new[/dim]"
        )
    for pipeline in document.pipelines:
        _pipeline(pipeline)
    for view in document.views or []:
        _view(view)
    _sync(document.sync)
    s = document.summary
    out.print()
    line = f"Plan: {s.add} to add, {s.change} to change, {s.retire} to retire."
    if s.no_op:
        line += f" {s.no_op} unchanged."
    if s.pending:
        line += f" {s.pending} with data to load."
    if document.views:
        line += f" {view_summary(s)}."
    out.print(f"[bold]{line}[/bold]")
    if s.errors:
        noun = "pipeline" if s.errors == 1 else "pipelines"
        err.print(f"[red]error:[/red] {s.errors} {noun} could not be planned (see above)")
        err.print(
            "  [dim]hint:[/dim] fix the connection or path named in each error, then plan again"
        )
    for hint in document.hints:
        err.print(f"[dim]hint:[/dim] {escape(hint)}")


def view_summary(s: Summary) -> str:
    """`Views: 1 to create, 1 to replace, 0 to drop, 2 unchanged`."""
    said = f"Views: {s.view_create} to create, {s.view_replace} to replace, {s.view_drop} to drop"
    return said + (f", {s.view_no_op} unchanged" if s.view_no_op else "")


_VIEW_MARK = {
    ViewAction.CREATE: ("+", "green"),
    ViewAction.REPLACE: ("~", "yellow"),
    ViewAction.DROP: ("-", "red"),
    ViewAction.NO_OP: ("=", "dim"),
}
_DIFF_COLOUR = {"+": "green", "-": "red", "@": "cyan"}


def _view(v: ViewPlan) -> None:
    """A view that changes (or that has a warning): its action, version, what it reads, and
    for a replace the SQL diff."""
    if v.action is ViewAction.NO_OP and not v.warnings:
        return
    mark, colour = _VIEW_MARK[v.action]
    version = {
        ViewAction.CREATE: f"version {v.version}",
        ViewAction.REPLACE: f"version {(v.version or 1) - 1} -> {v.version}",
        ViewAction.DROP: f"version {v.version}; in no manifest",
        ViewAction.NO_OP: f"version {v.version}",
    }[v.action]
    reads = f"  reads {', '.join(v.reads)}" if v.reads else ""
    out.print(
        f"[{colour}]{mark} view {escape(v.name)}[/{colour}] "
        f"[dim]{v.action.value} ({escape(version)}){escape(reads)}[/dim]"
    )
    for line in v.sql_diff:
        tint = _DIFF_COLOUR.get(line[:1]) if not line.startswith(("---", "+++")) else "dim"
        shown = escape(line)
        out.print(f"    [{tint}]{shown}[/{tint}]" if tint else f"    {shown}")
    if v.action is ViewAction.REPLACE and v.description != v.before_description:
        out.print(
            f"    [yellow]~ description:[/yellow] {escape(_show(v.before_description))} -> "
            f"{escape(_show(v.description))}"
        )
    for warning in v.warnings:
        out.print(f"    [yellow]warning:[/yellow] {escape(warning)}")


def _sync(sync: SyncPreview | None) -> None:
    if sync is None or not sync.after_apply:
        return
    where = sync.bucket + (f" at {sync.endpoint}" if sync.endpoint else "")
    out.print(f"[cyan]~[/cyan] sync: loads into the context store are published to {escape(where)}")
    if sync.missing:
        err.print(
            f"  [yellow]warning:[/yellow] {' and '.join(sync.missing)} not set: the loads would "
            "commit, their sync would fail (and be alerted)"
        )


def _pipeline(p: PipelinePlan) -> None:
    mark, colour = _MARK[p.action]
    where = f"  {p.source} -> {p.destination} ({p.mode})" if p.source else ""
    out.print(
        f"[{colour}]{mark} {escape(p.id)}[/{colour}] [dim]{p.action.value}{escape(where)}[/dim]"
    )
    for change in p.diff:
        symbol = {"added": "+", "removed": "-", "changed": "~"}[change.kind]
        value = _show(change.after) if change.kind == "added" else _show(change.before)
        if change.kind == "changed":
            value = f"{_show(change.before)} -> {_show(change.after)}"
        out.print(f"    {symbol} {escape(change.path)}: {escape(value)}")
    for t in p.targets:
        if t.transformed is not None:
            columns = ", ".join(
                f"{c.name} {c.type or '(type from the data)'}" for c in t.transformed
            )
            out.print(
                f"    [cyan]transforms[/cyan] {escape(t.table)} -> {escape(columns or 'no columns')}"
            )
        guessed = {c.name: c.type for c in t.inferred or () if c.type}
        if t.create:
            if guessed and not any(c.type for c in t.columns):
                columns = ", ".join(
                    f"{c.name} {guessed.get(c.name, '?')}" for c in t.inferred or ()
                )
                columns += f"; inferred from {t.inferred_rows:,} records, as apply infers them"
            elif any(c.type for c in t.columns):
                columns = ", ".join(
                    f"{c.name} {c.type or '(type from the data)'}" for c in t.columns
                )
            elif t.columns:
                columns = ", ".join(c.name for c in t.columns) + "; types from the data"
            else:
                columns = "columns from the data"
            if t.create_schema:
                out.print(f"    [green]+ create schema {escape(t.create_schema)}[/green]")
            out.print(f"    [green]+ create {escape(t.target)}[/green] ({escape(columns)})")
        if t.waiting:
            out.print(f"    [dim]… {escape(t.target)}: waiting for its first file[/dim]")
        for c in t.add_columns:
            out.print(
                f"    [green]+ column {escape(t.target)}.{escape(c.name)}[/green] {escape(_added_type(c.type, guessed.get(c.name)))}"
            )
        for r in t.rename_columns:
            out.print(f"    [yellow]~ rename {escape(t.target)}.{escape(r)}[/yellow]")
        for r in t.retype_columns:
            out.print(
                f"    [yellow]~ retype {escape(t.target)}.{escape(r.name)}[/yellow] {escape(r.from_type)} -> {escape(r.to_type)} (accepted)"
            )
        for w in t.widen_columns:
            out.print(
                f"    [yellow]~ widen {escape(t.target)}.{escape(w.name)}[/yellow] {escape(w.from_type)} -> {escape(w.to_type)}"
            )
        for problem in t.incompatible:
            out.print(f"    [red]! incompatible:[/red] {escape(problem)}")
    for work in p.pending:
        if not work.has_work:
            continue
        parts = []
        if work.new_files or work.changed_files:
            parts.append(
                f"{len(work.new_files)} new, {len(work.changed_files)} changed file(s), "
                f"{byte_size(work.bytes)}"
            )
        elif work.new_batches:
            rows = f", {_rows(work)}" if work.estimated_rows else ""
            parts.append(f"{work.new_batches} new batch(es){rows}")
        if work.queued_batches:
            parts.append(f"{work.queued_batches} batch(es) left by an earlier run")
        if work.reload_batches:
            parts.append(f"{work.reload_batches} loaded batch(es) to load again")
        out.print(f"    [cyan]data[/cyan] {escape(work.table)}: {escape('; '.join(parts))}")
        if work.deletes is not None:
            d = work.deletes
            share = f" ({d.rows / d.of:.0%})" if d.of else ""
            line = f"the next snapshot would {d.verb} {d.rows:,} of {d.of:,} row(s){share}"
            if d.refused:
                out.print(
                    f"    [red]! deletes[/red] {escape(work.table)}: {escape(line)}, over "
                    f"max_delete_fraction = {d.max_fraction:g}: apply will refuse it"
                )
            else:
                out.print(f"    [yellow]- deletes[/yellow] {escape(work.table)}: {escape(line)}")
        if work.changes is not None:
            out.print(
                f"    [cyan]changes[/cyan] {escape(work.table)}: {escape(_changes(work.changes))}"
            )
    for step in p.steps:
        if isinstance(step, RestoreStep):
            out.print(
                f"    [yellow]~ restore[/yellow] {escape(step.target)}: {escape(step.reason)}; "
                f"{len(step.batches)} batch(es) to load again"
            )
        if isinstance(step, EnqueueStep):
            for retired in step.retired:
                out.print(
                    f"    [yellow]- {escape(retired.status)}[/yellow] {escape(retired.reason)}"
                )
        if isinstance(step, LoadStep):
            at_once = f", {step.parallelism} at a time" if step.parallelism > 1 else ""
            out.print(f"    [cyan]load[/cyan] {len(step.batches)} batch(es){at_once}")
    if p.cdc is not None:
        out.print(f"    [cyan]cdc[/cyan] {escape(p.cdc.describe())}")
    for warning in p.warnings:
        out.print(f"    [yellow]warning:[/yellow] {escape(warning)}")
    for error in p.errors:
        out.print(f"    [red]error:[/red] {escape(error)}")


def _rows(work: PendingWork) -> str:
    """`1,200 row(s) (counted)`, or `~1,200 row(s) (rough: PostgreSQL's planner statistics)`."""
    counted = work.estimate == "counted"
    said = f" ({work.estimate})" if work.estimate else ""
    return f"{'' if counted else '~'}{work.estimated_rows:,} row(s){said}"


def _changes(c: ChangePreview) -> str:
    """`next batch B: +1,200 insert, ~340 update, -12 delete, 8,448 unchanged (counted)`."""
    parts = [f"+{c.insert:,} insert", f"~{c.update:,} update"]
    if c.delete is not None:
        parts.append(f"-{c.delete:,} {c.verb or 'delete'}")
    parts.append(f"{c.unchanged:,} unchanged")
    return f"next batch {c.batch}: {', '.join(parts)} (counted)"


def _added_type(declared: str | None, guessed: str | None) -> str:
    if declared:
        return declared
    return f"{guessed} (inferred)" if guessed else "(type from data)"


def _show(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)
