"""Which `Source` a pipeline reads: the one place that maps a connector to its implementation."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from hakiri.sources.base import Source
from hakiri.sources.cdc.source import CdcSource
from hakiri.sources.files.source import FileSource
from hakiri.sources.postgres.source import TableSource
from hakiri.sources.rest.github import GithubTableSource
from hakiri.sources.rest.source import RestTableSource
from hakiri.spec.pipeline import PipelineSpec, PostgresSourceConfig
from hakiri.spec.project import ProjectFile

__all__ = ["has_cursors", "source_for"]

_SOURCES: dict[
    str, type[FileSource] | type[TableSource] | type[GithubTableSource] | type[RestTableSource]
] = {
    "files": FileSource,
    "postgres": TableSource,
    "github": GithubTableSource,
    "rest": RestTableSource,
}


def source_for(
    root: Path, settings: ProjectFile, spec: PipelineSpec, env: Mapping[str, str]
) -> Source:
    config = spec.source.config
    if isinstance(config, PostgresSourceConfig) and config.cdc is not None:
        return CdcSource.from_spec(root, settings, spec, env)
    return _SOURCES[spec.source.connector].from_spec(root, settings, spec, env)


def has_cursors(spec: PipelineSpec) -> bool:
    """Does the pipeline's source keep cursors (and so chunks, rewinds and parallel loads)?"""
    return _SOURCES[spec.source.connector].has_cursors
