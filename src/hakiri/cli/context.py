"""`hakiri context tables|show|history|optimize|vacuum|repair`: the local Delta Lake context store.

deltalake and pyarrow are imported by the service, inside each command: `--help` stays instant.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from hakiri.cli.render import JsonFlag, ProjectDir, emit_json, err, escape, out
from hakiri.spec.sizes import byte_size

app = typer.Typer(no_args_is_help=True)

_NUMBERS = frozenset({"version", "rows", "files", "size"})

TableArg = Annotated[
    str,
    typer.Argument(
        metavar="TABLE", help="A table of the context store (see `hakiri context tables`)."
    ),
]
StoreOption = Annotated[
    Path | None,
    typer.Option(
        "--store",
        help="The store directory (relative to the project) when TABLE is in several stores.",
        file_okay=False,
        show_default=False,
    ),
]


@app.command("tables")
def tables(project: ProjectDir = Path("."), as_json: JsonFlag = False) -> None:
    """List the Delta tables: version, rows and size (from the log's stats), last commit."""
    from hakiri.services.context import list_context_tables

    found = list_context_tables(project)
    if as_json:
        emit_json(found)
        return
    if not found["tables"]:
        where = ", ".join(_shown(s) for s in found["stores"])
        err.print(f"no tables in the context store ({escape(where)})")
        return
    for store in found["stores"]:
        in_store = [t for t in found["tables"] if t["store"] == store]
        if not in_store:
            continue
        view = Table(title=Text(_shown(store)), title_justify="left", box=None, pad_edge=False)
        for header in (
            "table",
            "version",
            "rows",
            "files",
            "size",
            "last commit (UTC)",
            "operation",
        ):
            view.add_column(header, justify="right" if header in _NUMBERS else "left")
        for t in in_store:
            if t["error"]:
                view.add_row(Text(t["name"]), "", "", "", "", Text(t["error"], style="red"), "")
                continue
            view.add_row(
                Text(t["name"]),
                str(t["version"]),
                f"{t['rows']:,}" if t["rows"] is not None else "-",
                str(t["files"]),
                byte_size(t["size_bytes"]),
                _when(t["last_commit_at"]),
                Text(t["last_operation"] or ""),
            )
        out.print(view)


@app.command("show")
def show(
    table: TableArg,
    project: ProjectDir = Path("."),
    limit: Annotated[int, typer.Option(min=0, help="How many rows to read.")] = 20,
    version: Annotated[
        int | None,
        typer.Option(min=0, help="Read this version (time travel); default the latest."),
    ] = None,
    store: StoreOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Print the first rows of a table; only those rows are read."""
    from hakiri.services.context import show_table

    found = show_table(project, table, limit=limit, version=version, store=store)
    if as_json:
        emit_json(found)
        return
    total = f" of {found['rows_total']:,}" if found["rows_total"] is not None else ""
    out.print(
        f"[bold]{escape(found['table'])}[/bold]  version {found['version']}  "
        f"{len(found['rows'])}{total} rows"
    )
    view = Table(box=None, pad_edge=False)
    for column in found["columns"]:
        view.add_column(Text(column["name"]), header_style="bold", overflow="fold")
    for row in found["rows"]:
        view.add_row(*(_cell(row.get(c["name"])) for c in found["columns"]))
    out.print(view)


@app.command("history")
def history(
    table: TableArg,
    project: ProjectDir = Path("."),
    limit: Annotated[int, typer.Option(min=1, help="How many versions, newest first.")] = 20,
    store: StoreOption = None,
    as_json: JsonFlag = False,
) -> None:
    """List a table's versions, newest first, with hakiri's commit metadata."""
    from hakiri.services.context import table_history

    found = table_history(project, table, limit=limit, store=store)
    if as_json:
        emit_json(found)
        return
    view = Table(box=None, pad_edge=False)
    for header in ("version", "committed (UTC)", "operation", "parameters", "hakiri"):
        view.add_column(header, justify="right" if header == "version" else "left")
    for v in found["versions"]:
        view.add_row(
            str(v["version"]),
            _when(v["timestamp"]),
            Text(v["operation"] or ""),
            Text(_pairs(v["parameters"])),
            Text(_pairs({k.removeprefix("hakiri."): x for k, x in v["metadata"].items()})),
        )
    out.print(view)


@app.command("optimize")
def optimize(
    table: TableArg,
    project: ProjectDir = Path("."),
    store: StoreOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Compact the table's small files into bigger ones (a new version)."""
    from hakiri.services.context import optimize_table

    found = optimize_table(project, table, store=store)
    if as_json:
        emit_json(found)
        return
    name = escape(found["table"])
    if not found["files_removed"]:
        out.print(
            f"nothing to compact in {name} ({_files(found['files_before'])}); "
            f"version stays {found['version']}"
        )
        return
    out.print(
        f"compacted {name}: {_files(found['files_before'])} -> {found['files_after']} "
        f"({found['files_added']} added, {found['files_removed']} removed); "
        f"version {found['version_before']} -> {found['version']}"
    )


@app.command("vacuum")
def vacuum(
    table: TableArg,
    retain_hours: Annotated[
        int,
        typer.Option(
            "--retain-hours",
            min=0,
            help="Keep the files older versions need for this many hours.",
            show_default=False,
        ),
    ],
    project: ProjectDir = Path("."),
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Only list the files that would be deleted.")
    ] = False,
    force: Annotated[
        bool,
        typer.Option("--force", help="Allow --retain-hours below the table's retention (168h)."),
    ] = False,
    store: StoreOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Delete the data files no recent version needs."""
    from hakiri.services.context import vacuum_table

    found = vacuum_table(project, table, retain_hours, dry_run=dry_run, force=force, store=store)
    if as_json:
        emit_json(found)
        return
    name = escape(found["table"])
    count = len(found["files"])
    if found["dry_run"]:
        out.print(f"would remove {_files(count)} from {name} (older than {retain_hours}h)")
    else:
        out.print(f"removed {_files(count)} from {name}; version {found['version']}")
    for file in found["files"]:
        out.print(f"  {escape(file)}")


@app.command("repair")
def repair(
    tables: Annotated[
        list[str] | None,
        typer.Argument(metavar="[TABLE]...", help="Tables to repair (default: every table)."),
    ] = None,
    project: ProjectDir = Path("."),
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Only say what would be rewritten.")
    ] = False,
    store: StoreOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Make tables an earlier hakiri wrote on Spark readable again: their text columns, recorded
    as `string collate UTF8_BINARY`, become `string` in every log entry (no data file changes,
    every version is kept, the old entries are saved under the store's _repair/)."""
    from hakiri.services.context import repair_tables

    done = repair_tables(project, tables or [], dry_run=dry_run, store=store)
    if as_json:
        emit_json(done)
        return
    if not done:
        err.print("the context store has no tables")
    for table in done:
        name = escape(table["table"])
        if not table["log_entries"]:
            out.print(f"{name}: nothing to repair")
            continue
        columns = ", ".join(escape(c) for c in table["columns"])
        entries = len(table["log_entries"])
        if table["dry_run"]:
            out.print(f"{name}: would rewrite {entries} log entries (columns {columns})")
        else:
            out.print(
                f"{name}: repaired {entries} log entries (columns {columns} are `string`); "
                f"the old entries are in {escape(_shown(table['originals']))}"
            )


def _files(n: int) -> str:
    return f"{n} file" if n == 1 else f"{n} files"


def _shown(path: str) -> str:
    try:
        return str(Path(path).relative_to(Path.cwd()))
    except ValueError:
        return path


def _when(iso: str | None) -> str:
    if iso is None:
        return "-"
    return datetime.fromisoformat(iso).strftime("%Y-%m-%d %H:%M:%S")


def _cell(value: Any) -> Text:
    if value is None:
        return Text("null", style="dim")
    if isinstance(value, dict | list):
        return Text(json.dumps(value, default=str))
    return Text(str(value))


def _pairs(values: dict[str, Any]) -> str:
    return ", ".join(
        f"{k}={v if isinstance(v, str) else json.dumps(v, default=str)}" for k, v in values.items()
    )
