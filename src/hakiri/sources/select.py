"""Which `Source` a pipeline reads: the one place that looks at the source's connector."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from hakiri.sources.base import Source
from hakiri.sources.file_source import FileSource
from hakiri.sources.table_source import TableSource
from hakiri.spec.pipeline import FilesSource, PipelineSpec, PostgresSource
from hakiri.spec.project import ProjectFile

__all__ = ["source_for"]


def source_for(
    root: Path, settings: ProjectFile, spec: PipelineSpec, env: Mapping[str, str]
) -> Source:
    if isinstance(spec.source, FilesSource):
        return FileSource(root, spec, spec.source.config)
    assert isinstance(spec.source, PostgresSource)
    return TableSource(settings, spec, spec.source.config, env)
