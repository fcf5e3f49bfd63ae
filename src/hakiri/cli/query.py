"""`hakiri query SQL`: a read-only Spark SQL query over the context store's tables and views.

duckdb, deltalake and pyarrow are imported by the services, inside the command.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from hakiri.cli.render import ProjectDir, err, escape, mark_json_emitted, out, remember_json

# A terminal shows this many rows unless --limit says otherwise; files get every row.
TABLE_ROWS = 100


def query(
    sql: Annotated[
        str,
        typer.Argument(
            metavar="SQL",
            help="One read-only Spark SQL query over the context store's tables and the "
            "project's views; `orders@v3` reads version 3 of a table.",
            show_default=False,
        ),
    ],
    project: ProjectDir = Path("."),
    output_format: Annotated[
        str,
        typer.Option(
            "--format",
            "-f",
            help="table (default on stdout), json, csv or parquet (to --out, or to a pipe).",
            show_default=False,
        ),
    ] = "",
    out_file: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Write the result to this file.", dir_okay=False),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option(
            min=0,
            help=f"Return at most N rows (a table on stdout: {TABLE_ROWS} unless given).",
            show_default=False,
        ),
    ] = None,
    engine: Annotated[
        str,
        typer.Option(help="duckdb (in this process, the default), sail or spark."),
    ] = "duckdb",
) -> None:
    """Run a read-only SQL query over the context store's tables and the project's views."""
    import os

    from hakiri.errors import HakiriError
    from hakiri.services.query import prepare_query
    from hakiri.services.query_engines import ENGINES, run_query
    from hakiri.services.query_output import FORMATS
    from hakiri.spec.loader import load_project

    chosen = output_format.lower() or ("parquet" if _suffix(out_file) == ".parquet" else "table")
    if chosen not in FORMATS:
        raise HakiriError(f"no output format `{output_format}`", f"use {', '.join(FORMATS)}")
    if engine not in ENGINES:
        raise HakiriError(f"no query engine `{engine}`", f"use {', '.join(ENGINES)}")
    if chosen == "table" and out_file is not None:
        raise HakiriError("--out takes json, csv or parquet", "add --format csv (or json, parquet)")
    if chosen == "parquet" and out_file is None and sys.stdout.isatty():
        raise HakiriError(
            "Parquet is binary: not for a terminal",
            "pass --out FILE.parquet, or pipe stdout to a file or program",
        )
    remember_json(chosen == "json" and out_file is None)  # errors as a JSON document too
    if limit is None and chosen == "table":
        limit = TABLE_ROWS
    loaded = load_project(project, os.environ)
    prepared = prepare_query(loaded, sql)
    result = run_query(loaded, prepared, engine=engine, limit=limit)
    if chosen == "table":
        _print_table(result)
        return
    written = _write(result, chosen, out_file)
    if result.truncated:
        err.print(f"[yellow]note:[/yellow] the result was cut at --limit {limit} rows")
    if out_file is not None:
        err.print(f"wrote {written:,} rows to {escape(str(out_file))}")


def _write(result: Any, chosen: str, out_file: Path | None) -> int:
    from hakiri.services.query_output import write_csv, write_json, write_parquet

    if chosen == "json":
        if out_file is None:
            mark_json_emitted()
            write_json(result, sys.stdout)
            sys.stdout.flush()
        else:
            with out_file.open("w", encoding="utf-8") as stream:
                write_json(result, stream)
        return int(result.row_count)
    writer = write_csv if chosen == "csv" else write_parquet
    if out_file is None:
        sys.stdout.flush()
        writer(result, sys.stdout.buffer)
        sys.stdout.buffer.flush()
    else:
        with out_file.open("wb") as binary:
            writer(result, binary)
    return int(result.row_count)


def _print_table(result: Any) -> None:
    from hakiri.services.query_output import columns_of, json_rows

    view = Table(box=None, pad_edge=False)
    for column in columns_of(result.schema):
        view.add_column(Text(column["name"]), header_style="bold", overflow="fold")
    for batch in result.batches():
        for row in json_rows(batch):
            view.add_row(*(_cell(v) for v in row))
    out.print(view)
    rows = f"{result.row_count:,} row{'' if result.row_count == 1 else 's'}"
    if result.truncated:
        out.print(f"({rows}; cut at --limit {result.limit}: pass a larger --limit for more)")
    else:
        out.print(f"({rows})")


def _cell(value: Any) -> Text:
    import json

    if value is None:
        return Text("null", style="dim")
    if isinstance(value, dict | list):
        return Text(json.dumps(value, default=str))
    return Text(str(value))


def _suffix(path: Path | None) -> str:
    return path.suffix.lower() if path is not None else ""
