"""`connector = "postgres"`: the connector as the rest of hakiri sees it (`sources.kinds`).

A PostgreSQL source reads tables by cursor range or whole; with `cdc` it follows the
tables' changes through a replication slot instead (`sources.cdc`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hakiri.sources.base import Source, SourceKind
from hakiri.spec.connections import lineage_place, postgres_url
from hakiri.spec.pipeline import CursorKind, PipelineSpec, PostgresSourceConfig, TableSpec
from hakiri.spec.project import ProjectFile

__all__ = ["POSTGRES"]


def _config(spec: PipelineSpec) -> PostgresSourceConfig:
    config = spec.source.config
    assert isinstance(config, PostgresSourceConfig)
    return config


def _open(root: Path, settings: ProjectFile, spec: PipelineSpec, env: Mapping[str, str]) -> Source:
    if _config(spec).cdc is not None:
        from hakiri.sources.postgres.cdc_source import CdcSource

        return CdcSource.from_spec(root, settings, spec, env)
    from hakiri.sources.postgres.source import TableSource

    return TableSource.from_spec(root, settings, spec, env)


def _lineage(
    root: Path, settings: ProjectFile, spec: PipelineSpec, table: TableSpec, env: Mapping[str, str]
) -> list[tuple[str, str]]:
    config = _config(spec)
    namespace, database = lineage_place(postgres_url(settings, config, env))
    return [(namespace, f"{database}.{config.schema_name}.{table.name}")]


def _starter(pipeline_id: str, options: Mapping[str, str | None]) -> dict[str, Any]:
    connection = options.get("connection")
    return {"connection": connection} if connection else {}


POSTGRES = SourceKind(
    name="postgres",
    config=PostgresSourceConfig,
    open=_open,
    cursor_kinds=frozenset(CursorKind),
    types="postgres",
    engine_needs=lambda spec: ["postgres_source"],
    spark_jars=frozenset({"jdbc"}),
    lineage=_lineage,
    follows_changes=lambda spec: _config(spec).cdc is not None,
    starter=_starter,
)
