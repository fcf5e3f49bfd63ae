"""The source connectors, registered once: everything outside `hakiri.sources` asks here.

A connector (`files`, `postgres`, `rest`, `github`, `shopify`) is one `SourceKind` (`sources.base`):
its config model, what a batch of it is, the cursors it keeps, what it needs of the engine,
how its tables are named in lineage, and the factory of its `Source`. The planner, the
engine and the services look a kind up by the manifest's `connector` and never test it
themselves, so a new connector is a package beside `files/` and `postgres/` and a
`register(SourceKind(...))` (a test registers one of its own: tests/support/).

Importing this module stays cheap (`plan`'s hot path): each kind imports its reading
modules on first use.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from hakiri.catalog.records import Batch, NewBatch
from hakiri.errors import HakiriError
from hakiri.sources.base import Source, SourceKind
from hakiri.sources.files.kind import FILES
from hakiri.sources.postgres.kind import POSTGRES
from hakiri.sources.rest.kind import GITHUB, REST, SHOPIFY
from hakiri.spec.pipeline import PipelineSpec, TableSpec
from hakiri.spec.project import ProjectFile
from hakiri.spec.sources import BUILT_IN, register_source_config, unregister_source_config

__all__ = [
    "KINDS",
    "batch_files",
    "batch_range",
    "engine_needs",
    "kind_of",
    "register",
    "source_datasets",
    "source_for",
    "unregister",
]

KINDS: dict[str, SourceKind] = {
    kind.name: kind for kind in (FILES, POSTGRES, GITHUB, REST, SHOPIFY)
}
assert set(KINDS) == set(BUILT_IN), "spec.sources.BUILT_IN names the built-in connectors"


def register(kind: SourceKind) -> SourceKind:
    """Add a connector: manifests may name it from now on (`spec.sources`)."""
    if kind.name in BUILT_IN:
        raise ValueError(f"connector {kind.name!r} is built in")
    register_source_config(kind.name, kind.config)
    KINDS[kind.name] = kind
    return kind


def unregister(name: str) -> None:
    if name in BUILT_IN:
        raise ValueError(f"connector {name!r} is built in")
    KINDS.pop(name, None)
    unregister_source_config(name)


def kind_of(spec_or_name: PipelineSpec | str) -> SourceKind:
    """The kind a pipeline's source (or a connector's name) is."""
    name = spec_or_name if isinstance(spec_or_name, str) else spec_or_name.source.connector
    kind = KINDS.get(name)
    if kind is None:
        raise HakiriError(
            f"unknown connector {name!r}", f"the connectors are: {', '.join(sorted(KINDS))}"
        )
    return kind


def source_for(
    root: Path, settings: ProjectFile, spec: PipelineSpec, env: Mapping[str, str]
) -> Source:
    """The Source the pipeline reads (nothing is reached until it is asked)."""
    return kind_of(spec).open(root, settings, spec, env)


def engine_needs(spec: PipelineSpec) -> list[str]:
    """The engine capabilities reading the pipeline's source takes."""
    return kind_of(spec).engine_needs(spec)


def source_datasets(
    root: Path, settings: ProjectFile, spec: PipelineSpec, table: TableSpec, env: Mapping[str, str]
) -> list[tuple[str, str]]:
    """OpenLineage's (namespace, name) of the datasets one table of the pipeline reads."""
    return kind_of(spec).lineage(root, settings, spec, table, env)


# What any source's batch names, by the batch's kind (the kinds are the sources' own words:
# "file", "snapshot", "chunk", "walk", "changes").


def batch_range(batch: Batch | NewBatch) -> str | None:
    """The part of its table a batch reads, as a plan shows it: a cursor range, a walk's
    pages; None for a file or a snapshot."""
    if not batch.predicate:
        return None
    if batch.kind == "chunk":
        from hakiri.sources.cursors.ranges import CursorRange

        return CursorRange.from_predicate(batch.predicate).describe()
    if batch.kind == "walk":
        from hakiri.sources.rest.source import WalkPart

        return WalkPart.of(batch).describe()
    return None


def batch_files(batch: Batch | NewBatch) -> list[tuple[str, str]]:
    """(path, content hash) of each file a batch reads: a file batch's one, a files
    snapshot's every file; none for other batches."""
    if batch.kind == "snapshot" and batch.predicate and batch.predicate.startswith("["):
        from hakiri.sources.files.batches import snapshot_files

        return snapshot_files(batch)
    if batch.file_path is not None:
        return [(batch.file_path, batch.content_hash or "")]
    return []
