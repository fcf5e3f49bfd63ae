"""`hakiri diff ID`: compare a pipeline's source with its target, row by row, by key."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from hakiri.cli.render import JsonFlag, ProjectDir, emit_json, err, escape, out


def diff(
    pipeline_id: Annotated[str, typer.Argument(metavar="ID", help="The pipeline to check.")],
    table: Annotated[str | None, typer.Option("--table", help="Compare this table only.")] = None,
    where: Annotated[
        str | None,
        typer.Option(
            "--where",
            help="Compare only the rows this Spark SQL condition keeps (on both sides).",
        ),
    ] = None,
    project: ProjectDir = Path("."),
    as_json: JsonFlag = False,
) -> None:
    """Rows only in the source, only in the target, and changed. Exit 0 identical, 2 differ."""
    from hakiri.services.diff import DIFFERENT, diff_pipeline

    found = diff_pipeline(project, pipeline_id, table=table, where=where)
    if as_json:
        emit_json({"pipeline_id": pipeline_id, "tables": [t.as_dict() for t in found]})
    else:
        for one in found:
            _show(one.as_dict())
    if not all(t.identical for t in found):
        raise typer.Exit(DIFFERENT)


def _show(d: dict[str, Any]) -> None:
    source, target = d["source"], d["target_rows"]
    head = (
        f"{escape(d['table'])} → {escape(d['target'])}: {source['rows']:,} source rows "
        f"({source['system']}), {target['rows']:,} target rows ({target['system']})"
    )
    if d["identical"]:
        out.print(f"{head}: identical")
    else:
        counts = ", ".join(
            f"{d[kind]:,} {kind.replace('_', ' ')}"
            for kind in ("only_in_source", "only_in_target", "changed")
        )
        more = " (at least: the report stopped collecting)" if d["truncated"] else ""
        out.print(f"{head}: {counts}{more}")
        key = ", ".join(d["key"])
        for kind in ("only_in_source", "only_in_target"):
            keys = d["samples"][kind]
            if keys:
                shown = "; ".join(", ".join(str(v) for v in k) for k in keys)
                out.print(f"  {kind.replace('_', ' ')} ({escape(key)}): {escape(shown)}")
        if d["samples"]["changed"]:
            grid = Table("key", "column", "source", "target", box=None, pad_edge=False)
            for row in d["samples"]["changed"]:
                for column, values in row["columns"].items():
                    grid.add_row(
                        escape(", ".join(str(v) for v in row["key"])),
                        escape(column),
                        escape(str(values["source"])),
                        escape(str(values["target"])),
                    )
            out.print(grid)
    if d["quarantined_count"]:
        shown = "; ".join(", ".join(str(v) for v in k) for k in d["quarantined"])
        out.print(
            f"  quarantined by the row rules (not loaded, not counted as differences): "
            f"{d['quarantined_count']:,}: {escape(shown)}"
        )
    for column, why in d["not_compared"].items():
        err.print(f"  note: column {escape(column)} not compared: {why}")
    moved = d["moved"]
    err.print(
        f"  moved: {moved['source_rows'] + moved['target_rows']:,} rows and "
        f"{moved['source_segments'] + moved['target_segments']:,} segment sums "
        f"({(moved['source_bytes'] + moved['target_bytes']) / 1e6:.2f} MB) in "
        f"{moved['source_queries'] + moved['target_queries']} queries, {d['seconds']:.1f} s"
    )
