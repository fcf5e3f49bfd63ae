"""`hakiri backfill rewind` and `hakiri backfill history`: load a window of a table again.

A rewind never moves data itself. It adds the committed chunks that overlap the window
again, under a new generation (so new batch ids the destination's ledger has not seen),
together with a `backfill_rewinds` record of why, in one catalog transaction; the next
`hakiri apply` loads them like any pending chunk. The old batches stay committed: they
are the history. Only upsert pipelines may rewind, since the reloaded rows are already
in the target.

The catalog is opened without migrating (only apply migrates); the pipeline lease is
held while the chunks are added, so no apply is loading that table meanwhile.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hakiri.catalog.records import Batch, BatchStatus, Phase, Rewind
from hakiri.catalog.store import Catalog
from hakiri.catalog.url import catalog_url
from hakiri.engine.controls import holder_id, holder_is_dead
from hakiri.errors import HakiriError, LeaseHeld, PipelineNotFound
from hakiri.sources.cursors.batches import chunk_batch, incremental_of
from hakiri.sources.cursors.ranges import CursorRange, as_python, parse_value
from hakiri.sources.kinds import kind_of as source_kind
from hakiri.spec.loader import load_project
from hakiri.spec.pipeline import (
    CursorKind,
    IncrementalSpec,
    PipelineSpec,
    TableSpec,
)

__all__ = ["history", "rewind"]

# Adding a few rows to the catalog takes well under a second; a rewind that dies
# holding the lease blocks the pipeline's applies no longer than this.
REWIND_LEASE_TTL_SECONDS = 120.0


@dataclass(frozen=True)
class _Chunk:
    """The latest generation of one chunk range of the table."""

    range: CursorRange
    batch: Batch


def rewind(
    root: Path,
    pipeline_id: str,
    start: str,
    end: str,
    reason: str,
    table: str | None = None,
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Queue the committed chunks of `table` overlapping [start, end] to be loaded again."""
    env = os.environ if env is None else env
    project = load_project(root, env)
    if pipeline_id not in project.pipelines:
        raise PipelineNotFound(
            f"no pipeline `{pipeline_id}`", "`hakiri validate` lists the pipelines"
        )
    spec = project.pipelines[pipeline_id]
    project.require_variables([spec.id])
    entry = _rewindable_table(spec, table)
    why = " ".join(reason.split())
    if not why:
        raise HakiriError(
            "a rewind needs a reason",
            'say why the window is loaded again, e.g. --reason "vendor fix RT-481"; '
            "`hakiri backfill history` keeps it",
        )
    where = f"{spec.id}.{entry.name}"
    url = catalog_url(project.root, project.settings.catalog.url, env)
    with Catalog.open(url, migrate=False) as catalog:
        if not catalog.initialized:
            raise _never_applied(where, spec.id)
        holder = holder_id()
        lease = catalog.acquire_lease(spec.id, holder, REWIND_LEASE_TTL_SECONDS)
        if not lease.acquired and holder_is_dead(lease.holder):
            catalog.release_lease(spec.id, lease.holder)  # its process crashed on this host
            lease = catalog.acquire_lease(spec.id, holder, REWIND_LEASE_TTL_SECONDS)
        if not lease.acquired:
            since = lease.since.strftime("%Y-%m-%d %H:%M:%S UTC")
            raise LeaseHeld(
                f"pipeline `{spec.id}` is already running on {lease.host} since {since}",
                "wait for it to finish, then rewind again",
            )
        try:
            return _rewind(catalog, spec, entry, where, start, end, why)
        finally:
            catalog.release_lease(spec.id, holder)


