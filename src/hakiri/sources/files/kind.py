"""`connector = "files"`: the connector as the rest of hakiri sees it (`sources.kinds`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hakiri.sources.base import Source, SourceKind
from hakiri.sources.files.needs import engine_needs
from hakiri.spec.pipeline import FilesConfig, PipelineSpec, TableSpec
from hakiri.spec.project import ProjectFile

__all__ = ["FILES"]


def _open(root: Path, settings: ProjectFile, spec: PipelineSpec, env: Mapping[str, str]) -> Source:
    from hakiri.sources.files.source import FileSource

    return FileSource.from_spec(root, settings, spec, env)


def _lineage(
    root: Path, settings: ProjectFile, spec: PipelineSpec, table: TableSpec, env: Mapping[str, str]
) -> list[tuple[str, str]]:
    config = spec.source.config
    assert isinstance(config, FilesConfig)
    return [("file", str((root / (table.path or config.path)).absolute()))]


def _garbage(project_root: Path, older_than_seconds: float) -> list[str]:
    from hakiri.sources.files.stand_ins import remove_stale_link_dirs

    return [str(d) for d in remove_stale_link_dirs(project_root, older_than_seconds)]


def _starter(pipeline_id: str, options: Mapping[str, str | None]) -> dict[str, Any]:
    file_format = options.get("format")
    config: dict[str, Any] = {
        "path": options.get("path") or f"data/{pipeline_id}/*.{file_format or 'csv'}"
    }
    if file_format:
        config["format"] = file_format
    return config


FILES = SourceKind(
    name="files",
    config=FilesConfig,
    open=_open,
    engine_needs=engine_needs,
    lineage=_lineage,
    collect_garbage=_garbage,
    starter=_starter,
)
