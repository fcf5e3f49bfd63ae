"""`hakiri cdc lag|drop-slot`: a cdc_mirror pipeline's replication slot."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from hakiri.cli.render import JsonFlag, ProjectDir, emit_json, escape, out

app = typer.Typer(no_args_is_help=True)

PipelineArg = Annotated[str, typer.Argument(metavar="ID", help="The cdc_mirror pipeline.")]


@app.command("lag")
def lag(
    pipeline_id: PipelineArg, project: ProjectDir = Path("."), as_json: JsonFlag = False
) -> None:
    """How far the pipeline's targets are behind its source's WAL, and what the slot keeps."""
    from hakiri.services.cdc import lag as lag_of
    from hakiri.sources.cdc.lag import CdcLag

    found = lag_of(project, pipeline_id)
    if as_json:
        emit_json(found)
        return
    shown = CdcLag.model_validate({k: v for k, v in found.items() if k != "pipeline_id"})
    out.print(f"{escape(pipeline_id)}  {escape(shown.describe())}")


@app.command("drop-slot")
def drop_slot(
    pipeline_id: PipelineArg, project: ProjectDir = Path("."), as_json: JsonFlag = False
) -> None:
    """Drop the pipeline's replication slot; the next apply takes a new snapshot."""
    from hakiri.services.cdc import drop_slot as drop

    found = drop(project, pipeline_id)
    if as_json:
        emit_json(found)
        return
    slot = escape(found["slot"])
    if found["dropped"]:
        out.print(
            f"dropped replication slot {slot}: the next `hakiri apply {escape(pipeline_id)}` "
            "takes a new snapshot of every table"
        )
    else:
        out.print(f"replication slot {slot} does not exist: nothing to drop")
