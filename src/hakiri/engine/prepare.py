"""The frame a batch becomes before any write or comparison, in one place.

Apply loads it, `plan --count-deletes|--count-changes` counts it and `hakiri diff` compares
it, so all three must see the same rows and columns: the source's read, then the pipeline's
transforms (when the read says what its columns are: an empty batch of undeclared columns
says nothing), then `renames` (a column is its new name from then on, whatever the source
calls it), then, for a load, the mode's own columns (scd2's validity, upsert's deleted_at)
at the batch's time. Lazy: nothing here runs a Spark job.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from hakiri.planner.evolution import followed_renames
from hakiri.sources.base import BatchRead
from hakiri.spec.loader import Project
from hakiri.spec.pipeline import PipelineSpec

__all__ = ["prepared", "prepared_for_load"]


def prepared(spec: PipelineSpec, read: BatchRead, project: Project | None = None) -> Any:
    """`read`'s frame as the pipeline loads it, before the mode's own columns: the rows a
    target's compare with (diff). A `join` step reads `project`'s context store."""
    from hakiri.spark.transforms import apply_transforms

    frame = (
        apply_transforms(read.frame, spec.transforms, _context_tables(read, project))
        if read.evidence
        else read.frame
    )
    renamed = followed_renames(frame.columns, spec.renames)
    return frame.withColumnsRenamed(renamed) if renamed else frame


def prepared_for_load(
    spec: PipelineSpec, read: BatchRead, batch_time: datetime | None, project: Project | None = None
) -> Any:
    """`read`'s frame as it is staged: prepared, then shaped for the load mode at the batch's
    time (what a load counts and writes)."""
    from hakiri.spark.load_shape import shape_for_load

    return shape_for_load(prepared(spec, read, project), spec.load, batch_time)


def _context_tables(read: BatchRead, project: Project | None) -> Any:
    """Reads a table of the project's context store (`[context] path`) by name, in the batch's
    session, at its current version: what a `join` step joins with."""
    if project is None:
        return None
    from hakiri.destinations.context.tables import table_frame

    store = project.root / project.settings.context.path
    return lambda name: table_frame(read.frame.sparkSession, store, name)