def history(
    root: Path, pipeline_id: str, env: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """The pipeline's rewinds, oldest first; read-only."""
    env = os.environ if env is None else env
    project = load_project(root, env)
    url = catalog_url(project.root, project.settings.catalog.url, env)
    with Catalog.open(url, migrate=False) as catalog:
        if pipeline_id not in project.pipelines and catalog.pipeline_state(pipeline_id) is None:
            raise PipelineNotFound(
                f"no pipeline `{pipeline_id}`", "`hakiri validate` lists the pipelines"
            )
        return [
            {
                "pipeline_id": r.pipeline_id,
                "table": r.table_name,
                "from": r.range_from,
                "to": r.range_to,
                "reason": r.reason,
                "generation": r.generation,
                "chunks": r.chunks,
                "created_at": r.created_at.isoformat() if r.created_at else None,
            }
            for r in catalog.rewinds(pipeline_id)
        ]


# ---------------------------------------------------------------- checks on the manifest


def _rewindable_table(spec: PipelineSpec, name: str | None) -> TableSpec:
    """The table entry to rewind; HakiriError when the pipeline cannot rewind it."""
    if not source_kind(spec).has_cursors:
        raise HakiriError(
            f"pipeline `{spec.id}` reads a {spec.source.connector} source; rewind re-reads "
            "cursor ranges, which only PostgreSQL table sources have",
            "a files source reloads a file when its content changes; replace the file instead",
        )
    entries = spec.table_specs()
    names = ", ".join(t.name for t in entries)
    if name is None:
        if len(entries) > 1:
            raise HakiriError(
                f"pipeline `{spec.id}` reads {len(entries)} tables ({names})",
                "pick the one to rewind with --table",
            )
        entry = entries[0]
    else:
        found = [t for t in entries if t.name == name]
        if not found:
            raise HakiriError(
                f"pipeline `{spec.id}` has no table `{name}`", f"its tables are: {names}"
            )
        entry = found[0]
    if _cursor_column(spec, entry) is None:
        raise HakiriError(
            f"table {spec.id}.{entry.name} has no incremental cursor; rewind re-reads cursor "
            "ranges, and this table is loaded whole on each apply",
            'set `incremental = "<column>"` to load it in chunks; until then a changed table '
            "is reloaded by the next apply",
        )
    if not spec.load.strategy.rewindable:
        raise HakiriError(
            f"rewind reloads rows that are already in the target; mode "
            f"'{spec.load.mode.value}' of pipeline `{spec.id}` would load them twice",
            "use mode = 'upsert' with an upsert_key (reloaded rows replace themselves), "
            "replace_window (the window is replaced) or scd2 (a version already there is kept)",
        )
    return entry


def _cursor_column(spec: PipelineSpec, entry: TableSpec) -> str | None:
    incremental = incremental_of(spec, entry)
    return incremental.column if isinstance(incremental, IncrementalSpec) else incremental


def _never_applied(where: str, pipeline_id: str) -> HakiriError:
    return HakiriError(
        f"{where} has no cursor state yet: it was never loaded, so there is nothing to rewind",
        f"`hakiri apply {pipeline_id}` loads it first",
    )


# ---------------------------------------------------------------- under the lease


def _rewind(
    catalog: Catalog,
    spec: PipelineSpec,
    entry: TableSpec,
    where: str,
    start: str,
    end: str,
    reason: str,
) -> dict[str, Any]:
    state = catalog.get_cursor(spec.id, entry.name)
    if state is None or state.get("planned_to") is None:
        raise _never_applied(where, spec.id)
    column, kind = state["column"], CursorKind(state["kind"])
    declared = _cursor_column(spec, entry)
    if declared != column:
        raise HakiriError(
            f"the cursor of {where} is {declared} in the manifest but was {column} when last "
            "applied",
            f"`hakiri apply {spec.id}` plans the table on {declared} first; then rewind",
        )
    aware = "with time zone" in str(state.get("type", "")).lower()
    lo = parse_value(kind, start, column, aware=aware)
    hi = parse_value(kind, end, column, aware=aware)
    if as_python(kind, lo) > as_python(kind, hi):
        raise HakiriError(
            f"--from {lo} is after --to {hi}",
            "give the window's start with --from and its end with --to",
        )

    batches = [b for b in catalog.batches(spec.id) if b.table_name == entry.name]
    chunks = _latest_chunks(batches, column)
    overlapping = [c for c in chunks if c.range.overlaps(lo, hi)]
    if not overlapping:
        raise HakiriError(
            f"no loaded chunk of {where} overlaps {column} from {lo} to {hi}"
            + _covered(chunks, kind),
            f"`hakiri status {spec.id}` shows the cursor's range",
        )
    todo = [c for c in overlapping if c.batch.status is BatchStatus.COMMITTED]
    pending = len(overlapping) - len(todo)
    generation = 1 + max((b.generation for b in batches), default=0)
    added = [chunk_batch(entry.name, c.range, generation) for c in todo]
    if added:
        catalog.add_batches(
            spec.id,
            added,
            rewind=Rewind(spec.id, entry.name, str(lo), str(hi), reason, generation, len(added)),
        )
        catalog.set_phase(spec.id, Phase.BACKFILLING)
    return {
        "pipeline_id": spec.id,
        "table": entry.name,
        "column": column,
        "from": lo,
        "to": hi,
        "reason": reason,
        "generation": generation if added else None,
        "chunks": [
            {"batch_id": new.batch_id, "predicate": c.range.describe()}
            for new, c in zip(added, todo, strict=True)
        ],
        "already_pending": pending,
    }


def _latest_chunks(batches: Sequence[Batch], column: str) -> list[_Chunk]:
    """Per chunk range of the cursor `column`, its highest generation; in cursor order."""
    latest: dict[str, Batch] = {}
    for b in batches:
        if b.kind != "chunk" or b.predicate is None:
            continue
        known = latest.get(b.predicate)
        if known is None or b.generation > known.generation:
            latest[b.predicate] = b
    chunks = [_Chunk(CursorRange.from_predicate(p), b) for p, b in latest.items()]
    chunks = [c for c in chunks if c.range.column == column]
    return sorted(chunks, key=lambda c: _order(c.range))


def _order(chunk: CursorRange) -> tuple[int, Any, int, Any]:
    # Unbounded ends sort first (lo) and last (hi); plans always bound both today.
    kind = CursorKind(chunk.kind)
    lo = (0, None) if chunk.lo is None else (1, as_python(kind, chunk.lo))
    hi = (1, None) if chunk.hi is None else (0, as_python(kind, chunk.hi))
    return (lo[0], lo[1], hi[0], hi[1])


def _covered(chunks: Sequence[_Chunk], kind: CursorKind) -> str:
    """`; its chunks cover X to Y`, or nothing when that cannot be said simply."""
    los = [c.range.lo for c in chunks if c.range.lo is not None]
    his = [c.range.hi for c in chunks if c.range.hi is not None]
    if not los or not his:
        return ""
    first = min(los, key=lambda v: as_python(kind, v))
    last = max(his, key=lambda v: as_python(kind, v))
    return f"; its chunks cover {first} to {last}"
