"""`hakiri sync [--status]` and `hakiri sync pull`: the context store and its `[sync]` bucket."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer

from hakiri.cli.render import JsonFlag, ProjectDir, emit_json, err, out

app = typer.Typer(invoke_without_command=True)


@app.callback()
def sync(
    ctx: typer.Context,
    project: ProjectDir = Path("."),
    status: Annotated[
        bool,
        typer.Option(
            "--status", help="Show each table's local and bucket versions; change nothing."
        ),
    ] = False,
    retain_hours: Annotated[
        float | None,
        typer.Option(
            "--retain-hours",
            min=0,
            help="Delete from the bucket the files a local vacuum removed once older than "
            "this (default: each table's retention, 168h unless set).",
        ),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Push the context store's tables to the `\\[sync]` bucket: only what the bucket lacks,
    data before the log entries that name it, so a reader there always sees a whole version."""
    if ctx.invoked_subcommand is not None:
        return
    if status:
        from hakiri.services.sync import project_sync_status

        found = project_sync_status(project)
        if as_json:
            emit_json(found)
            return
        where = found["bucket"] + (f" at {found['endpoint']}" if found["endpoint"] else "")
        out.print(f"{found['store']} -> {where}")
        if not found["tables"]:
            out.print("  no tables on either side")
        for t in found["tables"]:
            out.print(
                f"  {t['table']}: local {_v(t['local_version'])}, bucket "
                f"{_v(t['remote_version'])}: {t['state']}"
                + (
                    f" ({t['files_to_push']} file(s), {t['bytes_to_push']:,} bytes)"
                    if t["files_to_push"]
                    else ""
                )
            )
        return
    from hakiri.services.sync import sync_project

    report = sync_project(project, retain_hours=retain_hours)
    if as_json:
        emit_json(asdict(report))
        return
    _summary(report, "pushed")


@app.command("pull")
def pull(
    project: ProjectDir = Path("."),
    into: Annotated[
        Path | None,
        typer.Option("--into", help="The store to fill (default: the project's [context] path)."),
    ] = None,
    tables: Annotated[
        list[str] | None, typer.Argument(help="Tables to pull (default: every one in the bucket).")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Bring the bucket's tables into the local store (a new machine, a serve replica):
    data first, then the log in version order, so a local reader never sees half a version."""
    from hakiri.services.sync import pull_project

    report = pull_project(project, into=into, tables=tables or ())
    if as_json:
        emit_json(asdict(report))
        return
    _summary(report, "pulled")


def _summary(report, verb: str) -> None:  # type: ignore[no-untyped-def]
    changed = [t for t in report.tables if t.version != t.version_before or t.files or t.deleted]
    for t in report.tables:
        if t.version != t.version_before:
            what = f"version {_v(t.version_before)} -> {t.version}"
        else:
            what = f"version {_v(t.version)}, up to date"
        extra = f", {t.files} file(s), {t.bytes:,} bytes" if t.files else ""
        if t.deleted:
            extra += f", {t.deleted} vacuumed file(s) deleted"
        if t.kept:
            extra += f", {t.kept} vacuumed file(s) kept until the retention passes"
        out.print(f"{t.table}: {what}{extra}")
        for note in t.notes:
            err.print(f"[yellow]note[/yellow] {t.table}: {note}")
    towards = "to" if verb == "pushed" else "from"
    err.print(
        f"{verb} {len(changed)} of {len(report.tables)} table(s) {towards} {report.bucket} "
        f"in {report.seconds:.1f}s"
    )


def _v(version: int) -> str:
    return "-" if version < 0 else str(version)
